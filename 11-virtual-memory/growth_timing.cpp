// growth_timing.cpp — remap (no copy) against allocate-copy-free, one growth step at a time.
//
// Both methods are timed on the host clock around the calls of one step, ending with
// the step's work finished on the GPU (cuCtxSynchronize), so the two columns measure
// the same thing: how long the application waits to have the larger buffer.
#include "growth_timing.h"

#include <chrono>

#include "../common/check_driver.h"
#include "growable_buffer.h"

namespace {

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Remap: one reservation of `last` bytes; each step maps one more chunk after the others.
void timeRemap(CUdevice device, size_t first, size_t last, std::vector<GrowthStep>& steps) {
    GrowableBuffer buffer = reserveGrowable(last);
    growTo(buffer, first, device);
    CHECK_DRIVER(cuMemsetD8(buffer.base, 0x5a, first));
    CHECK_DRIVER(cuCtxSynchronize());
    for (GrowthStep& step : steps) {
        const Clock::time_point start = Clock::now();
        growTo(buffer, step.to, device);
        CHECK_DRIVER(cuCtxSynchronize());
        step.remapMs = millisecondsSince(start);
        // Untimed, in both methods: the new half gets data, as an application would write it.
        CHECK_DRIVER(cuMemsetD8(buffer.base + step.from, 0x5a, step.to - step.from));
        CHECK_DRIVER(cuCtxSynchronize());
    }
    release(buffer);
}

// Copy: each step allocates the larger buffer, copies the old bytes into it, frees the old one.
void timeCopy(size_t first, std::vector<GrowthStep>& steps) {
    CUdeviceptr buffer = 0;
    CHECK_DRIVER(cuMemAlloc(&buffer, first));
    CHECK_DRIVER(cuMemsetD8(buffer, 0x5a, first));
    CHECK_DRIVER(cuCtxSynchronize());
    for (GrowthStep& step : steps) {
        const Clock::time_point start = Clock::now();
        CUdeviceptr larger = 0;
        CHECK_DRIVER(cuMemAlloc(&larger, step.to));
        CHECK_DRIVER(cuMemcpyDtoD(larger, buffer, step.from));
        CHECK_DRIVER(cuCtxSynchronize());
        CHECK_DRIVER(cuMemFree(buffer));
        buffer = larger;  // a new address: every pointer into the old buffer is now dangling
        step.copyMs = millisecondsSince(start);
        CHECK_DRIVER(cuMemsetD8(buffer + step.from, 0x5a, step.to - step.from));
        CHECK_DRIVER(cuCtxSynchronize());
    }
    CHECK_DRIVER(cuMemFree(buffer));
}

}  // namespace

std::vector<GrowthStep> timeGrowth(CUdevice device, size_t first, size_t last) {
    std::vector<GrowthStep> steps;
    for (size_t size = first; size < last; size *= 2) steps.push_back(GrowthStep{size, 2 * size, 0.0, 0.0});
    for (int run = 0; run < 2; ++run) {  // the first run warms up, the second is kept
        timeRemap(device, first, last, steps);
        timeCopy(first, steps);
    }
    return steps;
}
