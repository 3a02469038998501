// runtime_launch.cu — the same empty kernel as kernels/vector_ops.cu, launched the CUDA
// runtime's way (<<<>>>), for the launch-cost comparison in lesson 06's --bench mode.
//
// The runtime works in each device's primary context. main.cpp retained that same context
// and made it current before calling this file, so both APIs share one context: the same
// memory, the same modules and the same NULL stream (main.cpp checks it afterwards).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>

#include "runtime_launch.h"

namespace {

__global__ void runtimeEmptyKernel() {}

bool runtimeOk(cudaError_t error, const char* what) {
    if (error == cudaSuccess) return true;
    std::fprintf(stderr, "CUDA runtime call failed: %s\n  error: %s: %s\n", what, cudaGetErrorName(error),
                 cudaGetErrorString(error));
    return false;
}

}  // namespace

namespace lesson06 {

double runtimeEmptyLaunchMicroseconds(int deviceOrdinal, int warmUp, int launches) {
    // Selects the device; its primary context is the one main.cpp already made current.
    if (!runtimeOk(cudaSetDevice(deviceOrdinal), "cudaSetDevice")) return -1.0;

    // The first launches load the runtime's own module into the context (lazily) and
    // warm up the launch path; they are not timed.
    for (int i = 0; i < warmUp; ++i) runtimeEmptyKernel<<<1, 1>>>();
    if (!runtimeOk(cudaGetLastError(), "runtimeEmptyKernel<<<1, 1>>> (warm-up)") ||
        !runtimeOk(cudaDeviceSynchronize(), "cudaDeviceSynchronize (warm-up)"))
        return -1.0;

    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < launches; ++i) runtimeEmptyKernel<<<1, 1>>>();
    const bool launched = runtimeOk(cudaGetLastError(), "runtimeEmptyKernel<<<1, 1>>>");
    const bool finished = runtimeOk(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    const auto stop = std::chrono::steady_clock::now();
    if (!launched || !finished) return -1.0;
    return std::chrono::duration<double, std::micro>(stop - start).count() / launches;
}

}  // namespace lesson06
