// pool_helpers.h — lesson 12's small helpers: a pool's counters and policies, the
// cross-stream reuse experiment of step 6, and the timing loop of step 7.
#pragma once

#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

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

// Step 6 of pool_basics (--bench): the cost of an allocate + free pair followed by a stream
// synchronize, as a loop that allocates a scratch buffer per iteration pays it.
// cuMemFree waits for the device anyway; cuMemFreeAsync does not, but the synchronize
// is where a pool with threshold 0 gives its block back to the OS, to map it again at
// the next allocation. With threshold max it keeps the block and the pair stays cheap.
// The default pool is the process's: its threshold is restored to 0 afterwards.
inline void benchmarkPairs(CUmemoryPool defaultPool, CUstream stream) {
    constexpr int kPairs = 10000;
    constexpr size_t kPairBytes = size_t{1} << 20;
    CUdeviceptr pointer = 0;
    const double plain = microsecondsPerPair(kPairs, [&] {
        CHECK_DRIVER(cuMemAlloc(&pointer, kPairBytes));
        CHECK_DRIVER(cuMemFree(pointer));
        CHECK_DRIVER(cuStreamSynchronize(stream));
    });
    auto asyncPair = [&] {
        CHECK_DRIVER(cuMemAllocAsync(&pointer, kPairBytes, stream));
        CHECK_DRIVER(cuMemFreeAsync(pointer, stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
    };
    setReleaseThreshold(defaultPool, 0);
    const double threshold0 = microsecondsPerPair(kPairs, asyncPair);
    setReleaseThreshold(defaultPool, UINT64_MAX);
    const double thresholdMax = microsecondsPerPair(kPairs, asyncPair);
    setReleaseThreshold(defaultPool, 0);
    CHECK_DRIVER(cuMemPoolTrimTo(defaultPool, 0));
    std::printf("pairs per measurement: %d of %zu bytes, each followed by cuStreamSynchronize\n", kPairs, kPairBytes);
    std::printf("bench: cuMemAlloc + cuMemFree pair = %.2f us\n", plain);
    std::printf("bench: cuMemAllocAsync + cuMemFreeAsync pair, threshold 0 = %.2f us\n", threshold0);
    std::printf("bench: cuMemAllocAsync + cuMemFreeAsync pair, threshold max = %.2f us\n", thresholdMax);
    std::printf("bench: cuMemAlloc pair / async pair with threshold max = %.1f x\n", plain / thresholdMax);
}

}  // namespace lesson12
