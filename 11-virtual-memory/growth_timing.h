// growth_timing.h — growing a buffer by doubling, two ways, timed step by step.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <vector>

struct GrowthStep {
    size_t from = 0;       // bytes before the step
    size_t to = 0;         // bytes after it (twice `from`)
    double remapMs = 0.0;  // cuMemCreate + cuMemMap + cuMemSetAccess of the new half
    double copyMs = 0.0;   // cuMemAlloc of the new size + cuMemcpyDtoD of the old bytes + cuMemFree
};

// Grows from `first` to `last` bytes (both powers of two, multiples of the granularity)
// by doubling, with each method in turn. Each method runs twice and the second run is
// kept, so one-time costs of the first calls are not counted.
std::vector<GrowthStep> timeGrowth(CUdevice device, size_t first, size_t last);
