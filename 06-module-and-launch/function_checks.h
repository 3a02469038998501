// function_checks.h — what load_and_launch checks about a function taken from a loaded module:
// which code the driver took for it, which module it is located in, whether vectorAdd through it
// gives the host's sums, saxpy launched with kernelParams, and the occupancy calculator's answer.
// Every module it loads (fatbin, cubin, PTX, library) holds the same kernels: each must pass.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace lesson06 {

// Which code the driver took for a function: the SASS architecture it runs (BINARY_VERSION)
// and the PTX ISA target that SASS was compiled from (PTX_VERSION), both as major * 10 + minor.
inline void printCodeTaken(const char* label, CUfunction function) {
    int binary = 0;
    int ptx = 0;
    CHECK_DRIVER(cuFuncGetAttribute(&binary, CU_FUNC_ATTRIBUTE_BINARY_VERSION, function));
    CHECK_DRIVER(cuFuncGetAttribute(&ptx, CU_FUNC_ATTRIBUTE_PTX_VERSION, function));
    std::printf("%s runs: SASS for sm_%d, compiled from compute_%d\n", label, binary, ptx);
}

// Whether `function` is located in `module`, the module it was just taken from, as the driver
// records it (cuFuncGetModule: "the handle of the module that function hfunc is located in").
// The sums cannot tell one module's vectorAdd from another's: they compute the same thing.
inline bool locatedIn(const char* label, CUfunction function, CUmodule module) {
    CUmodule owner = nullptr;
    CHECK_DRIVER(cuFuncGetModule(&owner, function));
    std::printf("%s is located in the module just loaded: %s\n", label, owner == module ? "yes" : "NO");
    return owner == module;
}

// cuOccupancyMaxPotentialBlockSize's answer against other sources, for a function whose own limit
// is a whole number of warps (vectorAdd's: 1024; cuda_occupancy.h tries the limit itself first,
// so a kernel bounded at 100 threads would get 100). The block size is a whole number of warps
// (CU_DEVICE_ATTRIBUTE_WARP_SIZE) within the function's own limit, at least one
// such block fits on an SM (cuOccupancyMaxActiveBlocksPerMultiprocessor), and the grid that
// "achieves the maximum occupancy" (cuda.h) is that many blocks on every SM, as cuda_occupancy.h,
// the header form of the same calculation, computes it (numBlocks * numSms).
inline bool occupancyAnswerHolds(CUdevice device, CUfunction function, int gridBlocks, int blockThreads) {
    int warpSize = 0, multiprocessors = 0, maxThreads = 0, blocksPerSm = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&warpSize, CU_DEVICE_ATTRIBUTE_WARP_SIZE, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
    CHECK_DRIVER(cuFuncGetAttribute(&maxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function));
    const bool wholeWarps = blockThreads > 0 && blockThreads % warpSize == 0 && blockThreads <= maxThreads;
    if (wholeWarps)  // a block size the function cannot take would make the query fail
        CHECK_DRIVER(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocksPerSm, function, blockThreads, 0));
    std::printf("occupancy cross-check: whole warps within the function's max %d: %s; %d blocks per SM x %d SMs\n",
                maxThreads, wholeWarps ? "yes" : "NO", blocksPerSm, multiprocessors);
    return wholeWarps && blocksPerSm > 0 && gridBlocks == blocksPerSm * multiprocessors;
}

// x and y on the device and on the host, z on the device, and the launch shape for vectorAdd.
struct VectorAddCheck {
    CUdeviceptr x, y, z;
    const std::vector<float>& hostX;
    const std::vector<float>& hostY;
    int gridBlocks, blockThreads;

    // z = x + y through one vectorAdd handle. The host does the same float additions, so the
    // sums must be equal bit for bit, whichever module the function came from.
    bool run(CUfunction vectorAdd, const char* how) const {
        const int count = static_cast<int>(hostX.size());
        unsigned long long n = hostX.size();
        CUdeviceptr a = x, b = y, c = z;
        void* params[] = {&a, &b, &c, &n};
        CHECK_DRIVER(cuMemsetD32(z, 0, hostX.size()));
        CHECK_DRIVER(cuLaunchKernel(vectorAdd, gridBlocks, 1, 1, blockThreads, 1, 1, 0, nullptr, params, nullptr));
        CHECK_DRIVER(cuCtxSynchronize());
        std::vector<float> hostZ(hostX.size());
        CHECK_DRIVER(cuMemcpyDtoH(hostZ.data(), z, hostZ.size() * sizeof(float)));
        int wrong = 0;
        for (int i = 0; i < count; ++i) wrong += hostZ[i] != hostX[i] + hostY[i];
        std::printf("vector add via %s: %s\n", how, wrong == 0 ? "exact" : "WRONG");
        return wrong == 0;
    }
};

// Step 8: kernelParams holds one pointer per kernel parameter, to a host variable of exactly
// the parameter's type; the driver knows each parameter's size and offset from the module and
// copies the values at launch. saxpy (y = a * x + y) may fuse a * x + y into one FMA (one
// rounding) where the host rounds twice: |gpu - host| <= 1e-6 * (|a * x| + |y|), about 8 ulps.
inline void saxpyWithinTolerance(CUfunction saxpy, const VectorAddCheck& v, course::Verdict& verdict) {
    constexpr float kTolerance = 1e-6f;
    float a = 1.7f;
    CUdeviceptr x = v.x, y = v.y;
    int count = static_cast<int>(v.hostX.size());
    void* params[] = {&a, &x, &y, &count};
    CHECK_DRIVER(cuLaunchKernel(saxpy, (count + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    CHECK_DRIVER(cuCtxSynchronize());
    std::vector<float> result(v.hostX.size());
    CHECK_DRIVER(cuMemcpyDtoH(result.data(), y, result.size() * sizeof(float)));
    double worst = 0.0;
    for (int i = 0; i < count; ++i) {
        const double expected = a * v.hostX[i] + v.hostY[i];
        const double scaleOfTerms = std::fabs(a * v.hostX[i]) + std::fabs(v.hostY[i]);
        worst = std::max(worst, std::fabs(static_cast<double>(result[i]) - expected) / scaleOfTerms);
    }
    std::printf("saxpy worst error / (|a*x| + |y|): %.2e (tolerance %.0e)\n", worst, kTolerance);
    std::printf("saxpy within tolerance: %s\n", worst <= kTolerance ? "yes" : "NO");
    verdict.check("saxpy within tolerance", worst <= kTolerance);
}

}  // namespace lesson06
