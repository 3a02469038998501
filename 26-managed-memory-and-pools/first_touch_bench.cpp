// Lesson 26, program 4 — what a kernel's first touch of 1 GiB costs: fresh managed memory with no
// prefetch, fresh managed memory after cuMemPrefetchAsync to the GPU, and cuMemAlloc memory, in one run.
//
// In a system where all GPUs have CONCURRENT_MANAGED_ACCESS, cuMemAllocManaged memory "may not be
// populated when this API returns and instead may be populated on access" (cuda.h:9023-9025): "may",
// so what the first kernel pays for is measured here, not assumed. A prefetch of a range with no
// physical memory yet "will be populated and mapped on the destination device" (cuda.h:14383-14384);
// cuMemAlloc "allocates bytesize bytes of linear memory on the device" (cuda.h:8580). The same kernel
// writes every word in each case (the first touch), then a second kernel reads every word and writes it
// back changed (the second touch), timed with events; the host then copies the buffer back 64 MiB at a
// time through one page-locked staging buffer and checks every word. Each final word is computed from
// what the first kernel wrote, so that one check judges both kernels. The driver is asked what each
// buffer is (IS_MANAGED) and where it was last prefetched, so that the three ways are checked to be what
// they say. Timings are printed, never judged: they belong to the GPU and its link. What is checked
// about them is that the spans printed for a round fit within the host's own clock around that round.
//
//   first_touch_bench               one round of each, checked, times printed
//   first_touch_bench --bench       five more rounds each, medians as "bench:" lines
//   first_touch_bench --device N    another GPU
#include <cuda.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "managed_helpers.h"

