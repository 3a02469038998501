// lesson21.h — what lesson 21's programs share: the device line of step 1, the version check of
// each section, the kernels' module, one driver call's answer on one line, and the pattern the
// healthy kernels write.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace lesson21 {

// Step 1 of every program, after cuInit: the device, and the CUDA version of the driver and of the
// headers the program was built with. Returns the driver's version.
inline int describeDevice(int ordinal, CUdevice* device) {
    CHECK_DRIVER(cuDeviceGet(device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), *device));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("device %d name: %s\n", ordinal, name);
    std::printf("driver supports CUDA: %s\n", course::formatCudaVersion(driverVersion).c_str());
    std::printf("built with CUDA headers: %s\n", course::formatCudaVersion(CUDA_VERSION).c_str());
    return driverVersion;
}

// Whether the API of a section, added in CUDA `since`, is in the headers this program was built
// with and in the driver. If not, prints "section NAME: SKIP (reason)" and puts the reason in *why.
inline bool sectionAvailable(const char* section, const char* api, int since, int driverVersion, std::string* why) {
    const std::string needs = std::string("; ") + api + " came with CUDA " + course::formatCudaVersion(since);
    if (CUDA_VERSION < since)
        *why = "built with CUDA " + course::formatCudaVersion(CUDA_VERSION) + " headers" + needs;
    else if (driverVersion < since)
        *why = "the driver supports CUDA " + course::formatCudaVersion(driverVersion) + needs;
    else
        return true;
    std::printf("section %s: SKIP (%s)\n", section, why->c_str());
    return false;
}

// "LABEL: CUDA_ERROR_NAME": one driver call's answer on one line, for the calls whose answer is
// the point of the step. (CHECK_DRIVER would end the program at the first failure; REPORT_DRIVER
// prints four lines for each.) Returns the answer.
inline CUresult show(const char* label, CUresult result) {
    std::printf("%s: %s\n", label, course::driverErrorName(result));
    return result;
}

// The lesson's kernels (kernels/faults.cu), from the fatbin next to the program.
inline std::string faultsModulePath() {
    return course::kernelPath("faults.fatbin");
}

// storeAt's index: 2^38 words, 1 TiB past the buffer. No allocation of the lesson is that large;
// that nothing at all was mapped there, so that the store faulted, is what NVIDIA H100 80GB HBM3
// showed (observed, not promised).
constexpr long long kFarIndex = 1ll << 38;

// A grid for the grid-stride kernels (fillPattern, addOne): 256 threads a block, at most 1024 blocks.
constexpr unsigned int kThreads = 256;
inline unsigned int blocksFor(unsigned long long count) {
    const unsigned long long blocks = (count + kThreads - 1) / kThreads;
    return static_cast<unsigned int>(blocks < 1024 ? (blocks > 0 ? blocks : 1) : 1024);
}

// The word fillPattern writes at index i with `seed`.
inline unsigned int patternWord(unsigned long long i, unsigned int seed) {
    return seed ^ static_cast<unsigned int>(i * 2654435761ull);
}

// How many of `words` hold the pattern of `seed` plus `add`.
inline size_t wordsHolding(const std::vector<unsigned int>& words, unsigned int seed, unsigned int add) {
    size_t holding = 0;
    for (size_t i = 0; i < words.size(); ++i) holding += words[i] == patternWord(i, seed) + add ? 1 : 0;
    return holding;
}

}  // namespace lesson21
