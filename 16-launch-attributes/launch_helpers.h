// launch_helpers.h — lesson 16's small helpers: the header-version skip, the compute
// capability, a launch configuration without attributes, a copy back from the GPU, and
// whether a tool that runs one kernel at a time is attached.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace lesson16 {

// CUDA 11.8's cuda.h has cuLaunchKernelEx and CUlaunchConfig, but documents
// CU_LAUNCH_ATTRIBUTE_PRIORITY as "Valid for graph nodes." only (12.4's: "Valid for streams,
// graph nodes, launches.") and has no memory sync domains, which hints.cpp uses; 12.4's has
// them. Which release between the two added them, those headers do not tell: the guard sits at
// 12.0, so headers from 12.0 to 12.3 that lacked them would fail to compile rather than skip.
constexpr int kHeadersNeeded = 12000;

// What a program built with older headers prints instead of its steps.
inline int skipForOldHeaders(const char* section) {
    std::printf("section %s: SKIP (built with CUDA %s headers; the lesson's guard asks for %s or newer)\n", section,
                course::formatCudaVersion(CUDA_VERSION).c_str(), course::formatCudaVersion(kHeadersNeeded).c_str());
    std::printf("Result = SKIP (cuLaunchKernelEx and its attributes need newer CUDA headers)\n");
    return course::kExitNotApplicable;
}

// 10 * major + minor (90 for an H100), printed as "compute capability: 9.0".
inline int computeCapability(CUdevice device) {
    int major = 0;
    int minor = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
    std::printf("compute capability: %d.%d\n", major, minor);
    return 10 * major + minor;
}

// The "section NAME: SKIP" and "Result = SKIP" lines of a program that needs compute
// capability 9.0 (clusters, programmatic dependent launch) on an older GPU.
inline int skipForComputeCapability(const char* section, int capability) {
    std::printf("section %s: SKIP (needs compute capability 9.0; this GPU has %d.%d)\n", section, capability / 10,
                capability % 10);
    std::printf("Result = SKIP (nothing in this program runs below compute capability 9.0)\n");
    return course::kExitNotApplicable;
}

// The whole buffer, copied back after the stream has finished with it.
inline std::vector<int> copyBack(CUdeviceptr buffer, size_t count, CUstream stream) {
    std::vector<int> host(count, 0);
    CHECK_DRIVER(cuMemcpyDtoHAsync(host.data(), buffer, count * sizeof(int), stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    return host;
}

#if CUDA_VERSION >= 12000
// A 1-D launch: `blocks` x `threads`, no dynamic shared memory, on `stream`, with the
// attributes given (none: the same launch cuLaunchKernel makes).
inline CUlaunchConfig launchConfig(unsigned int blocks, unsigned int threads, CUstream stream,
                                   CUlaunchAttribute* attributes = nullptr, unsigned int count = 0) {
    CUlaunchConfig config{};
    config.gridDimX = blocks;
    config.gridDimY = 1;
    config.gridDimZ = 1;
    config.blockDimX = threads;
    config.blockDimY = 1;
    config.blockDimZ = 1;
    config.sharedMemBytes = 0;
    config.hStream = stream;
    config.attrs = attributes;
    config.numAttrs = count;
    return config;
}
#endif

}  // namespace lesson16