namespace {

constexpr size_t kBytes = size_t{1} << 30;
constexpr size_t kWords = kBytes / sizeof(unsigned int);
constexpr int kBenchRounds = 5;
// The host's check goes through a page-locked buffer of this size, one piece of the buffer at a time:
// "Page-locking excessive amounts of memory with cuMemAllocHost() may degrade system performance" and the
// call "is best used sparingly to allocate staging areas" (cuda.h:8757-8760).
constexpr size_t kCheckBytes = size_t{64} << 20;
constexpr size_t kCheckWords = kCheckBytes / sizeof(unsigned int);
// The second touch: every word x becomes x * 3 + 7, which differs from x for every 32-bit x (3x + 7 is
// x only where 2x + 7 is 0 modulo 2^32, and 2x + 7 is odd): a second kernel that wrote nothing shows.
constexpr unsigned int kSecondMul = 3;
constexpr unsigned int kSecondAdd = 7;
// How far the sum of a round's printed spans may exceed the host's time around it: a few times the
// events' "resolution of around 0.5 microseconds" (cuda.h:16136-16137).
constexpr double kSpanToleranceMs = 0.01;

enum class Way { ManagedFaulted, ManagedPrefetched, DeviceMemory };

struct Times {
    std::vector<double> prefetch;  // only for ManagedPrefetched
    std::vector<double> first;
    std::vector<double> second;
    size_t wrong = 0;               // words not as the two kernels wrote them, over every round
    double worstOverHostMs = -1e9;  // largest (printed spans - the host's time around the round)
    std::vector<int> managed;       // CU_POINTER_ATTRIBUTE_IS_MANAGED of each round's buffer
    std::vector<int> lastPrefetch;  // LAST_PREFETCH_LOCATION of each round's buffer (managed ways only)
};

float elapsedMs(CUevent from, CUevent to) {
    float ms = 0.0f;
    CHECK_DRIVER(cuEventElapsedTime(&ms, from, to));
    return ms;
}

// One round: a fresh 1 GiB buffer of this kind, the optional prefetch, the two kernels, the check
// on the host (through `check`, kCheckBytes of page-locked memory, one piece at a time), and the
// buffer freed again.
void oneRound(Way way, const lesson26::Kernels& kernels, CUdevice device, CUstream stream, unsigned int* check,
              unsigned int seed, Times& times) {
    CUdeviceptr buffer = 0;
    if (way == Way::DeviceMemory)
        CHECK_DRIVER(cuMemAlloc(&buffer, kBytes));
    else
        CHECK_DRIVER(cuMemAllocManaged(&buffer, kBytes, CU_MEM_ATTACH_GLOBAL));
    // "a boolean that indicates whether the pointer points to managed memory" (cuda.h:14263-14266),
    // read into an unsigned int preset to a value that is no answer.
    unsigned int isManaged = 0x5A5Au;
    CHECK_DRIVER(cuPointerGetAttribute(&isManaged, CU_POINTER_ATTRIBUTE_IS_MANAGED, buffer));
    times.managed.push_back(static_cast<int>(isManaged));
    CUevent marks[4] = {};
    for (CUevent& mark : marks) CHECK_DRIVER(cuEventCreate(&mark, CU_EVENT_DEFAULT));
    CUdeviceptr data = buffer;
    unsigned long long n = kWords;
    void* params[] = {&data, &n, &seed};
    unsigned int mul = kSecondMul;
    unsigned int add = kSecondAdd;
    void* secondParams[] = {&data, &n, &mul, &add};
    // The host's clock around the round: marks[0] is reached after hostStart, and marks[3] before
    // cuEventSynchronize returns, so the round as the events time it lies within hostMs.
    const auto hostStart = std::chrono::steady_clock::now();
    CHECK_DRIVER(cuEventRecord(marks[0], stream));
    if (way == Way::ManagedPrefetched) CHECK_DRIVER(course::memPrefetchToDevice(buffer, kBytes, device, stream));
    CHECK_DRIVER(cuEventRecord(marks[1], stream));
    lesson26::launch(kernels.fillPattern, kWords, params, stream);  // the first touch: writes every word
    CHECK_DRIVER(cuEventRecord(marks[2], stream));
    lesson26::launch(kernels.scaleAdd, kWords, secondParams, stream);  // the second: reads and rewrites them
    CHECK_DRIVER(cuEventRecord(marks[3], stream));
    CHECK_DRIVER(cuEventSynchronize(marks[3]));
    const double hostMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - hostStart).count();
    // Where all pages were last prefetched "explicitly via cuMemPrefetchAsync", CU_DEVICE_INVALID if
    // never (cuda.h:14709-14714); a range attribute of managed memory only (cuda.h:14685).
    if (way != Way::DeviceMemory)
        times.lastPrefetch.push_back(lesson26::rangeInt(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, buffer, kBytes));
    if (way == Way::ManagedPrefetched) times.prefetch.push_back(elapsedMs(marks[0], marks[1]));
    times.first.push_back(elapsedMs(marks[1], marks[2]));
    times.second.push_back(elapsedMs(marks[2], marks[3]));
    // The spans printed for this round (the prefetch where there is one, the first touch, the second)
    // follow one another in the stream, so together they fit within the host's time around the round:
    // a span printed twice, or one that also holds another, exceeds it by that other span.
    const double printed =
        (way == Way::ManagedPrefetched ? times.prefetch.back() : 0.0) + times.first.back() + times.second.back();
    times.worstOverHostMs = std::max(times.worstOverHostMs, printed - hostMs);
    // Every final word is patternWord * 3 + 7 only if the first kernel wrote the pattern and the second
    // rewrote it: a first touch that wrote nothing, or wrote other words, leaves them wrong.
    for (size_t offset = 0; offset < kBytes; offset += kCheckBytes) {  // managed or not: a device pointer
        CHECK_DRIVER(cuMemcpyDtoH(check, buffer + offset, kCheckBytes));
        times.wrong +=
            lesson26::wrongWords(check, kCheckWords, seed, kSecondMul, kSecondAdd, offset / sizeof(unsigned int));
    }
    for (int i = 3; i >= 0; --i) CHECK_DRIVER(cuEventDestroy(marks[i]));
    CHECK_DRIVER(cuMemFree(buffer));
}

// The value every round gave, or "differs between rounds".
std::string everyRound(const std::vector<int>& values, std::string (*name)(int)) {
    for (int value : values)
        if (value != values.front()) return "differs between rounds";
    return name(values.front());
}

std::string plainNumber(int value) { return std::to_string(value); }

// Whether every round gave `expected`.
bool allAre(const std::vector<int>& values, int expected) {
    for (int value : values)
        if (value != expected) return false;
    return !values.empty();
}

