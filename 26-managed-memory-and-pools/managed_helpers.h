// managed_helpers.h — lesson 26's small helpers: the test pattern the host judges the GPU's
// writes against, the kernels and one launch shape for all of them, the check line of a part this
// machine cannot run, and names for the locations cuMemRangeGetAttribute answers with.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/device_info.h"

namespace lesson26 {

// Word i of test data number `seed`: the same function as the kernels' patternWord
// (kernels/managed_kernels.cu), computed here on the host to judge what a kernel wrote.
inline unsigned int patternWord(unsigned long long i, unsigned int seed) {
    return static_cast<unsigned int>(i * 2654435761ull) ^ (seed * 0x9E3779B9u);
}

// Words of `data` (count of them) that are not patternWord(first + i, seed) * mul + add: `first` is
// the index of data[0] in the whole array, for a check made piece by piece.
inline size_t wrongWords(const unsigned int* data, size_t count, unsigned int seed, unsigned int mul = 1,
                         unsigned int add = 0, unsigned long long first = 0) {
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += data[i] != patternWord(first + i, seed) * mul + add ? 1 : 0;
    return wrong;
}

// Writes the pattern from the host (on managed memory: the CPU's first touch of those pages).
inline void writePattern(unsigned int* data, size_t count, unsigned int seed) {
    for (size_t i = 0; i < count; ++i) data[i] = patternWord(i, seed);
}

// A check this machine cannot run (one GPU, an older driver, an attribute that is 0): the same
// "check NAME:" label as where it runs, with "SKIP (reason)" as its value; it decides nothing
// (course::Verdict::checkFreeMemory prints the same form).
inline void skipCheck(const char* name, const std::string& reason) {
    std::printf("check %s: SKIP (%s)\n", name, reason.c_str());
}

// A device as a CUmemLocation (the type every toolkit the course supports has; course::deviceLocation
// in common/cuda_compat.h exists only with CUDA 13 headers, for the calls that changed there).
inline CUmemLocation locationOf(CUdevice device) {
    CUmemLocation location{};
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = device;
    return location;
}

// The three kernels of kernels/managed_kernels.cu, from the fatbin built next to the program,
// loaded into the context current on this thread (a module belongs to one context).
struct Kernels {
    CUmodule module = nullptr;
    CUfunction scaleAdd = nullptr;
    CUfunction fillPattern = nullptr;
    CUfunction tripleAndIncrement = nullptr;
};

inline Kernels loadKernels() {
    Kernels k;
    CHECK_DRIVER(cuModuleLoad(&k.module, course::kernelPath("managed_kernels.fatbin").c_str()));
    CHECK_DRIVER(cuModuleGetFunction(&k.scaleAdd, k.module, "scaleAdd"));
    CHECK_DRIVER(cuModuleGetFunction(&k.fillPattern, k.module, "fillPattern"));
    CHECK_DRIVER(cuModuleGetFunction(&k.tripleAndIncrement, k.module, "tripleAndIncrement"));
    return k;
}

// One launch shape for every kernel: 256 threads a block, at most 4096 blocks; the kernels'
// grid-stride loops cover the rest.
inline void launch(CUfunction function, unsigned long long words, void** params, CUstream stream) {
    const unsigned long long wanted = (words + 255) / 256;
    const unsigned int blocks = static_cast<unsigned int>(wanted < 4096 ? (wanted == 0 ? 1 : wanted) : 4096);
    CHECK_DRIVER(cuLaunchKernel(function, blocks, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
}

// A location as cuMemRangeGetAttribute's 32-bit answers give it: a device ordinal, or one of the
// two values cuda.h defines for the rest, CU_DEVICE_CPU (-1) and CU_DEVICE_INVALID (-2),
// cuda.h:4955-4960.
inline std::string locationName(int location) {
    if (location == CU_DEVICE_CPU) return "CU_DEVICE_CPU";
    if (location == CU_DEVICE_INVALID) return "CU_DEVICE_INVALID";
    return "GPU " + std::to_string(location);
}

inline int rangeInt(CUmem_range_attribute attribute, CUdeviceptr pointer, size_t bytes) {
    int value = 12345;  // a value no answer has, so that an answer left unwritten shows
    CHECK_DRIVER(cuMemRangeGetAttribute(&value, sizeof(value), attribute, pointer, bytes));
    return value;
}

#if CUDA_VERSION >= 12020
// The _TYPE and _ID forms of the two location attributes (a CUmemLocationType and an id), which can
// also name a host NUMA node; in 12.4's cuda.h, not in 11.8's (managed_compat.h).
inline const char* locationTypeName(CUmemLocationType type) {
    switch (type) {
        case CU_MEM_LOCATION_TYPE_INVALID: return "CU_MEM_LOCATION_TYPE_INVALID";
        case CU_MEM_LOCATION_TYPE_DEVICE: return "CU_MEM_LOCATION_TYPE_DEVICE";
        case CU_MEM_LOCATION_TYPE_HOST: return "CU_MEM_LOCATION_TYPE_HOST";
        case CU_MEM_LOCATION_TYPE_HOST_NUMA: return "CU_MEM_LOCATION_TYPE_HOST_NUMA";
        case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: return "CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT";
        default: return "(unknown CUmemLocationType)";
    }
}

inline CUmemLocationType rangeLocationType(CUmem_range_attribute attribute, CUdeviceptr pointer, size_t bytes) {
    CUmemLocationType type = CU_MEM_LOCATION_TYPE_MAX;  // no answer has it
    CHECK_DRIVER(cuMemRangeGetAttribute(&type, sizeof(type), attribute, pointer, bytes));
    return type;
}
#endif

}  // namespace lesson26
