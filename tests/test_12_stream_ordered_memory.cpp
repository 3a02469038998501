#include <cuda.h>
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "12-stream-ordered-memory";
const std::vector<std::string> kPrograms = {"pool_basics", "cross_stream_reuse"};
constexpr unsigned long long kBlockBytes = 64ULL << 20;  // pool_basics' block

// The integer a labelled value starts with ("67108864 bytes" -> 67108864).
unsigned long long leadingNumber(const std::optional<std::string>& value) {
    REQUIRE(value);
    return std::stoull(*value);
}


// Every check each program prints, in order.
const std::vector<std::string> kPoolBasicsChecks = {
    "stream-ordered buffer holds the memset pattern",
    "the new pool's release threshold reads back 0",
    "the pool holds more than its release threshold when the synchronize comes",
    "nothing in use after the free and the synchronize",
    "the release threshold reads back max",
    "threshold max kept the block at the synchronize",
    "cuMemPoolTrimTo gave back every reserved byte",
    "free memory back at its start",
};
const std::vector<std::string> kCrossStreamChecks = {
    "no reuse across an event with every policy off",
    "no reuse without the event wait",
    "after the host synchronised with A the block is reused with every policy off",
    "nothing in use in the pool at the end",
};

void checkAllOk(const RunResult& r, const std::vector<std::string>& checks) {
    for (const auto& name : checks) {
        INFO(name);
        CHECK(valueOf(r.out, "check " + name) == "ok");
    }
    size_t printed = 0;
    for (const auto& line : lines(r.out)) printed += line.rfind("check ", 0) == 0 ? 1 : 0;
    CHECK(printed == checks.size());
}


// The driver functions the direct tests use, looked up once per test.
struct PoolFunctions {
    decltype(&::cuDeviceGetAttribute) deviceAttribute = DRIVER_FUNCTION(driver(), cuDeviceGetAttribute);
    decltype(&::cuMemPoolCreate) create = DRIVER_FUNCTION(driver(), cuMemPoolCreate);
    decltype(&::cuMemPoolDestroy) destroy = DRIVER_FUNCTION(driver(), cuMemPoolDestroy);
    decltype(&::cuMemPoolGetAttribute) getAttribute = DRIVER_FUNCTION(driver(), cuMemPoolGetAttribute);
    decltype(&::cuMemPoolSetAttribute) setAttribute = DRIVER_FUNCTION(driver(), cuMemPoolSetAttribute);
    decltype(&::cuMemPoolTrimTo) trimTo = DRIVER_FUNCTION(driver(), cuMemPoolTrimTo);
    decltype(&::cuMemAllocFromPoolAsync) allocFromPool = DRIVER_FUNCTION(driver(), cuMemAllocFromPoolAsync);
    decltype(&::cuMemFreeAsync) freeAsync = DRIVER_FUNCTION(driver(), cuMemFreeAsync);
    decltype(&::cuStreamCreate) streamCreate = DRIVER_FUNCTION(driver(), cuStreamCreate);
    decltype(&::cuStreamDestroy) streamDestroy = DRIVER_FUNCTION(driver(), cuStreamDestroy);
    decltype(&::cuStreamSynchronize) streamSynchronize = DRIVER_FUNCTION(driver(), cuStreamSynchronize);
    decltype(&::cuStreamWaitEvent) streamWaitEvent = DRIVER_FUNCTION(driver(), cuStreamWaitEvent);
    decltype(&::cuEventCreate) eventCreate = DRIVER_FUNCTION(driver(), cuEventCreate);
    decltype(&::cuEventRecord) eventRecord = DRIVER_FUNCTION(driver(), cuEventRecord);
    decltype(&::cuEventDestroy) eventDestroy = DRIVER_FUNCTION(driver(), cuEventDestroy);

    bool complete() const {
        return deviceAttribute && create && destroy && getAttribute && setAttribute && trimTo && allocFromPool &&
               freeAsync && streamCreate && streamDestroy && streamSynchronize && streamWaitEvent && eventCreate &&
               eventRecord && eventDestroy;
    }
    cuuint64_t bytes(CUmemoryPool pool, CUmemPool_attribute attribute) const {
        cuuint64_t value = 0;
        CHECK(getAttribute(pool, attribute, &value) == CUDA_SUCCESS);
        return value;
    }
    int flag(CUmemoryPool pool, CUmemPool_attribute attribute) const {
        int value = -1;
        CHECK(getAttribute(pool, attribute, &value) == CUDA_SUCCESS);
        return value;
    }
};

