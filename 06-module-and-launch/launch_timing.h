// launch_timing.h — launch_bench's host-clock timing: the clock (medians: course::median),
// the driver-API loop of empty-kernel launches whose <<<>>> twin is in runtime_launch.cu, and
// the timed module loads.
#pragma once

#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
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

// cuModuleLoadData time of one format, median of 7 loads (each unloaded again). One check per
// format: all 7 loads succeed (the first refusal ends the loop, its code printed by REPORT_DRIVER).
inline void benchModuleLoad(const char* format, const std::string& image, course::Verdict& verdict) {
    constexpr int kLoads = 7;
    std::vector<double> samples;
    CUresult loaded = CUDA_SUCCESS;
    for (int i = 0; i < kLoads && loaded == CUDA_SUCCESS; ++i) {
        CUmodule module = nullptr;
        const Clock::time_point start = Clock::now();
        loaded = REPORT_DRIVER(cuModuleLoadData(&module, image.data()));
        if (loaded != CUDA_SUCCESS) break;
        samples.push_back(microsecondsBetween(start, Clock::now()) / 1e3);
        CHECK_DRIVER(cuModuleUnload(module));
    }
    if (loaded == CUDA_ERROR_JIT_COMPILATION_DISABLED) {
        std::printf("section module load %s: SKIP (the driver refused the PTX with %s: CUDA_DISABLE_PTX_JIT is set)\n",
                    format, course::driverErrorName(loaded));
        return;
    }
    if (!verdict.check(("module load " + std::string(format) + " succeeds").c_str(), loaded == CUDA_SUCCESS)) return;
    std::printf("bench: module load %s = %.3f ms\n", format, course::median(samples));
}

}  // namespace lesson06
