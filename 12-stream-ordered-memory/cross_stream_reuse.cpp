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
// The same scenario with the policy on (reuse seen) and off (none) shows that the policy
// is what decides. Every "check NAME:" line feeds the Result.
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
    course::Verdict verdict;

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
    auto play = [&](const char* label, const lesson12::ReusePolicies& policies, Ordering ordering) {
        lesson12::setReusePolicies(pool, policies);
        const bool reused = lesson12::streamBReusesFreedBlock(pool, streamA, streamB, freedOnA, kBytes, ordering);
        std::printf("B reused A's block, %s: %s\n", label, reused ? "yes" : "no");
        return reused;
    };

    // Step 3: the event is the dependency; FOLLOW_EVENT_DEPENDENCIES lets the pool see it.
    // The first round is the control: the policy on, the event waited on, reuse allowed. The
    // same round with every policy off, and the policy on without the wait, must not reuse:
    // nothing the pool may act on orders B after A's free.
    course::printStep(3, "event dependencies: FOLLOW_EVENT_DEPENDENCIES");
    const bool control = play("FOLLOW_EVENT_DEPENDENCIES, B waits on A's event", {1, 0, 0}, Ordering::EventWait);
    const bool allOff = play("all policies off, B waits on A's event", {0, 0, 0}, Ordering::EventWait);
    verdict.check("no reuse across an event with every policy off", !allOff);
    const bool noWait = play("FOLLOW_EVENT_DEPENDENCIES, no event", {1, 0, 0}, Ordering::NoDependency);
    verdict.check("no reuse without the event wait", !noWait);
    if (!control)
        std::printf(
            "section policy control: SKIP (this driver did not reuse even with the policy on and the "
            "event waited on, so the round with every policy off shows no difference the policy made)\n");
    else if (!allOff)
        std::printf("the policy decided: reuse with FOLLOW_EVENT_DEPENDENCIES on, none with every policy off\n");

    // Step 4: the other two ways, printed as observed. OPPORTUNISTIC reuses a free that
    // has already run, with no dependency at all: what B gets depends on timing.
    // INTERNAL_DEPENDENCIES allows the driver to make B wait for A's free itself (cuda.h:
    // "insert new stream dependencies in order to establish the stream ordering required to
    // reuse"); when it does so is the driver's choice. After the host synchronised with A
    // the free has completed and the host has seen it: cuda.h says nothing of that case, but
    // NVIDIA's CUDA Programming Guide (sections 4.3.4.4 and 4.3.4.5) documents that the
    // allocator then reuses the memory whatever the policies say. That is checked.
    course::printStep(4, "opportunistic reuse, internal dependencies, a host synchronize");
    play("ALLOW_OPPORTUNISTIC, free already run, no event", {0, 1, 0}, Ordering::FreeFinished);
    play("ALLOW_INTERNAL_DEPENDENCIES, no event", {0, 0, 1}, Ordering::NoDependency);
    const bool afterSync =
        play("all policies off, after cuStreamSynchronize(A)", {0, 0, 0}, Ordering::StreamSynchronized);
    verdict.check("after the host synchronised with A the block is reused with every policy off", afterSync);

    course::printStep(5, "release everything, newest first");
    lesson12::printUsage("by the pool at the end", pool);
    verdict.check("nothing in use in the pool at the end",
                  lesson12::poolBytes(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
    CHECK_DRIVER(cuMemPoolDestroy(pool));
    CHECK_DRIVER(cuEventDestroy(freedOnA));
    CHECK_DRIVER(cuStreamDestroy(streamB));
    CHECK_DRIVER(cuStreamDestroy(streamA));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context: released\n");
    return verdict.finish();
}