// Skips (with the reason) on a device without memory pools; otherwise a new device pool.
CUmemoryPool createPoolOrSkip(const PoolFunctions& f, CUdevice device) {
    int supported = 0;
    REQUIRE(f.deviceAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device) == CUDA_SUCCESS);
    if (!supported) SKIP("CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0 on this device");
    CUmemPoolProps properties{};
    properties.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    properties.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    properties.location.id = device;
    CUmemoryPool pool = nullptr;
    REQUIRE(f.create(&pool, &properties) == CUDA_SUCCESS);
    return pool;
}

}  // namespace

// ---------------------------------------------------------------------------
// CPU: no driver needed.

TEST_CASE("Lesson 12 runs its two programs in order", "[cpu][lesson12]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Lesson 12 rejects unknown or incomplete arguments with a usage line and exit 2", "[cpu][lesson12]") {
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {"pool_basics", {"--size", "4096"}},  {"pool_basics", {"--device"}},
        {"pool_basics", {"--device", "one"}}, {"cross_stream_reuse", {"--bench"}},  // only pool_basics has a benchmark
        {"cross_stream_reuse", {"--device"}},
    };
    for (const auto& [program, args] : cases) checkRefusesArguments(kLesson, args, program);
}

// ---------------------------------------------------------------------------
// GPU: the lesson's own checks, read from its output.

TEST_CASE("Lesson 12 pool_basics passes and its stream-ordered buffer holds the memset pattern",
          "[gpu][lesson12]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "pool_basics");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    checkAllOk(r, kPoolBasicsChecks);
    CHECK(valueOf(r.out, "memory pools supported") == "yes");
    CHECK(valueOf(r.out, "current pool is the default pool") == "yes");
    CHECK(valueOf(r.out, "default pool release threshold") == "0 bytes");
    CHECK(valueOf(r.out, "memset + copy back before the free") == "1048576 of 1048576 words read 0x5eed1234");
    CHECK(valueOf(r.out, "benchmark") == "not run (add --bench)");
}

// cuda.h promises that a pool above its threshold "will try to" release at a synchronize, and
// that cuMemPoolTrimTo releases all it can safely release: the test requires the second, and
// only reports the first.
TEST_CASE("Lesson 12 shows what threshold 0 and max keep at a synchronize, and TrimTo(0) freeing it",
          "[gpu][lesson12]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "pool_basics");
    attachToReport(r);
    requireRan(r);
    CHECK(valueOf(r.out, "own pool release threshold") == "0 bytes");
    CHECK(valueOf(r.out, "release threshold when the synchronize comes") == "0 bytes");
    CHECK(leadingNumber(valueOf(r.out, "reserved after the free is queued")) > 0);  // above threshold 0
    CHECK(valueOf(r.out, "release threshold after setting max") == std::to_string(UINT64_MAX) + " bytes");
    CHECK(leadingNumber(valueOf(r.out, "reserved with a 64 MiB block allocated")) >= kBlockBytes);
    CHECK(leadingNumber(valueOf(r.out, "used with a 64 MiB block allocated")) >= kBlockBytes);
    CHECK(valueOf(r.out, "used after synchronize, threshold 0") == "0 bytes");
    if (valueOf(r.out, "reserved after synchronize, threshold 0") != "0 bytes")
        WARN("threshold 0: the pool kept memory at the synchronize (it tries to release; not promised)");
    CHECK(leadingNumber(valueOf(r.out, "reserved after synchronize, threshold max")) >= kBlockBytes);
    CHECK(valueOf(r.out, "used after synchronize, threshold max") == "0 bytes");
    // Both figures side by side, as observed: "N vs M bytes", N and M being the threshold 0 and
    // threshold max figures above.
    const auto sideBySide = valueOf(r.out, "reserved after synchronize, threshold 0 vs max");
    const auto reservedThreshold0 = valueOf(r.out, "reserved after synchronize, threshold 0");
    const auto reservedThresholdMax = valueOf(r.out, "reserved after synchronize, threshold max");
    REQUIRE(sideBySide);
    REQUIRE(reservedThreshold0);
    REQUIRE(reservedThresholdMax);
    CHECK(*sideBySide == std::to_string(leadingNumber(reservedThreshold0)) + " vs " + *reservedThresholdMax);
    if (valueOf(r.out, "reserved grown by a second 64 MiB block") != "0 bytes")
        WARN("the second block did not come from the pool's reserve (the pool's choice)");
    CHECK(valueOf(r.out, "reserved after cuMemPoolTrimTo(pool, 0)") == "0 bytes");
    // Step 7 leaves a block's reserve in the pool (threshold max) for cuMemPoolDestroy to give back.
    CHECK(leadingNumber(valueOf(r.out, "reserved when the pool is destroyed")) >= kBlockBytes);
    CHECK(valueOf(r.out, "used when the pool is destroyed") == "0 bytes");
}

