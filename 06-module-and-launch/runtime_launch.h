// runtime_launch.h — the runtime-API half of lesson 06's launch-cost comparison
// (runtime_launch.cu, compiled by nvcc and linked with the CUDA runtime).
#pragma once

#include <cuda.h>

namespace lesson06 {

// Host time per launch of one timed loop, in microseconds: `submit` when the loop of
// launches returned (nothing waited for), `total` after one synchronize at its end.
// Negative when a call failed (the error is printed to stderr).
struct LaunchTimes {
    double submitMicroseconds;
    double totalMicroseconds;
};

// Makes device `deviceOrdinal` the runtime's current device. The runtime then works in that
// device's primary context, which the caller already made current. False on failure.
bool runtimeUseDevice(int deviceOrdinal);

// `launches` launches of an empty kernel with <<<1, 1, 0, stream>>>, timed on the host clock.
// A CUstream is a cudaStream_t: both APIs name the same object.
LaunchTimes runtimeEmptyLaunches(CUstream stream, int launches);

}  // namespace lesson06
