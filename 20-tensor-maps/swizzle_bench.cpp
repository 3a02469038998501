// Lesson 20, program 3 of 4 — what the 128-byte swizzle is for, and what the copy engine moves.
//
// Part 1: the same 32 x 32 float tile loaded with CU_TENSOR_MAP_SWIZZLE_NONE and with
// CU_TENSOR_MAP_SWIZZLE_128B, then read by columns of 16-byte chunks (lane l reads row l): the
// pattern of a matrix-multiply operand read. Unswizzled, the 32 rows of 128 bytes start in the
// same bank and every lane's chunk lies in the same 4 banks; swizzled, 8 rows in a row spread
// their chunks over all 32 banks. Checked: both reads return the same sums, and the copy engine
// put each element where the XOR formula (swizzle_math.h) says. Printed: both times, observed,
// and the rate each read reached in shared-memory bytes per clock and SM, checked against the
// limit computed from the device's attributes (32 banks x 4 bytes per clock, at the SM clock).
// Part 2: a 256 MiB float matrix copied by tensor-map tiles, by a plain coalesced kernel and by
// cuMemcpyDtoD, each as a share of the DRAM peak computed from two device attributes (and the
// assumption of a double data rate, common/dram_peak.h); all three copies are checked. With
// --bench: more runs and "bench:" lines. Every kernel that waits on an mbarrier gives up after a
// deadline and counts itself late; the host checks that no block was.
//
//   swizzle_bench               both parts, 10 timed runs each
//   swizzle_bench --bench       50 timed runs each, and "bench:" lines
//   swizzle_bench --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/dram_peak.h"
#include "swizzle_math.h"
#include "tensor_maps.h"
#include "tile_shape.h"

