// checkpoint_bench.cpp — checkpoint's step 6: what a checkpoint and a restore cost, in GB/s of the
// child's buffer, beside pinned copies of the same size made in the same run; with --bench, the same
// for 256 MiB, 1 GiB and 4 GiB (those up to --bench-max-mib), each size in a new child, and "bench:"
// lines.
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "checkpoint.h"
#include "children.h"

namespace checkpoint {

namespace {

constexpr int kCopies = 5;  // pinned copies each way; the median is printed

double gigabytesPerSecond(size_t bytes, double ms) {
    return ms > 0 ? static_cast<double>(bytes) / (ms * 1e6) : 0.0;
}

std::string sizeText(size_t bytes) {
    return bytes >= (size_t{1} << 30) ? std::to_string(bytes >> 30) + " GiB" : std::to_string(bytes / kMiB) + " MiB";
}

// Pinned copies of `bytes`, the median of kCopies each way: {host to device, device to host} in
// GB/s. A copy from or to pinned memory returns when it is done, so the host clock times it.
std::pair<double, double> pinnedCopyRates(size_t bytes) {
    void* host = nullptr;
    CUdeviceptr device = 0;
    CHECK_DRIVER(cuMemAllocHost(&host, bytes));
    CHECK_DRIVER(cuMemAlloc(&device, bytes));
    std::vector<double> up;
    std::vector<double> down;
    for (int i = 0; i < kCopies; ++i) {
        const auto start = std::chrono::steady_clock::now();
        CHECK_DRIVER(cuMemcpyHtoD(device, host, bytes));
        const auto middle = std::chrono::steady_clock::now();
        CHECK_DRIVER(cuMemcpyDtoH(host, device, bytes));
        const auto end = std::chrono::steady_clock::now();
        up.push_back(gigabytesPerSecond(bytes, std::chrono::duration<double, std::milli>(middle - start).count()));
        down.push_back(gigabytesPerSecond(bytes, std::chrono::duration<double, std::milli>(end - middle).count()));
    }
    CHECK_DRIVER(cuMemFree(device));
    CHECK_DRIVER(cuMemFreeHost(host));
    return {course::median(up), course::median(down)};
}

#if CUDA_VERSION >= 12080
// MemAvailable from /proc/meminfo: what the kernel could give without swapping. 0 if unknown.
size_t availableHostMemory() {
    const auto text = course::readFile("/proc/meminfo");
    std::istringstream lines(text.value_or(""));
    std::string key;
    size_t kibibytes = 0;
    while (lines >> key >> kibibytes) {
        if (key == "MemAvailable:") return kibibytes * 1024;
        lines.ignore(256, '\n');
    }
    return 0;
}

constexpr int kCycles = 3;  // checkpoints and restores per size with --bench; the median is printed

// One size of the sweep: a new child holding `bytes`, kCycles checkpoints and restores of it, then
// the child checks its buffer. False, with a SKIP line, when the size does not fit here.
bool sweepOne(int ordinal, size_t bytes, std::vector<double>* checkpointMs, std::vector<double>* restoreMs,
              bool* kept) {
    // The child's buffer and context on the GPU; the checkpoint's copy and the child's check in host memory.
    const size_t deviceNeeds = bytes + 1024 * kMiB;
    const size_t hostNeeds = 3 * bytes + 1024 * kMiB;
    const size_t deviceFree = freeDeviceMemory();
    const size_t hostFree = availableHostMemory();
    if (deviceFree < deviceNeeds || hostFree < hostNeeds) {
        std::printf(
            "section bench %s: SKIP (needs %zu MiB of free device and %zu MiB of host memory, has %zu and %zu)\n",
            sizeText(bytes).c_str(), deviceNeeds / kMiB, hostNeeds / kMiB, deviceFree / kMiB, hostFree / kMiB);
        return false;
    }
    children::Child child = children::startSelf(kHolderRole, ordinal);
    children::tell(child, std::to_string(bytes));
    bool cycled = children::readUntil(child, kReady);
    const size_t freeWithChild = freeDeviceMemory();
    std::printf("device memory the child holds: %zu MiB in all\n",
                deviceFree > freeWithChild ? (deviceFree - freeWithChild) / kMiB : 0);
    for (int i = 0; cycled && i < kCycles; ++i) {
        const Cycle cycle = checkpointAndRestore(child.pid);
        cycled = cycle.allSucceeded();
        checkpointMs->push_back(cycle.checkpointMs);
        restoreMs->push_back(cycle.restoreMs);
    }
    const std::string ended = cycled && children::tell(child, "go") ? children::finish(child) : children::kill(child);
    *kept = cycled && allWords(children::valueOf(child, kSurvived)) && ended == "exit code 0";
    return true;
}
#endif

}  // namespace

void costs(int ordinal, size_t bytes, double checkpointMs, double restoreMs, size_t sweepMiB,
           course::Verdict& verdict) {
    const std::pair<double, double> copies = pinnedCopyRates(bytes);
    std::printf("checkpoint, %s buffer: %.1f ms, %.2f GB/s\n", sizeText(bytes).c_str(), checkpointMs,
                gigabytesPerSecond(bytes, checkpointMs));
    std::printf("restore, %s buffer: %.1f ms, %.2f GB/s\n", sizeText(bytes).c_str(), restoreMs,
                gigabytesPerSecond(bytes, restoreMs));
    std::printf("pinned copy of %s, host to device: %.2f GB/s\n", sizeText(bytes).c_str(), copies.first);
    std::printf("pinned copy of %s, device to host: %.2f GB/s\n", sizeText(bytes).c_str(), copies.second);
#if CUDA_VERSION >= 12080
    if (sweepMiB == 0) return;
    // Sizes that SKIP (too large here) check nothing: the smallest one must have run and been checked.
    bool allKept = true;
    bool smallestChecked = false;
    for (const size_t mib : kBenchMiB) {
        const size_t size = mib * kMiB;
        if (mib > sweepMiB) {
            std::printf("section bench %s: SKIP (above --bench-max-mib %zu)\n", sizeText(size).c_str(), sweepMiB);
            continue;
        }
        std::vector<double> checkpointTimes;
        std::vector<double> restoreTimes;
        bool kept = false;
        if (!sweepOne(ordinal, size, &checkpointTimes, &restoreTimes, &kept)) continue;
        allKept = allKept && kept;
        smallestChecked = smallestChecked || mib == kBenchMiB[0];
        std::printf("checkpoint, %s buffer: median of %zu %.1f ms; restore: %.1f ms\n", sizeText(size).c_str(),
                    checkpointTimes.size(), course::median(checkpointTimes), course::median(restoreTimes));
        std::printf("bench: checkpoint %s = %.2f GB/s\n", sizeText(size).c_str(),
                    gigabytesPerSecond(size, course::median(checkpointTimes)));
        std::printf("bench: restore %s = %.2f GB/s\n", sizeText(size).c_str(),
                    gigabytesPerSecond(size, course::median(restoreTimes)));
    }
    std::printf("bench: pinned copy host to device %s = %.2f GB/s\n", sizeText(bytes).c_str(), copies.first);
    std::printf("bench: pinned copy device to host %s = %.2f GB/s\n", sizeText(bytes).c_str(), copies.second);
    verdict.check("every --bench child kept its buffer through its checkpoints, the 256 MiB one at least",
                  smallestChecked && allKept);
#else
    (void)ordinal;
    (void)sweepMiB;
    (void)verdict;
#endif
}

}  // namespace checkpoint
