// Lesson 12, program 2 — memory freed on stream A, allocated on stream B.
//
// cuMemFreeAsync(p, A) returns the block to the pool at A's point in stream order, not
// now. Handing it to an allocation on stream B is safe only if B's work cannot run
// before A's free. A pool has three policies that say which evidence it may act on:
//   REUSE_FOLLOW_EVENT_DEPENDENCIES    B waits on an event recorded after the free
//   REUSE_ALLOW_OPPORTUNISTIC          the free has already run on the GPU
//   REUSE_ALLOW_INTERNAL_DEPENDENCIES  the driver may make B wait for A itself
// This program turns them on one at a time and watches whether B gets A's address.
// Where no policy allows reuse the driver must not reuse, and the program checks that;
// where one does, reuse is allowed, not promised, and the program prints what happened.
//
//   cross_stream_reuse               the rounds, with their checks
//   cross_stream_reuse --device N    another GPU
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "pool_helpers.h"

using lesson12::Ordering;

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "initialise the driver and ask for memory pool support");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", ordinal, name);
    if (!lesson12::memoryPoolsSupported(device)) return course::kExitNotApplicable;

    // Step 2: NON_BLOCKING streams: a blocking stream would also wait for the legacy
    // default stream, and such "null stream interactions" are dependencies too. The
    // pool's threshold is max so that a synchronize gives nothing back to the OS: only
    // the policies decide what happens to a freed block.
    course::printStep(2, "two streams, an event, a pool of our own with threshold max");
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUstream streamA = nullptr;
    CUstream streamB = nullptr;
    CHECK_DRIVER(cuStreamCreate(&streamA, CU_STREAM_NON_BLOCKING));
    CHECK_DRIVER(cuStreamCreate(&streamB, CU_STREAM_NON_BLOCKING));
    CUevent freedOnA = nullptr;
    CHECK_DRIVER(cuEventCreate(&freedOnA, CU_EVENT_DISABLE_TIMING));
    CUmemoryPool pool = lesson12::createDevicePool(device);
    lesson12::setReleaseThreshold(pool, UINT64_MAX);
    lesson12::printReusePolicies("a new pool's", pool);

    // Each round: allocate 32 MiB on A, free it on A, record `freedOnA`; then, as the
    // round says, make B wait on the event (or not); allocate 32 MiB on B and compare
    // the addresses (pool_helpers.h). Every round starts from an empty pool.
    constexpr size_t kBytes = size_t{32} << 20;
    struct Round {
        const char* label;
        lesson12::ReusePolicies policies;
        Ordering ordering;
        bool mustNotReuse;
    };
    const Round eventRounds[] = {
        {"all policies off, B waits on A's event", {0, 0, 0}, Ordering::EventWait, true},
        {"FOLLOW_EVENT_DEPENDENCIES, B waits on A's event", {1, 0, 0}, Ordering::EventWait, false},
        {"FOLLOW_EVENT_DEPENDENCIES, no event", {1, 0, 0}, Ordering::NoDependency, true},
    };
    const Round otherRounds[] = {
        {"ALLOW_OPPORTUNISTIC, free already run, no event", {0, 1, 0}, Ordering::FreeFinished, false},
        {"ALLOW_INTERNAL_DEPENDENCIES, no event", {0, 0, 1}, Ordering::NoDependency, false},
        {"all policies off, after cuStreamSynchronize(A)", {0, 0, 0}, Ordering::StreamSynchronized, false},
    };
    bool asDocumented = true;
    auto play = [&](const Round& round) {
        lesson12::setReusePolicies(pool, round.policies);
        const bool reused = lesson12::streamBReusesFreedBlock(pool, streamA, streamB, freedOnA, kBytes, round.ordering);
        std::printf("B reused A's block, %s: %s (%s)\n", round.label, reused ? "yes" : "no",
                    round.mustNotReuse ? "must be no" : "allowed, observed");
        if (round.mustNotReuse && reused) asDocumented = false;
    };

    // Step 3: the event is the dependency; FOLLOW_EVENT_DEPENDENCIES lets the pool see it.
    // Without the policy, or without the wait, nothing orders B after A's free.
    course::printStep(3, "event dependencies: FOLLOW_EVENT_DEPENDENCIES");
    for (const auto& round : eventRounds) play(round);

    // Step 4: the other two ways. OPPORTUNISTIC reuses a free that has already run, with
    // no dependency at all: what B gets depends on timing. INTERNAL_DEPENDENCIES lets the
    // driver insert "B waits for A" itself, which it does only when it cannot get more
    // physical memory. A synchronize with the host makes a freed block free for everyone.
    course::printStep(4, "opportunistic reuse, internal dependencies, a host synchronize");
    for (const auto& round : otherRounds) play(round);

    course::printStep(5, "release everything, newest first");
    lesson12::printUsage("by the pool at the end", pool);
    CHECK_DRIVER(cuMemPoolDestroy(pool));
    CHECK_DRIVER(cuEventDestroy(freedOnA));
    CHECK_DRIVER(cuStreamDestroy(streamB));
    CHECK_DRIVER(cuStreamDestroy(streamA));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context: released\n");

    // Step 6: only what the driver documents decides PASS.
    course::printStep(6, "check");
    std::printf("no reuse where no policy allows it: %s\n", asDocumented ? "yes" : "no");
    std::printf("Result = %s\n", asDocumented ? "PASS" : "FAIL");
    return asDocumented ? EXIT_SUCCESS : EXIT_FAILURE;
}
