// Lesson 14, program 2 — copies between two GPUs: cuMemcpyPeer and cuMemcpyPeerAsync.
//
// A copy from one GPU's memory to another's names both contexts: the driver must know
// which device each address belongs to and which context's work to order it after. Such a
// copy works whether or not peer access is enabled (the driver finds a way, through host
// memory if it must); with peer access the copy engines move the data over the link. This
// program copies a buffer GPU A -> GPU B with cuMemcpyPeer before any peer access, back
// B -> A with cuMemcpyPeerAsync after enabling it both ways, checks every word, and
// (--bench) times the peer copy against the same copy staged through pinned host memory.
//
//   peer_copy                         GPUs 0 and 1, the checked copies
//   peer_copy --bench                 also the bandwidth table, "bench:" lines
//   peer_copy --device A --peer B     two other GPUs
#include <cuda.h>

#include <cstdio>
#include <utility>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "peer_bench.h"
#include "two_gpus.h"

int main(int argc, char** argv) {
    course::Arguments args;
    int ordinalA = 0;
    int ordinalB = 1;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device", "--peer"}, "[--device A] [--peer B] [--bench]",
                                args) ||
        !lesson14::pickOrdinals(args, argv[0], ordinalA, ordinalB))
        return course::kExitUsage;
    constexpr unsigned int kWords = 4u << 20;
    constexpr size_t kBytes = kWords * sizeof(unsigned int);

    course::printStep(1, "find two GPUs");
    CHECK_DRIVER(cuInit(0));
    int deviceCount = 0;
    CHECK_DRIVER(cuDeviceGetCount(&deviceCount));
    if (!lesson14::twoGpusPresent(deviceCount, {"copy 16 MiB GPU A -> GPU B with cuMemcpyPeer, peer access off",
                                                "enable peer access both ways, copy it back with cuMemcpyPeerAsync",
                                                "check every word of both copies on the host",
                                                "--bench: GB/s of peer copies and of copies staged through pinned "
                                                "host memory, both directions"}))
        return course::kExitNotApplicable;
    CUdevice deviceA = 0;
    CUdevice deviceB = 0;
    CHECK_DRIVER(cuDeviceGet(&deviceA, ordinalA));
    CHECK_DRIVER(cuDeviceGet(&deviceB, ordinalB));
    for (const auto& [ordinal, device] : {std::pair{ordinalA, deviceA}, std::pair{ordinalB, deviceB}}) {
        char name[256] = {};
        CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
        std::printf("GPU %d name: %s\n", ordinal, name);
    }

    course::printStep(2, "can each GPU reach the other?");
    int canAB = 0;
    int canBA = 0;
    CHECK_DRIVER(cuDeviceCanAccessPeer(&canAB, deviceA, deviceB));
    CHECK_DRIVER(cuDeviceCanAccessPeer(&canBA, deviceB, deviceA));
    std::printf("cuDeviceCanAccessPeer(GPU %d -> GPU %d): %d\n", ordinalA, ordinalB, canAB);
    std::printf("cuDeviceCanAccessPeer(GPU %d -> GPU %d): %d\n", ordinalB, ordinalA, canBA);
    if (!lesson14::peersReachEachOther(ordinalA, ordinalB, canAB, canBA)) return course::kExitNotApplicable;

    // Step 3: a context per GPU, a stream of each context, and the buffers, each allocated
    // with its GPU's context current (that is what puts it on that GPU).
    course::printStep(3, "a context, a stream and buffers on each GPU");
    CUcontext contextA = nullptr;
    CUcontext contextB = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&contextA, deviceA));
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&contextB, deviceB));
    CHECK_DRIVER(cuCtxSetCurrent(contextB));
    CUstream streamB = nullptr;
    CHECK_DRIVER(cuStreamCreate(&streamB, CU_STREAM_NON_BLOCKING));
    CUdeviceptr copyOnB = 0;
    CHECK_DRIVER(cuMemAlloc(&copyOnB, kBytes));
    CHECK_DRIVER(cuCtxSetCurrent(contextA));
    CUstream streamA = nullptr;
    CHECK_DRIVER(cuStreamCreate(&streamA, CU_STREAM_NON_BLOCKING));
    CUdeviceptr originalOnA = 0;
    CUdeviceptr returnedOnA = 0;
    CHECK_DRIVER(cuMemAlloc(&originalOnA, kBytes));
    CHECK_DRIVER(cuMemAlloc(&returnedOnA, kBytes));
    std::vector<unsigned int> host(kWords);
    for (unsigned int i = 0; i < kWords; ++i) host[i] = i ^ 0x5a5a5a5au;
    CHECK_DRIVER(cuMemcpyHtoD(originalOnA, host.data(), kBytes));
    CHECK_DRIVER(cuCtxSynchronize());  // from pageable memory the copy may still be running
    std::printf("buffers: %zu bytes on GPU %d (original, returned), %zu bytes on GPU %d (copy)\n", kBytes, ordinalA,
                kBytes, ordinalB);
    std::vector<unsigned int> check(kWords);
    // Reads a buffer back in its own context, after the work queued there, and compares.
    auto wordsMatching = [&](CUcontext context, CUdeviceptr buffer) {
        CHECK_DRIVER(cuCtxSetCurrent(context));
        CHECK_DRIVER(cuCtxSynchronize());
        CHECK_DRIVER(cuMemcpyDtoH(check.data(), buffer, kBytes));
        unsigned int same = 0;
        for (unsigned int i = 0; i < kWords; ++i) same += check[i] == host[i];
        return same;
    };

    // Step 4: no peer access yet. cuMemcpyPeer still copies. Between two devices it may
    // return before the bytes have arrived, so the host waits for both contexts (here A's,
    // then B's in wordsMatching) before it reads the copy.
    course::printStep(4, "cuMemcpyPeer GPU A -> GPU B, peer access not enabled");
    CHECK_DRIVER(cuMemcpyPeer(copyOnB, contextB, originalOnA, contextA, kBytes));
    CHECK_DRIVER(cuCtxSynchronize());
    const unsigned int copied = wordsMatching(contextB, copyOnB);
    std::printf("cuMemcpyPeer GPU %d -> GPU %d: %u of %u words match\n", ordinalA, ordinalB, copied, kWords);
    course::Verdict verdict;
    verdict.check("copy without peer access is exact", copied == kWords);

    // Step 5: enable both directions (each in its own context), then copy back on a stream
    // of A's context. Async: it returns at once; the stream's synchronize is the wait.
    course::printStep(5, "enable peer access both ways, cuMemcpyPeerAsync GPU B -> GPU A");
    CHECK_DRIVER(cuCtxSetCurrent(contextA));
    CHECK_DRIVER(cuCtxEnablePeerAccess(contextB, 0));
    CHECK_DRIVER(cuCtxSetCurrent(contextB));
    CHECK_DRIVER(cuCtxEnablePeerAccess(contextA, 0));
    std::printf("peer access: GPU %d -> GPU %d enabled, GPU %d -> GPU %d enabled\n", ordinalA, ordinalB, ordinalB,
                ordinalA);
    CHECK_DRIVER(cuCtxSetCurrent(contextA));
    CHECK_DRIVER(cuMemcpyPeerAsync(returnedOnA, contextA, copyOnB, contextB, kBytes, streamA));
    CHECK_DRIVER(cuStreamSynchronize(streamA));
    const unsigned int returned = wordsMatching(contextA, returnedOnA);
    std::printf("cuMemcpyPeerAsync GPU %d -> GPU %d: %u of %u words match\n", ordinalB, ordinalA, returned, kWords);
    verdict.check("copy back with peer access is exact", returned == kWords);

    course::printStep(6, "benchmark: peer copy against staged through pinned host memory (--bench)");
    if (args.has("--bench"))
        lesson14::benchmarkCopies({ordinalA, contextA, streamA}, {ordinalB, contextB, streamB});
    else
        std::printf("benchmark: not run (add --bench)\n");

    // Step 7: each direction is closed in the context that opened it; each buffer and stream
    // goes back with its own context current; then the contexts.
    course::printStep(7, "disable peer access, release everything, newest first");
    CHECK_DRIVER(cuCtxSetCurrent(contextB));
    CHECK_DRIVER(cuCtxDisablePeerAccess(contextA));
    CHECK_DRIVER(cuCtxSetCurrent(contextA));
    CHECK_DRIVER(cuCtxDisablePeerAccess(contextB));
    CHECK_DRIVER(cuMemFree(returnedOnA));
    CHECK_DRIVER(cuMemFree(originalOnA));
    CHECK_DRIVER(cuStreamDestroy(streamA));
    CHECK_DRIVER(cuCtxSetCurrent(contextB));
    CHECK_DRIVER(cuMemFree(copyOnB));
    CHECK_DRIVER(cuStreamDestroy(streamB));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(deviceB));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(deviceA));
    std::printf("released: peer access both ways, buffers, streams, both primary contexts\n");

    course::printStep(8, "check");
    return verdict.finish();
}
