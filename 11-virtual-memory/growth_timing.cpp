// growth_timing.cpp — remap (no copy) against allocate-copy-free, one growth step at a time.
//
// Both methods are timed on the host clock around the calls of one step, ending with
// the step's work finished on the GPU (cuCtxSynchronize), so the two columns measure
// the same thing: how long the application waits to have the larger buffer. One run is
// noisy (a step can take twice as long for no reason of its own), so every run is repeated
// and the table shows the median and the minimum; ratios come from the medians.
#include "growth_timing.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "grow_in_place.h"
#include "growable_buffer.h"

namespace {

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Remap: one reservation of `last` bytes; each step maps one more chunk after the others.
// `keep` false: the warm-up run, whose samples are dropped.
void timeRemap(CUdevice device, size_t first, size_t last, std::vector<GrowthStep>& steps, bool keep) {
    GrowableBuffer buffer = reserveGrowable(last);
    growTo(buffer, first, device);
    CHECK_DRIVER(cuMemsetD8(buffer.base, 0x5a, first));
    CHECK_DRIVER(cuCtxSynchronize());
    for (GrowthStep& step : steps) {
        const Clock::time_point start = Clock::now();
        growTo(buffer, step.to, device);
        CHECK_DRIVER(cuCtxSynchronize());
        if (keep) step.remapMs.push_back(millisecondsSince(start));
        // Untimed, in both methods: the new half gets data, as an application would write it.
        CHECK_DRIVER(cuMemsetD8(buffer.base + step.from, 0x5a, step.to - step.from));
        CHECK_DRIVER(cuCtxSynchronize());
    }
    release(buffer);
}

// Copy: each step allocates the larger buffer, copies the old bytes into it, frees the old one.
void timeCopy(size_t first, std::vector<GrowthStep>& steps, bool keep) {
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
        if (keep) step.copyMs.push_back(millisecondsSince(start));
        CHECK_DRIVER(cuMemsetD8(buffer + step.from, 0x5a, step.to - step.from));
        CHECK_DRIVER(cuCtxSynchronize());
    }
    CHECK_DRIVER(cuMemFree(buffer));
}

struct Spread {
    double median;
    double min;
};

// The median (the mean of the middle two for an even count) and the minimum of the samples.
Spread spreadOf(std::vector<double> samples) {
    std::sort(samples.begin(), samples.end());
    const size_t n = samples.size();
    const double median = n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2.0;
    return Spread{median, samples.front()};
}

}  // namespace

std::vector<GrowthStep> timeGrowth(CUdevice device, size_t first, size_t last, int runs) {
    std::vector<GrowthStep> steps;
    for (size_t size = first; size < last; size *= 2) steps.push_back(GrowthStep{size, 2 * size, {}, {}});
    for (int run = 0; run <= runs; ++run) {  // run 0 warms up and is not kept
        timeRemap(device, first, last, steps, run > 0);
        timeCopy(first, steps, run > 0);
    }
    return steps;
}

void printGrowthTable(const std::vector<GrowthStep>& steps, bool bench) {
    const size_t runs = steps.front().remapMs.size();
    std::printf(
        "method: host clock around one step's calls, ending with cuCtxSynchronize; "
        "one warm-up run, then %zu timed runs: median and minimum\n",
        runs);
    std::printf("| step | remap, median | remap, min | alloc + copy + free, median | alloc + copy + free, min |\n");
    std::printf("| --- | --- | --- | --- | --- |\n");
    std::vector<double> remapTotals(runs, 0.0);
    std::vector<double> copyTotals(runs, 0.0);
    for (const GrowthStep& step : steps) {
        const Spread remap = spreadOf(step.remapMs);
        const Spread copy = spreadOf(step.copyMs);
        std::printf("| %s -> %s | %.3f ms | %.3f ms | %.3f ms | %.3f ms |\n", sizeText(step.from).c_str(),
                    sizeText(step.to).c_str(), remap.median, remap.min, copy.median, copy.min);
        for (size_t run = 0; run < runs; ++run) {
            remapTotals[run] += step.remapMs[run];
            copyTotals[run] += step.copyMs[run];
        }
    }
    // The total of each run first, then their median: the median of a sum, not a sum of medians.
    const Spread remapTotal = spreadOf(remapTotals);
    const Spread copyTotal = spreadOf(copyTotals);
    std::printf("| total | %.3f ms | %.3f ms | %.3f ms | %.3f ms |\n", remapTotal.median, remapTotal.min,
                copyTotal.median, copyTotal.min);
    if (!bench) return;
    const std::string range = sizeText(steps.front().from) + " -> " + sizeText(steps.back().to);
    const Spread lastRemap = spreadOf(steps.back().remapMs);
    const Spread lastCopy = spreadOf(steps.back().copyMs);
    std::printf("bench: grow %s by remapping, median = %.3f ms\n", range.c_str(), remapTotal.median);
    std::printf("bench: grow %s by remapping, min = %.3f ms\n", range.c_str(), remapTotal.min);
    std::printf("bench: grow %s by alloc + copy + free, median = %.3f ms\n", range.c_str(), copyTotal.median);
    std::printf("bench: grow %s by alloc + copy + free, min = %.3f ms\n", range.c_str(), copyTotal.min);
    std::printf("bench: last step by remapping, median = %.3f ms\n", lastRemap.median);
    std::printf("bench: last step by alloc + copy + free, median = %.3f ms\n", lastCopy.median);
    // A figure of this GPU, not a rule: below 1 the copy was the faster way here.
    std::printf("bench: alloc + copy + free / remap, ratio of the total medians = %.2f x\n",
                copyTotal.median / remapTotal.median);
}
