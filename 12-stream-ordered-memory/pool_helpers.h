// pool_helpers.h — lesson 12's small helpers: a pool's counters and policies, one round of
// cross_stream_reuse's experiment (its steps 3 and 4), and pool_basics' timing loop (its step 6).
#pragma once

#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "../common/check_driver.h"

namespace lesson12 {

// Step 1 of both programs: stream-ordered allocation needs a driver of CUDA 11.2 or newer
// (an older one does not know the attribute and answers CUDA_ERROR_INVALID_VALUE) and a
// device that reports CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED.
inline bool memoryPoolsSupported(CUdevice device) {
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    int supported = 0;
    if (driverVersion >= 11020)
        CHECK_DRIVER(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device));
    std::printf("driver version: %d\n", driverVersion);
    std::printf("memory pools supported: %s\n", supported ? "yes" : "no");
    if (!supported) {
        std::printf("section stream-ordered allocation: SKIP (the driver or device has no memory pools)\n");
        std::printf("Result = SKIP (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0 or unknown here)\n");
    }
    return supported != 0;
}

// A pool of this program's own: device memory of `device`, no handle to export it with.
// Its release threshold starts at 0 and all three reuse policies start on.
inline CUmemoryPool createDevicePool(CUdevice device) {
    CUmemPoolProps properties{};
    properties.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    properties.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    properties.location.id = device;
    CUmemoryPool pool = nullptr;
    CHECK_DRIVER(cuMemPoolCreate(&pool, &properties));
    return pool;
}

// RELEASE_THRESHOLD and the RESERVED / USED counters are 64-bit values (cuuint64_t).
inline cuuint64_t poolBytes(CUmemoryPool pool, CUmemPool_attribute attribute) {
    cuuint64_t value = 0;
    CHECK_DRIVER(cuMemPoolGetAttribute(pool, attribute, &value));
    return value;
}

// The three REUSE_* policies are ints (0 or 1).
inline int poolFlag(CUmemoryPool pool, CUmemPool_attribute attribute) {
    int value = 0;
    CHECK_DRIVER(cuMemPoolGetAttribute(pool, attribute, &value));
    return value;
}

inline void printReusePolicies(const char* whose, CUmemoryPool pool) {
    std::printf("%s reuse policies (follow event dependencies, opportunistic, internal dependencies): %d %d %d\n",
                whose, poolFlag(pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES),
                poolFlag(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC),
                poolFlag(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES));
}

inline void setReleaseThreshold(CUmemoryPool pool, cuuint64_t bytes) {
    CHECK_DRIVER(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &bytes));
}

inline void printUsage(const char* when, CUmemoryPool pool) {
    std::printf("reserved %s: %llu bytes\n", when,
                static_cast<unsigned long long>(poolBytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)));
    std::printf("used %s: %llu bytes\n", when,
                static_cast<unsigned long long>(poolBytes(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT)));
}

// Which of the pool's three reuse policies are on for one round of step 6.
struct ReusePolicies {
    int followEventDependencies;
    int allowOpportunistic;
    int allowInternalDependencies;
};

inline void setReusePolicies(CUmemoryPool pool, const ReusePolicies& policies) {
    int follow = policies.followEventDependencies;
    int opportunistic = policies.allowOpportunistic;
    int internal = policies.allowInternalDependencies;
    CHECK_DRIVER(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, &follow));
    CHECK_DRIVER(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &opportunistic));
    CHECK_DRIVER(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &internal));
}

// What stream B knows about A's free when it allocates.
enum class Ordering {
    EventWait,           // B waits on an event recorded after the free: a stream-ordered dependency
    NoDependency,        // nothing: B may run before, during or after the free
    FreeFinished,        // nothing, but the GPU has had time to run the free (no call told the CPU)
    StreamSynchronized,  // the host waited for A (cuStreamSynchronize) after the free
};

