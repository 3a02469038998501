// suggestion.h — step 4 of lesson 22's occupancy program: the dynamic shared memory function
// given to cuOccupancyMaxPotentialBlockSizeWithFlags, and the check of the block size and grid
// size it suggests against the driver's occupancy at every other block size.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstdio>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "residency.h"

namespace lesson22 {

constexpr size_t kSharedPerThread = 256;  // bytes of dynamic shared memory per thread, step 4

// The dynamic shared memory function of step 4 (a CUoccupancyB2DSize): it "computes the dynamic
// shared memory needed by func for any given block size" (cuda.h:21697-21698). For which block
// sizes, and how often, cuOccupancyMaxPotentialBlockSizeWithFlags calls it, cuda.h does not say.
inline size_t sharedBytesFor(int blockSize) {
    return static_cast<size_t>(blockSize) * kSharedPerThread;
}

// Warps per SM for blocks of `size` threads with sharedBytesFor(size) bytes each: the blocks
// cuOccupancyMaxActiveBlocksPerMultiprocessor predicts, times the warps of one block.
inline int warpsPerSm(const Gpu& gpu, CUfunction function, int size) {
    int blocks = 0;
    CHECK_DRIVER(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, function, size, sharedBytesFor(size)));
    return blocks * ((size + gpu.warpSize - 1) / gpu.warpSize);
}

// cuda.h: the suggested block size "can achieve the maximum occupancy (or, the maximum number of
// active warps with the fewest blocks per multiprocessor)", and minGridSize is "the minimum grid
// size to achieve the maximum occupancy" (cuda.h:21678-21681). So no block of whole warps that
// the kernel can take (its thread limit; sharedBytesFor within its dynamic limit, step 2) puts
// more warps on an SM; the minimum grid being the suggested size's blocks on every SM is how
// cuda_occupancy.h, the header form of the same calculation, computes it (numBlocks * numSms):
// the check shows the two calls agree, not an independent prediction.
inline void checkSuggestion(course::Verdict& verdict, const Gpu& gpu, CUfunction function, int suggested, int minGrid,
                            int dynamicLimit) {
    int maxThreads = 0;
    CHECK_DRIVER(cuFuncGetAttribute(&maxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function));
    int most = 0;
    for (int size = gpu.warpSize; size <= maxThreads && sharedBytesFor(size) <= static_cast<size_t>(dynamicLimit);
         size += gpu.warpSize)
        most = std::max(most, warpsPerSm(gpu, function, size));
    const int atSuggested = warpsPerSm(gpu, function, suggested);
    const int warpsPerBlock = (suggested + gpu.warpSize - 1) / gpu.warpSize;
    const int blocks = warpsPerBlock > 0 ? atSuggested / warpsPerBlock : 0;
    std::printf("warps per SM: %d at the suggested size, at most %d at any size of whole warps\n", atSuggested, most);
    std::printf("the suggested size's blocks on every SM: %d x %d SMs = %d blocks\n", blocks, gpu.sms,
                blocks * gpu.sms);
    verdict.check("the suggested block size reaches the most warps per SM, and the minimum grid fills every SM",
                  most > 0 && atSuggested >= most && minGrid == blocks * gpu.sms);
}

}  // namespace lesson22
