// streams.h — lesson 24's small helpers: the version gate that prints a SKIP line, words of
// mapped pinned host memory that the GPU and the host both read and write, bounded waits on
// such words, the ordering check with its control, the lesson's kernels with one launch helper
// each, and a count of a graph's nodes.
#pragma once

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace lesson24 {

constexpr unsigned long long kMillisecond = 1000000ull;  // in nanoseconds, for the spin lengths
// What a word holds until a kernel's read overwrites it: none of the values the kernels store.
constexpr unsigned int kNotRead = 0xffffffffu;

// "" when both the headers this program was built with and the driver know CUDA `needed`;
// otherwise the reason, for a "section NAME: SKIP (reason)" line.
inline std::string missingVersion(int driverVersion, int needed, const char* what) {
    if (CUDA_VERSION < needed)
        return std::string("built with CUDA ") + course::formatCudaVersion(CUDA_VERSION) + " headers; " + what +
               " needs " + course::formatCudaVersion(needed);
    if (driverVersion < needed)
        return std::string("the driver supports CUDA ") + course::formatCudaVersion(driverVersion) + "; " + what +
               " needs " + course::formatCudaVersion(needed);
    return "";
}

// Prints "section NAME: SKIP (reason)" and returns true when `reason` (from missingVersion or
// missingUnifiedAddressing) is not empty; returns false, printing nothing, when it is.
inline bool skipSection(const char* section, const std::string& reason) {
    if (reason.empty()) return false;
    std::printf("section %s: SKIP (%s)\n", section, reason.c_str());
    return true;
}

// Step 1 of every program: the device's name, and the versions of the headers and the driver.
inline int printDeviceAndVersions(CUdevice device, int ordinal) {
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("device %d name: %s\n", ordinal, name);
    std::printf("built with CUDA headers: %s\n", course::formatCudaVersion(CUDA_VERSION).c_str());
    std::printf("driver supports CUDA: %s\n", course::formatCudaVersion(driverVersion).c_str());
    return driverVersion;
}

// A few 32-bit words of pinned host memory mapped into the GPU's address space; the host reads
// them without a copy. cuda.h (cuMemHostAlloc): such memory is "immediately accessible to all
// contexts on all devices which support unified addressing" (cuda.h:8871-8873), so the programs
// that hand these words to a second context (events, green_events) first ask for
// CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING (missingUnifiedAddressing). The host side goes through
// atomics: the GPU writes these words while a host thread reads them.
struct HostWords {
    unsigned int* host = nullptr;
    CUdeviceptr device = 0;
    CUdeviceptr at(int index) const { return device + static_cast<CUdeviceptr>(index) * sizeof(unsigned int); }
    unsigned int read(int index) const {
        return std::atomic_ref<unsigned int>(host[index]).load(std::memory_order_acquire);
    }
    void write(int index, unsigned int value) const {
        std::atomic_ref<unsigned int>(host[index]).store(value, std::memory_order_release);
    }
    void clear(int count) const {
        for (int i = 0; i < count; ++i) write(i, 0);
    }
    // Words that a kernel's read will overwrite, set to kNotRead (a value no kernel stores).
    void markNotRead(std::initializer_list<int> indices) const {
        for (int i : indices) write(i, kNotRead);
    }
    // The first `count` words 0 (every gate shut), then `notRead` set to kNotRead.
    void reset(int count, std::initializer_list<int> notRead) const {
        clear(count);
        markNotRead(notRead);
    }
};

// `count` words, all 0. Given back with cuMemFreeHost(words.host).
inline HostWords allocHostWords(int count) {
    void* pointer = nullptr;
    CHECK_DRIVER(
        cuMemHostAlloc(&pointer, count * sizeof(unsigned int), CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    HostWords words;
    words.host = static_cast<unsigned int*>(pointer);
    CHECK_DRIVER(cuMemHostGetDevicePointer(&words.device, pointer, 0));
    words.clear(count);
    return words;
}

// "" when the device has unified addressing, so that the mapped words of allocHostWords may be
// used from every context of it (cuda.h:8871-8873); otherwise the reason, for a SKIP line.
inline std::string missingUnifiedAddressing(int unifiedAddressing) {
    if (unifiedAddressing != 0) return "";
    return "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING is 0: cuda.h makes mapped host memory accessible to all "
           "contexts on devices with unified addressing and says nothing of other devices";
}

// How long the host waits for a control, or for work that should run, before it decides without.
constexpr auto kControlBound = std::chrono::milliseconds(1000);
// How long the host keeps a gate shut once the control has run: time for work queued in the
// wrong place to run, and so to be seen, before the gate opens.
constexpr auto kHoldBeforeOpening = std::chrono::milliseconds(20);
// How long a gate kernel waits for the host: well beyond kControlBound, so that the host always
// opens a gate before its kernel gives up.
constexpr unsigned long long kGateTimeoutNs = 5000 * kMillisecond;

// An ordering check with its control. The work being waited for is held by the host (a gate
// kernel, or a wait on a gate word) until the control, the same read queued where the wait does
// not hold it, has run: so a control that ran can only have read "not yet", and `held` (which
// includes what the control read) decides the check. `controlRan`: the control ran while the work
// was held, within kControlBound. Where it did not, nothing ran beside the held work here, and
// this run cannot show that the wait was needed (cuda.h promises no concurrency:
// CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS says a device "can possibly execute multiple kernels
// concurrently", cuda.h:759; and a tool such as compute-sanitizer runs one kernel at a time): the check
// prints SKIP (reason) and decides nothing. The lesson's tests require ok.
inline void checkOrder(course::Verdict& verdict, const char* name, bool held, bool controlRan) {
    if (!controlRan) {
        std::printf(
            "check %s: SKIP (the control did not run within %lld ms while the work it stands beside was "
            "held: nothing ran beside that work here, so the wait could not be shown to be needed)\n",
            name, static_cast<long long>(kControlBound.count()));
        return;
    }
    verdict.check(name, held);
}

// Spins until word `index` holds `value`, at most `timeout`. False when it never did.
inline bool waitForWord(const HostWords& words, int index, unsigned int value, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (words.read(index) != value)
        if (std::chrono::steady_clock::now() > deadline) return false;
    return true;
}

// Spins until word `index` no longer holds `value` (a kernel has written it), at most `timeout`.
// False when it still held `value`.
inline bool waitForChange(const HostWords& words, int index, unsigned int value, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (words.read(index) == value)
        if (std::chrono::steady_clock::now() > deadline) return false;
    return true;
}

// Opens gate word `gate` (tag 1) after kHoldBeforeOpening.
inline void openAfterHold(const HostWords& words, int gate) {
    std::this_thread::sleep_for(kHoldBeforeOpening);
    words.write(gate, 1);
}

// The lesson's kernels (kernels/stream_kernels.cu), from one module of the current context.
struct Kernels {
    CUmodule module = nullptr;
    CUfunction spin = nullptr;
    CUfunction loadWord = nullptr;
    CUfunction gate = nullptr;
};

inline Kernels loadKernels() {
    Kernels k;
    CHECK_DRIVER(cuModuleLoad(&k.module, course::kernelPath("stream_kernels.fatbin").c_str()));
    CHECK_DRIVER(cuModuleGetFunction(&k.spin, k.module, "spin"));
    CHECK_DRIVER(cuModuleGetFunction(&k.loadWord, k.module, "load_word"));
    CHECK_DRIVER(cuModuleGetFunction(&k.gate, k.module, "gate"));
    return k;
}

constexpr unsigned int kSpinThreads = 128;  // threads per block of every spin launch

// `blocks` blocks spin `nanoseconds` each; `started` / `done` (0: none) receive `value`.
inline void launchSpin(CUfunction spin, unsigned int blocks, unsigned long long nanoseconds, CUdeviceptr started,
                       CUdeviceptr done, unsigned int value, CUstream stream) {
    void* params[] = {&nanoseconds, &started, &done, &value};
    CHECK_DRIVER(cuLaunchKernel(spin, blocks, 1, 1, kSpinThreads, 1, 1, 0, stream, params, nullptr));
}

// One thread copies the word at `src` to `dst` when the kernel runs.
inline void launchLoad(CUfunction loadWord, CUdeviceptr src, CUdeviceptr dst, CUstream stream) {
    void* params[] = {&src, &dst};
    CHECK_DRIVER(cuLaunchKernel(loadWord, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
}

// One thread signals `started`, holds until the host writes `tag` to `gateWord` (at most
// `timeoutNs`), then writes `tag` (or 0 on a timeout) to `done`.
inline void launchGate(CUfunction gate, CUdeviceptr gateWord, unsigned int tag, unsigned long long timeoutNs,
                       CUdeviceptr started, CUdeviceptr done, CUstream stream) {
    void* params[] = {&gateWord, &tag, &timeoutNs, &started, &done};
    CHECK_DRIVER(cuLaunchKernel(gate, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
}

// One launch of load_word on `stream` that reads `word` and writes it back, waited for: made
// before any gate kernel is held, so that the first launch of load_word in this context is not
// one of the reads an ordering check waits for. With lazy loading that first launch may also
// load the kernel: cuda.h says only that such a call "may incur additional latency"
// (cuda.h:7553-7556); NVIDIA's CUDA Programming Guide, in its Lazy Loading section, says that
// loading kernels "might require context synchronization", which a held gate kernel would hold up.
inline void warmUpLoad(CUfunction loadWord, CUdeviceptr word, CUstream stream) {
    launchLoad(loadWord, word, word, stream);
    CHECK_DRIVER(cuStreamSynchronize(stream));
}

// The gate kernel on words of `words`: it stores 1 in word `started`, holds until the host stores
// 1 in word `gateWord` (at most kGateTimeoutNs), then stores 1 in word `done` (0 on a timeout).
inline void launchGated(CUfunction gate, const HostWords& words, int gateWord, int started, int done, CUstream stream) {
    launchGate(gate, words.at(gateWord), 1, kGateTimeoutNs, words.at(started), words.at(done), stream);
}

// How many nodes `graph` has, and in `ofType` how many of them are of `type`.
inline size_t countNodes(CUgraph graph, CUgraphNodeType type, size_t& ofType) {
    size_t count = 0;
    CHECK_DRIVER(cuGraphGetNodes(graph, nullptr, &count));
    std::vector<CUgraphNode> nodes(count);
    if (count > 0) CHECK_DRIVER(cuGraphGetNodes(graph, nodes.data(), &count));
    ofType = 0;
    for (CUgraphNode node : nodes) {
        CUgraphNodeType got = CU_GRAPH_NODE_TYPE_EMPTY;
        CHECK_DRIVER(cuGraphNodeGetType(node, &got));
        if (got == type) ++ofType;
    }
    return count;
}

}  // namespace lesson24
