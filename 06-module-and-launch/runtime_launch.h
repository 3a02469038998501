// runtime_launch.h — the runtime-API half of lesson 06's launch-cost comparison
// (runtime_launch.cu, compiled by nvcc and linked with the CUDA runtime).
#pragma once

#include <cuda.h>

#include <cstddef>

namespace lesson06 {

// Host time per launch of one timed loop, in microseconds: `submit` when the loop of
// launches returned (nothing waited for), `total` after one synchronize at its end.
// Negative when a call failed (the error is printed to stderr).
struct LaunchTimes {
    double submitMicroseconds;
    double totalMicroseconds;
};

// cudaSetDevice(deviceOrdinal): cuda_runtime_api.h says it makes that device's primary context
// current to the calling thread (with cuCtxSetCurrent), whatever context was current before.
// False on failure.
bool runtimeUseDevice(int deviceOrdinal);

// One small cudaMalloc, returned as the driver address it is (0 on failure), and its cudaFree
// (false on failure): launch_bench asks the driver which context the runtime allocated it in.
CUdeviceptr runtimeAllocate(std::size_t bytes);
bool runtimeFree(CUdeviceptr address);

// `launches` launches of an empty kernel with <<<1, 1, 0, stream>>>, timed on the host clock.
// A CUstream is a cudaStream_t: both APIs name the same object.
LaunchTimes runtimeEmptyLaunches(CUstream stream, int launches);

}  // namespace lesson06
