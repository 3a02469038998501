// peer_bench.h — step 6 of peer_copy (--bench): the same 256 MiB copied GPU to GPU
// directly and staged through pinned host memory, both directions, one table.
#pragma once

#include <cuda.h>

#include <chrono>
#include <cstdio>

#include "../common/check_driver.h"

namespace lesson14 {

// One GPU as the benchmark sees it: its ordinal, its context and a stream of that context.
struct Gpu {
    int ordinal;
    CUcontext context;
    CUstream stream;
};

// Mean GB/s (10^9 bytes per second) of `copy` over `repeats` runs, after one untimed run
// that pays for what happens once (mapping the pages, waking the link). `copy` returns
// when the bytes have arrived, so host time is the copy's time.
template <class Copy>
double gigabytesPerSecond(size_t bytes, int repeats, Copy copy) {
    copy();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) copy();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    return static_cast<double>(bytes) * repeats / elapsed.count() / 1e9;
}

// Directly: peer access is on both ways, so the copy engines move the data over the link.
inline void peerCopy(const Gpu& from, CUdeviceptr source, const Gpu& to, CUdeviceptr destination, size_t bytes) {
    CHECK_DRIVER(cuCtxSetCurrent(from.context));
    CHECK_DRIVER(cuMemcpyPeerAsync(destination, to.context, source, from.context, bytes, from.stream));
    CHECK_DRIVER(cuStreamSynchronize(from.stream));
}

// What a program that knows nothing of peers does: device -> host in the source's context,
// then host -> device in the destination's, one after the other through one host buffer.
inline void stagedCopy(const Gpu& from, CUdeviceptr source, const Gpu& to, CUdeviceptr destination, void* pinned,
                       size_t bytes) {
    CHECK_DRIVER(cuCtxSetCurrent(from.context));
    CHECK_DRIVER(cuMemcpyDtoHAsync(pinned, source, bytes, from.stream));
    CHECK_DRIVER(cuStreamSynchronize(from.stream));
    CHECK_DRIVER(cuCtxSetCurrent(to.context));
    CHECK_DRIVER(cuMemcpyHtoDAsync(destination, pinned, bytes, to.stream));
    CHECK_DRIVER(cuStreamSynchronize(to.stream));
}

// Both directions, both ways, measured in this run on these two GPUs; every ratio divides
// two of these numbers. Buffers of its own, freed (each in its context) before it returns.
inline void benchmarkCopies(const Gpu& a, const Gpu& b) {
    constexpr size_t kBytes = size_t{256} << 20;
    constexpr int kRepeats = 10;
    CUdeviceptr onA = 0;
    CUdeviceptr onB = 0;
    CHECK_DRIVER(cuCtxSetCurrent(a.context));
    CHECK_DRIVER(cuMemAlloc(&onA, kBytes));
    CHECK_DRIVER(cuMemsetD8(onA, 0xa, kBytes));
    CHECK_DRIVER(cuCtxSynchronize());  // the streams below do not wait for the legacy stream
    CHECK_DRIVER(cuCtxSetCurrent(b.context));
    CHECK_DRIVER(cuMemAlloc(&onB, kBytes));
    CHECK_DRIVER(cuMemsetD8(onB, 0xb, kBytes));
    CHECK_DRIVER(cuCtxSynchronize());
    // PORTABLE: cuda.h says such memory is "considered as pinned memory by all CUDA contexts,
    // not just the one that performed the allocation". With unified addressing (always on
    // 64-bit Linux) cuda.h adds that cuMemAllocHost / cuMemHostAlloc memory is directly
    // accessible from every context on every device, flag or not; the flag says the intent,
    // and keeps it so on a system without unified addressing.
    void* pinned = nullptr;
    CHECK_DRIVER(cuMemHostAlloc(&pinned, kBytes, CU_MEMHOSTALLOC_PORTABLE));

    struct Direction {
        const Gpu& from;
        CUdeviceptr source;
        const Gpu& to;
        CUdeviceptr destination;
    };
    const Direction directions[] = {{a, onA, b, onB}, {b, onB, a, onA}};
    std::printf("copies of %zu bytes, mean of %d after one untimed copy, peer access enabled both ways\n", kBytes,
                kRepeats);
    std::printf("%-16s %14s %24s %14s\n", "direction", "peer copy", "staged via pinned host", "peer / staged");
    double results[2][2] = {};
    for (int i = 0; i < 2; ++i) {
        const Direction& d = directions[i];
        results[i][0] =
            gigabytesPerSecond(kBytes, kRepeats, [&] { peerCopy(d.from, d.source, d.to, d.destination, kBytes); });
        results[i][1] = gigabytesPerSecond(kBytes, kRepeats,
                                           [&] { stagedCopy(d.from, d.source, d.to, d.destination, pinned, kBytes); });
        std::printf("GPU %d -> GPU %-3d %9.1f GB/s %19.1f GB/s %12.1f x\n", d.from.ordinal, d.to.ordinal, results[i][0],
                    results[i][1], results[i][0] / results[i][1]);
    }
    for (int i = 0; i < 2; ++i) {
        const int from = directions[i].from.ordinal;
        const int to = directions[i].to.ordinal;
        std::printf("bench: peer copy GPU %d -> GPU %d = %.1f GB/s\n", from, to, results[i][0]);
        std::printf("bench: staged copy via pinned host GPU %d -> GPU %d = %.1f GB/s\n", from, to, results[i][1]);
        std::printf("bench: peer / staged GPU %d -> GPU %d = %.1f x\n", from, to, results[i][0] / results[i][1]);
    }

    CHECK_DRIVER(cuMemFreeHost(pinned));
    CHECK_DRIVER(cuCtxSetCurrent(b.context));
    CHECK_DRIVER(cuMemFree(onB));
    CHECK_DRIVER(cuCtxSetCurrent(a.context));
    CHECK_DRIVER(cuMemFree(onA));
}

}  // namespace lesson14