// One round: allocate `bytes` on A, free them on A, then allocate the same size on B.
// B reused A's block exactly when it got the same address: A's address range stays
// taken until the pool decides the free is safe to hand on, so a block the pool could
// not reuse makes it map another. Both blocks are freed and the pool is emptied, so
// every round starts from the same empty pool.
inline bool streamBReusesFreedBlock(CUmemoryPool pool, CUstream a, CUstream b, CUevent freed, size_t bytes,
                                    Ordering ordering) {
    CUdeviceptr onA = 0;
    CHECK_DRIVER(cuMemAllocFromPoolAsync(&onA, bytes, pool, a));
    CHECK_DRIVER(cuMemFreeAsync(onA, a));
    CHECK_DRIVER(cuEventRecord(freed, a));
    if (ordering == Ordering::EventWait) CHECK_DRIVER(cuStreamWaitEvent(b, freed, 0));
    // A sleep, not a query: cuEventQuery or a synchronize would tell the driver the
    // free is done, and that is the StreamSynchronized case.
    if (ordering == Ordering::FreeFinished) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (ordering == Ordering::StreamSynchronized) CHECK_DRIVER(cuStreamSynchronize(a));
    CUdeviceptr onB = 0;
    CHECK_DRIVER(cuMemAllocFromPoolAsync(&onB, bytes, pool, b));
    const bool reused = onB == onA;
    CHECK_DRIVER(cuMemFreeAsync(onB, b));
    CHECK_DRIVER(cuStreamSynchronize(b));
    CHECK_DRIVER(cuStreamSynchronize(a));
    CHECK_DRIVER(cuMemPoolTrimTo(pool, 0));
    return reused;
}

// Mean microseconds per call of `pair` over `iterations` calls, after `iterations / 10`
// untimed ones (the first calls pay for mapping memory and warming the driver's caches).
template <typename Pair>
double microsecondsPerPair(int iterations, Pair pair) {
    for (int i = 0; i < iterations / 10; ++i) pair();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) pair();
    const std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
    return elapsed.count() / iterations;
}

// The median (the mean of the middle two for an even count) of the samples.
inline double medianOf(std::vector<double> samples) {
    std::sort(samples.begin(), samples.end());
    const size_t n = samples.size();
    return n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2.0;
}

inline void printBenchLine(const char* way, const std::vector<double>& rounds) {
    std::printf("bench: %s, median = %.2f us\n", way, medianOf(rounds));
    std::printf("bench: %s, min = %.2f us\n", way, *std::min_element(rounds.begin(), rounds.end()));
}

// Step 6 of pool_basics (--bench): the cost of an allocate + free pair followed by a stream
// synchronize, as a loop that allocates a scratch buffer per iteration pays it. cuMemFree of
// cuMemAlloc memory "may perform implicit synchronization" (cuda.h); cuMemFreeAsync queues the
// free, but with threshold 0 a pool that keeps the freed block holds more than its threshold, and
// the synchronize is where it tries to give the block back to the OS, to map one again at the
// next allocation. With threshold max it never holds more than the threshold: no reason to.
// The pool is the bench's own, destroyed at the end: the process's default pool, which other
// libraries share, keeps its threshold. Five rounds, the three ways in turn within each round
// (a slow moment of the machine then hits all three); per way the median and the minimum.
inline void benchmarkPairs(CUdevice device, CUstream stream) {
    constexpr int kRounds = 5;
    constexpr int kPairs = 2000;
    constexpr size_t kPairBytes = size_t{1} << 20;
    CUmemoryPool pool = createDevicePool(device);
    CUdeviceptr pointer = 0;
    auto plainPair = [&] {
        CHECK_DRIVER(cuMemAlloc(&pointer, kPairBytes));
        CHECK_DRIVER(cuMemFree(pointer));
        CHECK_DRIVER(cuStreamSynchronize(stream));
    };
    auto poolPair = [&] {
        CHECK_DRIVER(cuMemAllocFromPoolAsync(&pointer, kPairBytes, pool, stream));
        CHECK_DRIVER(cuMemFreeAsync(pointer, stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
    };
    std::vector<double> plain, threshold0, thresholdMax;
    for (int round = 0; round < kRounds; ++round) {
        plain.push_back(microsecondsPerPair(kPairs, plainPair));
        setReleaseThreshold(pool, 0);
        threshold0.push_back(microsecondsPerPair(kPairs, poolPair));
        setReleaseThreshold(pool, UINT64_MAX);
        thresholdMax.push_back(microsecondsPerPair(kPairs, poolPair));
        CHECK_DRIVER(cuMemPoolTrimTo(pool, 0));
    }
    CHECK_DRIVER(cuMemPoolDestroy(pool));
    std::printf(
        "method: %d rounds of %d pairs of %zu bytes per way, each pair followed by cuStreamSynchronize; "
        "mean per pair in each round, then the median and the minimum of the rounds\n",
        kRounds, kPairs, kPairBytes);
    printBenchLine("cuMemAlloc + cuMemFree pair", plain);
    printBenchLine("cuMemAllocFromPoolAsync + cuMemFreeAsync pair, threshold 0", threshold0);
    printBenchLine("cuMemAllocFromPoolAsync + cuMemFreeAsync pair, threshold max", thresholdMax);
    std::printf("bench: cuMemAlloc pair / pool pair with threshold max, ratio of the medians = %.1f x\n",
                medianOf(plain) / medianOf(thresholdMax));
}

}  // namespace lesson12