// Steps 3 to 5: the rounds of one way, its check, what the driver says the buffers were, and the
// times of the first round.
Times measure(course::Verdict& verdict, Way way, const char* check, int rounds, const lesson26::Kernels& kernels,
              CUdevice device, CUstream stream, unsigned int* checkBuffer) {
    // A seed of each way's own, so that a buffer that happens to get the memory of the way before
    // (cuMemAlloc memory "is not cleared", cuda.h:8582) cannot hold the pattern the check expects.
    const unsigned int seed = 100 + 10 * static_cast<unsigned int>(way);
    Times times;
    for (int round = 0; round < rounds; ++round)
        oneRound(way, kernels, device, stream, checkBuffer, seed + static_cast<unsigned int>(round), times);
    std::printf("rounds: %d, words not as the two kernels wrote them: %zu\n", rounds, times.wrong);
    verdict.check(check, times.wrong == 0);
    std::printf("IS_MANAGED (cuPointerGetAttribute): %s\n", everyRound(times.managed, plainNumber).c_str());
    if (way == Way::DeviceMemory)
        std::printf("last prefetch location after the kernels: not asked (a range attribute of managed memory only)\n");
    else
        std::printf("last prefetch location after the kernels: %s\n",
                    everyRound(times.lastPrefetch, lesson26::locationName).c_str());
    if (way == Way::ManagedPrefetched) std::printf("prefetch of 1 GiB to the GPU: %.2f ms\n", times.prefetch[0]);
    std::printf("first touch, the kernel: %.2f ms\n", times.first[0]);
    std::printf("second touch, a kernel that reads and rewrites every word: %.2f ms\n", times.second[0]);
    return times;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    const bool bench = args.has("--bench");

    course::printStep(1, "initialise, check the device and its free memory");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    course::printDeviceName(ordinal, device);
    const int concurrent = course::deviceAttribute(device, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS);
    std::printf("CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: %d\n", concurrent);
    if (concurrent == 0) {
        // A prefetch's target GPU, and the GPU of its stream, "must have non-zero value" for it
        // (cuda.h:14368-14371): the second way names this GPU.
        std::printf("Result = SKIP (CONCURRENT_MANAGED_ACCESS is 0: a prefetch to this GPU needs it)\n");
        return course::kExitNotApplicable;
    }
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    // Never more than the device has free: one 1 GiB buffer lives at a time, and twice that must be free.
    size_t freeBytes = 0;
    size_t totalBytes = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &totalBytes));
    const bool roomy = freeBytes >= 2 * kBytes;
    std::printf("free device memory, at least twice 1 GiB: %s\n", roomy ? "yes" : "no");
    if (!roomy) {
        std::printf("Result = SKIP (%zu MiB free; the benchmark needs 2048 MiB)\n", freeBytes >> 20);
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
        return course::kExitNotApplicable;
    }
    // The host side: the page-locked staging buffer may take at most a quarter of the host memory free
    // now (sysconf's free pages, not counting what the kernel could reclaim), since page-locked memory
    // is taken from what the system can page (cuda.h:8757-8759) and the rest belongs to everyone else.
    const long freePages = sysconf(_SC_AVPHYS_PAGES);
    const long pageSize = sysconf(_SC_PAGESIZE);
    const size_t hostFree =
        freePages > 0 && pageSize > 0 ? static_cast<size_t>(freePages) * static_cast<size_t>(pageSize) : 0;
    const bool hostRoomy = hostFree / 4 >= kCheckBytes;
    std::printf("free host memory, at least four times the 64 MiB staging buffer: %s\n", hostRoomy ? "yes" : "no");
    if (!hostRoomy) {
        std::printf("Result = SKIP (%zu MiB of host memory free; the 64 MiB staging buffer may take a quarter)\n",
                    hostFree >> 20);
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
        return course::kExitNotApplicable;
    }

    // Step 2: the module loaded and the kernel run once on a small buffer, so that loading its code
    // (which lazy loading may leave to the first launch, lesson 06) is in no timing.
    course::printStep(2, "load the kernel and run it once, untimed");
    const lesson26::Kernels kernels = lesson26::loadKernels();
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    void* pinned = nullptr;  // the staging buffer the host checks each buffer through, piece by piece
    CHECK_DRIVER(cuMemAllocHost(&pinned, kCheckBytes));
    auto* check = static_cast<unsigned int*>(pinned);
    CUdeviceptr warm = 0;
    CHECK_DRIVER(cuMemAlloc(&warm, 1 << 20));
    CUdeviceptr warmData = warm;
    unsigned long long warmWords = (1 << 20) / sizeof(unsigned int);
    unsigned int warmSeed = 1;
    void* warmParams[] = {&warmData, &warmWords, &warmSeed};
    lesson26::launch(kernels.fillPattern, warmWords, warmParams, stream);
    CHECK_DRIVER(cuStreamSynchronize(stream));
    CHECK_DRIVER(cuMemFree(warm));
    const int rounds = bench ? 1 + kBenchRounds : 1;
    std::printf("buffer: 1 GiB, fresh for each round; rounds per way: %d\n", rounds);

    course::Verdict verdict;
    course::printStep(3, "fresh managed memory, no prefetch: the kernel touches it first");
    const Times faulted = measure(verdict, Way::ManagedFaulted, "both kernels wrote every word of fresh managed memory",
                                  rounds, kernels, device, stream, check);
    course::printStep(4, "fresh managed memory, prefetched to the GPU first");
    const Times prefetched =
        measure(verdict, Way::ManagedPrefetched, "both kernels wrote every word after the prefetch", rounds, kernels,
                device, stream, check);
    course::printStep(5, "cuMemAlloc memory");
    const Times plain = measure(verdict, Way::DeviceMemory, "both kernels wrote every word of cuMemAlloc memory",
                                rounds, kernels, device, stream, check);

    // Step 6: the three ways are what they say. Only the managed buffers are asked where they were
    // last prefetched: the one prefetched to this GPU names it, the other was never prefetched.
    course::printStep(6, "the three ways as the driver records them, and the timings side by side");
    verdict.check("IS_MANAGED reads 1 for both managed buffers and 0 for the cuMemAlloc buffer",
                  allAre(faulted.managed, 1) && allAre(prefetched.managed, 1) && allAre(plain.managed, 0));
    verdict.check("LAST_PREFETCH_LOCATION names this GPU after the prefetch and no location without one",
                  allAre(prefetched.lastPrefetch, ordinal) && allAre(faulted.lastPrefetch, CU_DEVICE_INVALID));
    const double worstOver = std::max({faulted.worstOverHostMs, prefetched.worstOverHostMs, plain.worstOverHostMs});
    const bool withinHost = worstOver <= kSpanToleranceMs;
    std::printf("spans printed for each round, no more than the host's time around it (+%.2f ms): %s\n",
                kSpanToleranceMs, withinHost ? "yes" : "no");
    verdict.check("the spans printed for every round fit within the host's clock around that round", withinHost);
    if (!bench) {
        std::printf("timings: the rounds above; run with --bench for medians of %d rounds\n", rounds + kBenchRounds);
    } else {
        using course::median;
        std::printf("bench: first touch of 1 GiB, managed, no prefetch = %.2f ms\n", median(faulted.first));
        std::printf("bench: prefetch of 1 GiB to the GPU = %.2f ms\n", median(prefetched.prefetch));
        std::printf("bench: first touch of 1 GiB, managed, after the prefetch = %.2f ms\n", median(prefetched.first));
        std::printf("bench: first touch of 1 GiB, cuMemAlloc = %.2f ms\n", median(plain.first));
        std::printf("bench: second touch, managed, no prefetch = %.2f ms\n", median(faulted.second));
        std::printf("bench: second touch, cuMemAlloc = %.2f ms\n", median(plain.second));
        std::printf("bench: first touch, managed no prefetch / cuMemAlloc = %.1f x\n",
                    median(faulted.first) / median(plain.first));
        std::printf("bench: prefetch + first touch / managed no prefetch = %.2f x\n",
                    (median(prefetched.prefetch) + median(prefetched.first)) / median(faulted.first));
    }

    course::printStep(7, "release everything, newest first");
    CHECK_DRIVER(cuMemFreeHost(pinned));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(kernels.module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: pinned host buffer, stream, module, primary context (each round freed its buffer)\n");

    course::printStep(8, "check");
    return verdict.finish();
}
