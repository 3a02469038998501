// runtime_launch.h — the runtime-API half of lesson 06's launch-cost comparison
// (runtime_launch.cu, compiled by nvcc and linked with the CUDA runtime).
#pragma once

namespace lesson06 {

// Launches an empty kernel with <<<1, 1>>> on the device's primary context: `warmUp`
// times, then `launches` times timed on the host clock, waiting for the GPU once at the
// end. Returns the host time per timed launch in microseconds, or a negative number when
// a runtime call failed (the error is printed to stderr).
double runtimeEmptyLaunchMicroseconds(int deviceOrdinal, int warmUp, int launches);

}  // namespace lesson06
