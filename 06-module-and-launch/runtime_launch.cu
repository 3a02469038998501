// runtime_launch.cu — the same empty kernel as kernels/vector_ops.cu, launched the CUDA
// runtime's way (<<<>>>), for the launch-cost comparison of launch_bench --bench.
//
// cudaSetDevice makes the device's primary context current (cuda_runtime_api.h). launch_bench
// retained that context and made it current before calling this file, so both APIs share one
// context and launch into one stream; it checks the context of a cudaMalloc to be sure.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
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

bool runtimeUseDevice(int deviceOrdinal) {
    return runtimeOk(cudaSetDevice(deviceOrdinal), "cudaSetDevice");
}

CUdeviceptr runtimeAllocate(std::size_t bytes) {
    void* address = nullptr;
    if (!runtimeOk(cudaMalloc(&address, bytes), "cudaMalloc")) return 0;
    return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(address));
}

bool runtimeFree(CUdeviceptr address) {
    return runtimeOk(cudaFree(reinterpret_cast<void*>(static_cast<std::uintptr_t>(address))), "cudaFree");
}

LaunchTimes runtimeEmptyLaunches(CUstream stream, int launches) {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < launches; ++i) runtimeEmptyKernel<<<1, 1, 0, stream>>>();
    const Clock::time_point submitted = Clock::now();
    const bool launched = runtimeOk(cudaGetLastError(), "runtimeEmptyKernel<<<1, 1, 0, stream>>>");
    const bool finished = runtimeOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const Clock::time_point done = Clock::now();
    if (!launched || !finished) return {-1.0, -1.0};
    return {std::chrono::duration<double, std::micro>(submitted - start).count() / launches,
            std::chrono::duration<double, std::micro>(done - start).count() / launches};
}

}  // namespace lesson06