TEST_CASE("Lesson 12 cross_stream_reuse: no reuse where no policy allows it, reuse where the policy does",
          "[gpu][lesson12]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "cross_stream_reuse");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    checkAllOk(r, kCrossStreamChecks);
    // The documented defaults of a new pool: every reuse policy on.
    CHECK(valueOf(r.out,
                  "a new pool's reuse policies (follow event dependencies, opportunistic, internal dependencies)") ==
          "1 1 1");
    CHECK(valueOf(r.out, "B reused A's block, all policies off, B waits on A's event") == "no");
    CHECK(valueOf(r.out, "B reused A's block, FOLLOW_EVENT_DEPENDENCIES, no event") == "no");
    // Documented by NVIDIA's Programming Guide (sections 4.3.4.4-4.3.4.5), not by cuda.h.
    CHECK(valueOf(r.out, "B reused A's block, all policies off, after cuStreamSynchronize(A)") == "yes");
    CHECK(valueOf(r.out, "used by the pool at the end") == "0 bytes");
    // The control: the same round as "all policies off", with the policy on. Reuse there is
    // allowed, not promised; without it the "no" above shows nothing about the policy.
    if (valueOf(r.out, "B reused A's block, FOLLOW_EVENT_DEPENDENCIES, B waits on A's event") == "yes") {
        CHECK(valueOf(r.out, "the policy decided") ==
              "reuse with FOLLOW_EVENT_DEPENDENCIES on, none with every policy off");
    } else {
        CHECK(valueOf(r.out, "section policy control").value_or("").rfind("SKIP (", 0) == 0);
        WARN("this driver did not reuse the block across the event dependency (allowed, not promised)");
    }
}

// The README says a pool with threshold max makes the pair much cheaper than cuMemAlloc +
// cuMemFree. Medians of five rounds of the same run, with a margin: at least twice as fast
// (about 35x on the H100).
TEST_CASE("Lesson 12 --bench: the pool with threshold max beats cuMemAlloc + cuMemFree", "[gpu][lesson12]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench"};
    const RunResult r = runLesson(kLesson, options, "pool_basics");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    const double plain = benchValue(r.out, "cuMemAlloc + cuMemFree pair, median");
    const double threshold0 = benchValue(r.out, "cuMemAllocFromPoolAsync + cuMemFreeAsync pair, threshold 0, median");
    const double thresholdMax =
        benchValue(r.out, "cuMemAllocFromPoolAsync + cuMemFreeAsync pair, threshold max, median");
    INFO("medians: cuMemAlloc " << plain << " us, threshold 0 " << threshold0 << " us, threshold max " << thresholdMax
                                << " us");
    REQUIRE(plain > 0.0);
    REQUIRE(threshold0 > 0.0);
    REQUIRE(thresholdMax > 0.0);
    CHECK(benchValue(r.out, "cuMemAlloc + cuMemFree pair, min") <= plain);
    CHECK(2.0 * thresholdMax < plain);
    CHECK(benchValue(r.out, "cuMemAlloc pair / pool pair with threshold max, ratio of the medians") > 2.0);
}

// ---------------------------------------------------------------------------
// GPU: the same driver behaviour, checked directly through the driver. Every pool, stream and
// event a test makes is given back by a Cleanup, so a failed REQUIRE leaks nothing.

