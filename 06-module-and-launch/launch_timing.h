// launch_timing.h — launch_bench's host-clock timing: the clock (medians: course::median),
// and the driver-API loop of empty-kernel launches whose <<<>>> twin is in runtime_launch.cu.
#pragma once

#include <cuda.h>

#include <chrono>
#include <vector>

#include "../common/check_driver.h"
#include "runtime_launch.h"

namespace lesson06 {

using Clock = std::chrono::steady_clock;

inline double microsecondsBetween(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::micro>(to - from).count();
}

// One timed loop of driver-API launches of the empty kernel into `stream` (see LaunchTimes).
inline LaunchTimes driverEmptyLaunches(CUfunction emptyKernel, CUstream stream, int launches) {
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < launches; ++i)
        CHECK_DRIVER(cuLaunchKernel(emptyKernel, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr));
    const Clock::time_point submitted = Clock::now();
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const Clock::time_point done = Clock::now();
    return {microsecondsBetween(start, submitted) / launches, microsecondsBetween(start, done) / launches};
}

}  // namespace lesson06
