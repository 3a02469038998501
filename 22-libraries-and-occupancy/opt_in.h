// opt_in.h — step 5 of lesson 22's libraries program: a launch that asks dynamicSum for more
// dynamic shared memory than a block gets by default, before and after the kernel's limit is
// raised with cuKernelSetAttribute (ABI version 12000 in cudaTypedefs.h; the program asks for
// 12.4 anyway, lesson22.h).
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstdio>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace lesson22 {

#if CUDA_VERSION >= 12040
// One block of 256 threads of dynamicSum over bytes / 4 ints of dynamic shared memory; the
// launch's result, and the sum the kernel wrote (0 when it did not run).
inline CUresult launchDynamicSum(CUkernel kernel, CUdeviceptr sum, unsigned int bytes, unsigned int& value) {
    int count = static_cast<int>(bytes / sizeof(int));
    void* params[] = {&sum, &count};
    CHECK_DRIVER(cuMemsetD32(sum, 0, 1));
    const CUresult launched = REPORT_DRIVER(
        cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 256, 1, 1, bytes, nullptr, params, nullptr));
    CHECK_DRIVER(cuCtxSynchronize());
    CHECK_DRIVER(cuMemcpyDtoH(&value, sum, sizeof(value)));
    return launched;
}

// Step 5: 16 KiB more dynamic shared memory than dynamicSum may use by default, refused until
// the kernel's limit is raised with cuKernelSetAttribute for this device. The default limit is
// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK less the kernel's static shared memory
// (cuda.h:986-989): "If the user-specified dynamic shared memory size is larger than this value,
// the launch will fail" (984-985). It may be raised to the opt-in limit less the static size (990-991).
inline void optInToDynamicShared(course::Verdict& verdict, CUkernel dynamicSum, CUdevice device) {
    int perBlock = 0;
    int optIn = 0;
    int staticShared = 0;
    int defaultLimit = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&perBlock, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&optIn, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device));
    CHECK_DRIVER(cuKernelGetAttribute(&staticShared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, dynamicSum, device));
    CHECK_DRIVER(
        cuKernelGetAttribute(&defaultLimit, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamicSum, device));
    std::printf("shared memory per block: %d bytes, %d bytes after opting in\n", perBlock, optIn);
    const unsigned int wanted = static_cast<unsigned int>(perBlock - staticShared) + 16384u;
    std::printf("dynamicSum: %d bytes of static shared memory, dynamic limit %d bytes; the launch asks for %u\n",
                staticShared, defaultLimit, wanted);
    if (static_cast<int>(wanted) > optIn - staticShared) {
        std::printf("section opt-in: SKIP (a block may opt into at most %d bytes here)\n", optIn);
        return;
    }
    const unsigned long long ints = wanted / sizeof(int);
    const auto expectedSum = static_cast<unsigned int>(ints * (ints - 1) / 2);  // unsigned: modulo 2^32, as on the GPU
    CUdeviceptr sum = 0;
    CHECK_DRIVER(cuMemAlloc(&sum, sizeof(unsigned int)));
    unsigned int before = 0;
    const CUresult refused = launchDynamicSum(dynamicSum, sum, wanted, before);
    std::printf("dynamicSum with %u bytes of dynamic shared memory, before opting in: %s\n", wanted,
                course::driverErrorName(refused));
    // cuda.h says only that the launch "will fail" (984-985), not with which code: any error
    // passes, and the code is printed. The kernel must not have run: the sum stays as cleared.
    verdict.check("dynamic shared memory past the default limit refused before cuKernelSetAttribute",
                  refused != CUDA_SUCCESS && before == 0);
    CHECK_DRIVER(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(wanted),
                                      dynamicSum, device));
    // A preference only: the driver uses it "if possible" (cuda.h:8423).
    CHECK_DRIVER(cuKernelSetCacheConfig(dynamicSum, CU_FUNC_CACHE_PREFER_SHARED, device));
    int limit = 0;
    CHECK_DRIVER(cuKernelGetAttribute(&limit, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamicSum, device));
    unsigned int after = 0;
    const CUresult ran = launchDynamicSum(dynamicSum, sum, wanted, after);
    CHECK_DRIVER(cuMemFree(sum));
    std::printf("dynamicSum limit after cuKernelSetAttribute: %d bytes; launch: %s, sum %u (expected %u)\n", limit,
                course::driverErrorName(ran), after, expectedSum);
    verdict.check("the same launch runs after cuKernelSetAttribute", ran == CUDA_SUCCESS && after == expectedSum);
    // cuda.h gives the default (986-989: 0 where the static size is larger than the block's), and
    // says cuKernelGetAttribute "will always return the attribute value set by" cuKernelSetAttribute
    // (8348-8349).
    verdict.check("cuKernelGetAttribute reads the dynamic shared memory limit cuda.h gives, then the one set",
                  defaultLimit == std::max(perBlock - staticShared, 0) && limit == static_cast<int>(wanted));
}
#endif

}  // namespace lesson22