TEST_CASE("A new pool starts with threshold 0 and every reuse policy on", "[gpu][lesson12]") {
    requireGpu();
    CurrentPrimaryContext context;
    const PoolFunctions f;
    REQUIRE(f.complete());
    CUmemoryPool pool = createPoolOrSkip(f, context.device());
    Cleanup poolBack([&] { return f.destroy(pool); });
    CHECK(f.bytes(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == 0);
    CHECK(f.bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);
    CHECK(f.flag(pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES) == 1);
    CHECK(f.flag(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC) == 1);
    CHECK(f.flag(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES) == 1);
    CHECK(poolBack.now() == CUDA_SUCCESS);
}

TEST_CASE("Threshold max keeps a pool's memory at a synchronize, and TrimTo gives it back", "[gpu][lesson12]") {
    requireGpu();
    CurrentPrimaryContext context;
    const PoolFunctions f;
    REQUIRE(f.complete());
    CUmemoryPool pool = createPoolOrSkip(f, context.device());
    Cleanup poolBack([&] { return f.destroy(pool); });
    CUstream stream = nullptr;
    REQUIRE(f.streamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    Cleanup streamBack([&] { return f.streamDestroy(stream); });
    constexpr size_t kBytes = size_t{16} << 20;
    auto allocateFreeSynchronize = [&] {
        CUdeviceptr pointer = 0;
        REQUIRE(f.allocFromPool(&pointer, kBytes, pool, stream) == CUDA_SUCCESS);
        CHECK(f.bytes(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) >= kBytes);
        CHECK(f.freeAsync(pointer, stream) == CUDA_SUCCESS);
        CHECK(f.streamSynchronize(stream) == CUDA_SUCCESS);
    };
    // Threshold 0: the pool tries to release at the synchronize; the trim after it must leave
    // nothing, since the host has seen the free complete.
    allocateFreeSynchronize();
    CHECK(f.bytes(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
    CHECK(f.trimTo(pool, 0) == CUDA_SUCCESS);
    CHECK(f.bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);
    cuuint64_t keepEverything = UINT64_MAX;
    CHECK(f.setAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keepEverything) == CUDA_SUCCESS);
    allocateFreeSynchronize();
    CHECK(f.bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >= kBytes);
    CHECK(f.bytes(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
    CHECK(f.trimTo(pool, 0) == CUDA_SUCCESS);
    CHECK(f.bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);
    CHECK(streamBack.now() == CUDA_SUCCESS);
    CHECK(poolBack.now() == CUDA_SUCCESS);
}

// The same scenario twice: a block freed on stream A, an event recorded after the free, stream B
// waiting on it, then a block of the same size allocated on B. With FOLLOW_EVENT_DEPENDENCIES on
// (the control) B may get A's block; with every policy off it must not. Without the control, a
// different address would prove nothing: it is also what a pool that never reuses gives. The
// block is 32 MiB and the pool is trimmed empty between the rounds.
TEST_CASE("FOLLOW_EVENT_DEPENDENCIES decides whether a block freed on one stream goes to another",
          "[gpu][lesson12]") {
    requireGpu();
    CurrentPrimaryContext context;
    const PoolFunctions f;
    REQUIRE(f.complete());
    CUmemoryPool pool = createPoolOrSkip(f, context.device());
    Cleanup poolBack([&] { return f.destroy(pool); });
    cuuint64_t keepEverything = UINT64_MAX;
    CHECK(f.setAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keepEverything) == CUDA_SUCCESS);
    CUstream a = nullptr;
    CUstream b = nullptr;
    CUevent freed = nullptr;
    REQUIRE(f.streamCreate(&a, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    Cleanup aBack([&] { return f.streamDestroy(a); });
    REQUIRE(f.streamCreate(&b, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    Cleanup bBack([&] { return f.streamDestroy(b); });
    REQUIRE(f.eventCreate(&freed, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
    Cleanup eventBack([&] { return f.eventDestroy(freed); });
    constexpr size_t kBytes = size_t{32} << 20;
    auto bGetsAsBlock = [&](int follow) {
        int off = 0;
        REQUIRE(f.setAttribute(pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, &follow) == CUDA_SUCCESS);
        REQUIRE(f.setAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &off) == CUDA_SUCCESS);
        REQUIRE(f.setAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &off) == CUDA_SUCCESS);
        CUdeviceptr onA = 0;
        CUdeviceptr onB = 0;
        REQUIRE(f.allocFromPool(&onA, kBytes, pool, a) == CUDA_SUCCESS);
        CHECK(f.freeAsync(onA, a) == CUDA_SUCCESS);
        CHECK(f.eventRecord(freed, a) == CUDA_SUCCESS);
        CHECK(f.streamWaitEvent(b, freed, 0) == CUDA_SUCCESS);
        REQUIRE(f.allocFromPool(&onB, kBytes, pool, b) == CUDA_SUCCESS);
        CHECK(f.freeAsync(onB, b) == CUDA_SUCCESS);
        CHECK(f.streamSynchronize(b) == CUDA_SUCCESS);
        CHECK(f.streamSynchronize(a) == CUDA_SUCCESS);
        CHECK(f.trimTo(pool, 0) == CUDA_SUCCESS);
        return onB == onA;
    };
    // The control first: without reuse there, a different address with the policy off shows nothing.
    if (!bGetsAsBlock(1)) SKIP("no reuse even with FOLLOW_EVENT_DEPENDENCIES on: the control shows nothing here");
    CHECK_FALSE(bGetsAsBlock(0));
    CHECK(eventBack.now() == CUDA_SUCCESS);
    CHECK(bBack.now() == CUDA_SUCCESS);
    CHECK(aBack.now() == CUDA_SUCCESS);
    CHECK(poolBack.now() == CUDA_SUCCESS);
}