namespace {

#if CUDA_VERSION >= 12000
using lesson20::kTileCols;
using lesson20::kTileRows;

// How much work: the real sizes, or small ones under a tool that checks every access
// (compute-sanitizer), where the times mean nothing and the real sizes would take minutes.
struct Sizes {
    unsigned int readBlocksPerSm;  // readColumns blocks per SM
    int rounds;                    // column reads per thread and launch (a multiple of 8)
    unsigned int copyRows;         // the copied matrix: copyRows x copyCols floats
    unsigned int copyCols;
    int timedRuns;
};

// Steps 3 and 4: the tile with and without swizzle, read by columns.
void swizzleDemo(CUdevice device, CUfunction readColumns, int smCount, const Sizes& sizes, bool bench,
                 course::Verdict& verdict) {
    course::printStep(3, "the same tile with and without CU_TENSOR_MAP_SWIZZLE_128B");
    std::vector<float> tile(kTileRows * kTileCols);
    for (unsigned int i = 0; i < tile.size(); ++i) tile[i] = static_cast<float>(i);  // (r, c) = 32 r + c
    CUdeviceptr matrix = 0;
    CHECK_DRIVER(cuMemAlloc(&matrix, tile.size() * sizeof(float)));
    CHECK_DRIVER(cuMemcpyHtoD(matrix, tile.data(), tile.size() * sizeof(float)));
    CUtensorMap plainMap;
    CUtensorMap swizzledMap;
    CHECK_DRIVER(lesson20::encodeFloatMatrix(&plainMap, matrix, kTileCols, kTileRows, kTileCols * sizeof(float),
                                             kTileCols, kTileRows, CU_TENSOR_MAP_SWIZZLE_NONE,
                                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    CHECK_DRIVER(lesson20::encodeFloatMatrix(&swizzledMap, matrix, kTileCols, kTileRows, kTileCols * sizeof(float),
                                             kTileCols, kTileRows, CU_TENSOR_MAP_SWIZZLE_128B,
                                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    std::printf("tile: %u x %u floats, rows of %zu bytes (the 128-byte swizzle span)\n", kTileCols, kTileRows,
                kTileCols * sizeof(float));
    unsigned int plainWords = 0;
    unsigned int swizzledWords = 0;
    for (unsigned int chunk = 0; chunk < 8; ++chunk) {
        plainWords = std::max(plainWords, lesson20::busiestBankWords(chunk, false));
        swizzledWords = std::max(swizzledWords, lesson20::busiestBankWords(chunk, true));
    }
    std::printf(
        "a warp reading a column of 16-byte chunks, busiest bank: %u words unswizzled, %u swizzled "
        "(4 is the least for 512 bytes over 32 banks)\n",
        plainWords, swizzledWords);

    course::printStep(4, "read by columns from shared memory: values and time");
    const unsigned int blocks = static_cast<unsigned int>(smCount) * sizes.readBlocksPerSm;
    const size_t threads = static_cast<size_t>(blocks) * lesson20::kTileThreads;
    CUdeviceptr sums = 0;
    CUdeviceptr raw = 0;
    CUdeviceptr late = 0;
    CHECK_DRIVER(cuMemAlloc(&sums, threads * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&raw, tile.size() * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&late, sizeof(unsigned int)));
    CHECK_DRIVER(cuMemsetD32(late, 0, 1));
    // One configuration: its time per launch, the sums and the tile as it lay in shared memory.
    // Both buffers are first set to a NaN, which equals nothing: a run that wrote no sums, or no
    // tile, cannot pass on what the run before it left there.
    auto run = [&](const CUtensorMap& map, int swizzled, std::vector<float>& sumsOut, std::vector<float>& rawOut) {
        CHECK_DRIVER(cuMemsetD32(sums, 0x7fc00000u, threads));
        CHECK_DRIVER(cuMemsetD32(raw, 0x7fc00000u, tile.size()));
        CUtensorMap mapArg = map;
        int rounds = sizes.rounds;
        void* params[] = {&mapArg, &swizzled, &rounds, &sums, &raw, &late};
        const double ms = lesson20::millisecondsPerRun(sizes.timedRuns, [&] {
            CHECK_DRIVER(
                cuLaunchKernel(readColumns, blocks, 1, 1, lesson20::kTileThreads, 1, 1, 0, nullptr, params, nullptr));
        });
        sumsOut = lesson20::copyBack<float>(sums, threads);
        rawOut = lesson20::copyBack<float>(raw, tile.size());
        return ms;
    };
    std::vector<float> plainSums, swizzledSums, plainRaw, swizzledRaw;
    const double plainMs = run(plainMap, 0, plainSums, plainRaw);
    const double swizzledMs = run(swizzledMap, 1, swizzledSums, swizzledRaw);
    // Thread t (warp w, lane l) adds (j + 1) x the sum of chunk j = (w + k) % 8 of row l for
    // k < rounds: rounds / 8 times each chunk. Chunk j of row l holds 32 l + 4 j + 0..3. Every
    // partial sum is an integer below 2^24, so the float totals are exact.
    size_t plainRight = 0;
    size_t swizzledRight = 0;
    for (size_t t = 0; t < threads; ++t) {
        const double lane = static_cast<double>(t % 32);
        double expected = 0.0;
        for (int j = 0; j < 8; ++j) expected += (j + 1) * (4.0 * (32.0 * lane + 4.0 * j) + 6.0);
        expected *= sizes.rounds / 8;
        plainRight += plainSums[t] == expected;
        swizzledRight += swizzledSums[t] == expected;
    }
    unsigned int placed = 0;
    for (unsigned int i = 0; i < tile.size(); ++i)
        placed += swizzledRaw[lesson20::swizzle128(i * sizeof(float)) / sizeof(float)] == tile[i];
    std::printf("launch: %u blocks x %u threads, %d reads of 16 bytes per thread\n", blocks, lesson20::kTileThreads,
                sizes.rounds);
    // Both ways, one untimed and timedRuns timed launches each.
    const unsigned int lateCount = lesson20::lateBlocks(late);
    std::printf("readColumns blocks whose box had not arrived after %.0f s (the mbarrier wait's deadline): %u of %zu\n",
                static_cast<double>(lesson20::kWaitDeadlineNs) / 1e9, lateCount,
                static_cast<size_t>(blocks) * 2 * (sizes.timedRuns + 1));
    verdict.check("every readColumns block's box arrived before the mbarrier wait's deadline", lateCount == 0);
    std::printf("threads with the expected sum: %zu of %zu unswizzled, %zu of %zu swizzled\n", plainRight, threads,
                swizzledRight, threads);
    std::printf("swizzled tile elements where swizzle128 puts them: %u of %zu\n", placed, tile.size());
    verdict.check("the unswizzled column read returns the expected sums", plainRight == threads);
    verdict.check("the swizzled column read (XOR applied) returns the same sums", swizzledRight == threads);
    verdict.check("the copy engine placed the swizzled tile where the XOR formula says", placed == tile.size());
    std::printf("column reads, no swizzle: %.3f ms per launch\n", plainMs);
    std::printf("column reads, 128-byte swizzle: %.3f ms per launch\n", swizzledMs);
    std::printf("swizzled / unswizzled time: %.2f x\n", swizzledMs / plainMs);
    if (bench) std::printf("bench: shared-memory column reads, 128B swizzle vs none = %.2f x\n", swizzledMs / plainMs);
    // The same times as a rate beside its limit (swizzle_math.h), at the SM clock that
    // CU_DEVICE_ATTRIBUTE_CLOCK_RATE reports. The rate counts only the 16-byte reads, while the
    // time also holds the launches and the tile's load: a right computation stays below the
    // limit, and one above it counted the bytes, the time or the clock wrong (or the SMs ran
    // faster than the clock the attribute reports).
    int clockKHz = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&clockKHz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device));
    const double bytesPerLaunch = static_cast<double>(threads) * sizes.rounds * 16.0;
    const double plainRate = lesson20::bytesPerClockPerSm(bytesPerLaunch, plainMs, clockKHz, smCount);
    const double swizzledRate = lesson20::bytesPerClockPerSm(bytesPerLaunch, swizzledMs, clockKHz, smCount);
    std::printf("SM clock (CU_DEVICE_ATTRIBUTE_CLOCK_RATE): %.0f MHz\n", clockKHz / 1e3);
    std::printf("shared-memory rate, no swizzle: %.1f bytes per clock per SM\n", plainRate);
    std::printf("shared-memory rate, 128-byte swizzle: %.1f bytes per clock per SM\n", swizzledRate);
    std::printf("shared-memory limit (%u banks x 4 bytes per clock): %.0f bytes per clock per SM\n", lesson20::kBanks,
                lesson20::kSharedBytesPerClock);
    verdict.check(
        "both column reads stay within the shared-memory limit per clock and SM",
        clockKHz > 0 && plainRate <= lesson20::kSharedBytesPerClock && swizzledRate <= lesson20::kSharedBytesPerClock);
    CHECK_DRIVER(cuMemFree(late));
    CHECK_DRIVER(cuMemFree(raw));
    CHECK_DRIVER(cuMemFree(sums));
    CHECK_DRIVER(cuMemFree(matrix));
}

// Step 5: the matrix copied three ways; each copy checked bit for bit.
void copyComparison(CUdevice device, CUfunction copyTiles, CUfunction copyFloat4, int smCount, const Sizes& sizes,
                    bool bench, course::Verdict& verdict) {
    course::printStep(5, "a large copy: tensor-map tiles, coalesced float4 loads, cuMemcpyDtoD");
    const size_t count = static_cast<size_t>(sizes.copyRows) * sizes.copyCols;
    const size_t bytes = count * sizeof(float);
    size_t freeBytes = 0;
    size_t totalBytes = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &totalBytes));
    const size_t needed = 2 * bytes + (size_t{256} << 20);  // source, destination and 256 MiB to spare
    if (freeBytes < needed) {
        std::printf("section copy: SKIP (needs %zu MiB free, the device has %zu MiB)\n", needed >> 20, freeBytes >> 20);
        return;
    }
    int memoryClockKHz = 0;
    int busWidthBits = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&memoryClockKHz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&busWidthBits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, device));
    const double peakGBs = course::dramPeakGBs(memoryClockKHz, busWidthBits);
    // The bytes each copy moves, in its rate: the source read once, the destination written once.
    // Checked against a count made another way: the source's bytes plus the bytes found written in
    // the destination after the copy.
    const double movedBytes = 2.0 * static_cast<double>(bytes);
    // The bits of element i are i: a copy is right when every bit pattern arrived.
    std::vector<std::uint32_t> host(count);
    for (size_t i = 0; i < count; ++i) host[i] = static_cast<std::uint32_t>(i);
    CUdeviceptr source = 0;
    CUdeviceptr destination = 0;
    CHECK_DRIVER(cuMemAlloc(&source, bytes));
    CHECK_DRIVER(cuMemAlloc(&destination, bytes));
    CHECK_DRIVER(cuMemcpyHtoD(source, host.data(), bytes));
    CUtensorMap sourceMap;
    CUtensorMap destinationMap;
    const size_t rowBytes = sizes.copyCols * sizeof(float);
    CHECK_DRIVER(lesson20::encodeFloatMatrix(&sourceMap, source, sizes.copyCols, sizes.copyRows, rowBytes,
                                             lesson20::kCopyCols, lesson20::kCopyRows, CU_TENSOR_MAP_SWIZZLE_NONE,
                                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    CHECK_DRIVER(lesson20::encodeFloatMatrix(&destinationMap, destination, sizes.copyCols, sizes.copyRows, rowBytes,
                                             lesson20::kCopyCols, lesson20::kCopyRows, CU_TENSOR_MAP_SWIZZLE_NONE,
                                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    CUdeviceptr late = 0;
    CHECK_DRIVER(cuMemAlloc(&late, sizeof(unsigned int)));
    CHECK_DRIVER(cuMemsetD32(late, 0, 1));
    void* tileParams[] = {&sourceMap, &destinationMap, &late};
    const unsigned int tilesX = (sizes.copyCols + lesson20::kCopyCols - 1) / lesson20::kCopyCols;
    const unsigned int tilesY = (sizes.copyRows + lesson20::kCopyRows - 1) / lesson20::kCopyRows;
    int float4BlocksPerSm = 0;
    CHECK_DRIVER(cuOccupancyMaxActiveBlocksPerMultiprocessor(&float4BlocksPerSm, copyFloat4, 256, 0));
    const unsigned int float4Blocks = static_cast<unsigned int>(smCount * float4BlocksPerSm);
    unsigned long long float4Count = count / 4;
    void* float4Params[] = {&source, &destination, &float4Count};
    // Each way: the destination cleared and the copy run once, then the destination compared with
    // the source bit for bit; then the runs that are timed (after one more untimed run, in
    // millisecondsPerRun). Not when a tile-copy block gave up waiting in that first run: every
    // further run would wait out the deadline again, and the rate would mean nothing. The clearing
    // sets every bit, a pattern no element has (element i holds i < 2^32 - 1): an element that
    // holds its source's bits was written by the copy, 4 bytes of the count the rate is checked by.
    bool countsAgree = true;
    auto measure = [&](const char* name, const auto& enqueue) {
        CHECK_DRIVER(cuMemsetD32(destination, 0xffffffffu, count));
        enqueue();
        CHECK_DRIVER(cuCtxSynchronize());
        const std::vector<std::uint32_t> copied = lesson20::copyBack<std::uint32_t>(destination, count);
        size_t written = 0;
        for (size_t i = 0; i < count; ++i) written += copied[i] == host[i];
        const bool right = written == count;
        countsAgree = countsAgree && movedBytes == static_cast<double>(bytes + written * sizeof(std::uint32_t));
        if (lesson20::lateBlocks(late) != 0) {
            std::printf("%s: not timed (blocks gave up waiting for their box)\n", name);
            return right;
        }
        const double ms = lesson20::millisecondsPerRun(sizes.timedRuns, enqueue);
        const double gbs = movedBytes / (ms / 1e3) / 1e9;
        std::printf("%s: %.1f GB/s (read + write), %.1f %% of the DRAM peak\n", name, gbs,
                    peakGBs > 0.0 ? 100.0 * gbs / peakGBs : 0.0);
        if (bench) {
            std::printf("bench: %s %zu MiB (read + write) = %.1f GB/s\n", name, bytes >> 20, gbs);
            if (peakGBs > 0.0) std::printf("bench: %s share of DRAM peak = %.1f %%\n", name, 100.0 * gbs / peakGBs);
        }
        return right;
    };
    std::printf("matrix: %u x %u floats (%zu MiB), %d timed runs each\n", sizes.copyRows, sizes.copyCols, bytes >> 20,
                sizes.timedRuns);
    std::printf("bytes each rate counts (read + write): %.0f\n", movedBytes);
    std::printf("DRAM peak (2 x memory clock x bus width / 8): %.1f GB/s\n", peakGBs);
    if (bench && peakGBs > 0.0)
        std::printf("bench: DRAM peak (2 x memory clock x bus width / 8) = %.1f GB/s\n", peakGBs);
    std::printf("tensor-map tile copy: %u x %u blocks of 1 thread, boxes of %u x %u floats\n", tilesX, tilesY,
                lesson20::kCopyCols, lesson20::kCopyRows);
    std::printf("coalesced float4 copy: %u blocks of 256 threads\n", float4Blocks);
    // Blocks of one thread: copyTiles is written for that (kernels/tensor_map_kernels.cu).
    auto tileCopy = [&] {
        CHECK_DRIVER(cuLaunchKernel(copyTiles, tilesX, tilesY, 1, 1, 1, 1, 0, nullptr, tileParams, nullptr));
    };
    auto float4Copy = [&] {
        CHECK_DRIVER(cuLaunchKernel(copyFloat4, float4Blocks, 1, 1, 256, 1, 1, 0, nullptr, float4Params, nullptr));
    };
    auto driverCopy = [&] { CHECK_DRIVER(cuMemcpyDtoD(destination, source, bytes)); };
    const bool tilesRight = measure("tensor-map tile copy", tileCopy);
    const bool float4Right = measure("coalesced float4 copy", float4Copy);
    const bool driverRight = measure("cuMemcpyDtoD", driverCopy);
    const unsigned int lateCount = lesson20::lateBlocks(late);
    std::printf("copyTiles blocks whose box had not arrived after %.0f s (the mbarrier wait's deadline): %u\n",
                static_cast<double>(lesson20::kWaitDeadlineNs) / 1e9, lateCount);
    verdict.check("every copyTiles block's box arrived before the mbarrier wait's deadline", lateCount == 0);
    verdict.check("the tensor-map tile copy equals the source", tilesRight);
    verdict.check("the coalesced float4 copy equals the source", float4Right);
    verdict.check("the cuMemcpyDtoD copy equals the source", driverRight);
    verdict.check("each rate counts the bytes read plus the bytes found written", countsAgree);
    CHECK_DRIVER(cuMemFree(late));
    CHECK_DRIVER(cuMemFree(destination));
    CHECK_DRIVER(cuMemFree(source));
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    // Step 1: as in encode_rules.
    course::printStep(1, "initialise the driver, check versions and compute capability");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    if (!lesson20::tensorMapsUsable(device, ordinal)) return course::kExitNotApplicable;
#if CUDA_VERSION >= 12000
    course::Verdict verdict;

    // Step 2: the kernels, and how much work this run does.
    course::printStep(2, "the primary context, the kernels, the sizes");
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    CHECK_DRIVER(cuCtxSetCurrent(primary));
    CUmodule module = lesson20::loadKernels();
    CUfunction readColumns = nullptr;
    CUfunction copyTiles = nullptr;
    CUfunction copyFloat4 = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&readColumns, module, "readColumns"));
    CHECK_DRIVER(cuModuleGetFunction(&copyTiles, module, "copyTiles"));
    CHECK_DRIVER(cuModuleGetFunction(&copyFloat4, module, "copyFloat4"));
    int smCount = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
    const bool bench = args.has("--bench");
    Sizes sizes{8, 512, 8192, 8192, bench ? 50 : 10};
    if (const char* tool = course::instrumentingTool()) {
        std::printf("section timing: SKIP (%s checks every access: small sizes, times mean nothing)\n", tool);
        sizes = Sizes{1, 8, 1024, 1024, 1};
    }
    std::printf("SMs: %d\n", smCount);

    swizzleDemo(device, readColumns, smCount, sizes, bench, verdict);
    copyComparison(device, copyTiles, copyFloat4, smCount, sizes, bench, verdict);

    // Step 6: reverse order.
    course::printStep(6, "release everything, newest first");
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("module and primary context: released\n");
    return verdict.finish();
#else
    return course::kExitNotApplicable;
#endif
}
