// growth_timing.h — growing a buffer by doubling, two ways, timed step by step.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <vector>

struct GrowthStep {
    size_t from = 0;              // bytes before the step
    size_t to = 0;                // bytes after it (twice `from`)
    std::vector<double> remapMs;  // per timed run: cuMemCreate + cuMemMap + cuMemSetAccess of the new half
    std::vector<double> copyMs;   // per timed run: cuMemAlloc of the new size + cuMemcpyDtoD + cuMemFree
};

// Grows from `first` to `last` bytes (both powers of two, multiples of the granularity) by
// doubling, with each method in turn: one untimed warm-up run (the first calls pay one-time
// costs), then `runs` timed runs. One sample per step, method and run.
std::vector<GrowthStep> timeGrowth(CUdevice device, size_t first, size_t last, int runs);

// The table of step 8: per step and for the whole growth, the median and the minimum of the
// runs, and with `bench` the "bench:" lines. The speed-up is the ratio of the two medians.
void printGrowthTable(const std::vector<GrowthStep>& steps, bool bench);
