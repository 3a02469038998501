// Lesson 25, program 9 — what each way of copying costs, in one run on one GPU: a gather of 4096
// scattered 4 KiB blocks as one cuMemcpyBatchAsync, as one cuMemcpyAsync per block, and one
// contiguous copy of as many bytes, 16 MiB in one piece (the pool's first 4096 blocks: the
// yardstick); and a 2-D and a 3-D copy of strided memory against one cuMemcpyDtoDAsync of as many
// bytes.
//
// The plain run does every copy once and checks its bytes against the host's; --bench times each,
// as the median of 21 GPU spans (an event recorded before the copies, one after), and then checks
// that each timed way wrote its own destination. A span holds the copies and any time the GPU
// waited for the host to submit them: 4096 separate calls take the host a while.
//
//   copy_bench [--device N] [--bench]
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "batch_compat.h"
#include "bench_destinations.h"
#include "copy_helpers.h"

namespace {

using namespace lesson25::bench;  // the pool, the ways' sizes and destinations: bench_destinations.h

// Median of 21 GPU spans of `enqueue` on `stream`, in microseconds, after one untimed run.
template <typename Enqueue>
double medianMicroseconds(CUstream stream, const Enqueue& enqueue) {
    CUevent start = nullptr;
    CUevent stop = nullptr;
    CHECK_DRIVER(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    enqueue();
    std::vector<double> samples;
    for (int run = 0; run < 21; ++run) {
        CHECK_DRIVER(cuEventRecord(start, stream));
        enqueue();
        CHECK_DRIVER(cuEventRecord(stop, stream));
        CHECK_DRIVER(cuEventSynchronize(stop));
        float milliseconds = 0.0f;
        CHECK_DRIVER(cuEventElapsedTime(&milliseconds, start, stop));
        samples.push_back(1000.0 * milliseconds);
    }
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    return course::median(samples);
}

// A 2-D or 3-D device-to-device copy between two pitched allocations (Depth 1: one 2-D slice).
CUDA_MEMCPY3D stridedCopy(CUdeviceptr src, size_t srcPitch, CUdeviceptr dst, size_t dstPitch, size_t width, size_t rows,
                          size_t slices) {
    CUDA_MEMCPY3D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = src;
    copy.srcPitch = srcPitch;
    copy.srcHeight = rows;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = dst;
    copy.dstPitch = dstPitch;
    copy.dstHeight = rows;
    copy.WidthInBytes = width;
    copy.Height = rows;
    copy.Depth = slices;
    return copy;
}

// The six ways, each a function that only queues its copy on the stream.
struct Ways {
    std::function<void()> batched, perPiece, contiguous, flat, strided2D, strided3D;
};

// Step 2's lines and checks: each way's destination after one run.
void checkEveryWay(course::Verdict& verdict, const Judged& judged, const std::string& noBatch) {
    std::printf("pieces intact: batched %zu, one call per piece %zu, contiguous %zu, of %zu\n", judged.intact[0],
                judged.intact[1], judged.intact[2], kPieces);
    std::printf(
        "guard bytes after the gathered bytes still 0xa5: batched %zu, one call per piece %zu, contiguous %zu, "
        "of %zu\n",
        judged.guardKept[0], judged.guardKept[1], judged.guardKept[2], kGuard);
    if (noBatch.empty())
        verdict.check("cuMemcpyBatchAsync gathered every piece, nothing past them", judged.gatherRight(0));
    else
        lesson25::skipCheck("cuMemcpyBatchAsync gathered every piece, nothing past them", noBatch);
    verdict.check("one cuMemcpyAsync per piece gathered every piece, nothing past them", judged.gatherRight(1));
    verdict.check("the contiguous copy moved the first 4096 blocks, nothing past them", judged.gatherRight(2));
    std::printf("flat copy bytes as expected (%zu from the pool, the rest 0xa5): %zu of %zu\n", kStridedBytes,
                kGathered + kGuard - judged.flatWrong, kGathered + kGuard);
    verdict.check("cuMemcpyDtoDAsync copied 16384000 bytes, nothing past them", judged.flatWrong == 0);
    std::printf("rows wrong after the copy (data, or padding no longer 0xa5): 2-D %zu of %zu, 3-D %zu of %zu\n",
                judged.rows2D, k2DRows, judged.rows3D, k3DRows * k3DSlices);
    verdict.check("cuMemcpy2DAsync copied every row, nothing into the padding", judged.rows2D == 0);
    verdict.check("cuMemcpy3DAsync copied every row of every slice, nothing into the padding", judged.rows3D == 0);
}

// Step 3 (--bench): each way timed, then every destination judged again. Times are printed to
// 0.1 us, ratios to three significant digits, so that a gather far slower than the contiguous
// copy still shows a figure of its own. Each destination is
// refilled before the timings, so it holds afterwards what the runs timed for that way wrote: a time
// printed under one way's name but taken of another way's copies leaves a destination unwritten.
void timeEveryWay(course::Verdict& verdict, CUstream stream, const Ways& ways, const Destinations& to,
                  const std::vector<unsigned char>& poolHost, bool withBatch) {
    refill(to, stream);
    const double contiguousUs = medianMicroseconds(stream, ways.contiguous);
    const double perPieceUs = medianMicroseconds(stream, ways.perPiece);
    if (withBatch) {
        const double batchedUs = medianMicroseconds(stream, ways.batched);
        std::printf("bench: gather 4096 x 4 KiB, one cuMemcpyBatchAsync = %.1f us\n", batchedUs);
        std::printf("bench: gather speed, cuMemcpyBatchAsync / contiguous copy = %.3g %%\n",
                    100.0 * contiguousUs / batchedUs);
    }
    std::printf("bench: gather 4096 x 4 KiB, one cuMemcpyAsync per piece = %.1f us\n", perPieceUs);
    std::printf("bench: gather speed, one cuMemcpyAsync per piece / contiguous copy = %.3g %%\n",
                100.0 * contiguousUs / perPieceUs);
    std::printf("bench: contiguous cuMemcpyAsync of 16 MiB = %.1f us\n", contiguousUs);
    const double flatUs = medianMicroseconds(stream, ways.flat);
    const double twoDUs = medianMicroseconds(stream, ways.strided2D);
    const double threeDUs = medianMicroseconds(stream, ways.strided3D);
    std::printf("bench: cuMemcpyDtoDAsync of 16384000 bytes = %.1f us\n", flatUs);
    std::printf("bench: cuMemcpy2DAsync 4000 x 4096 bytes = %.1f us\n", twoDUs);
    std::printf("bench: cuMemcpy3DAsync 500 x 128 x 256 bytes = %.1f us\n", threeDUs);
    std::printf("bench: cuMemcpy2DAsync time / cuMemcpyDtoDAsync time = %.3g x\n", twoDUs / flatUs);
    std::printf("bench: cuMemcpy3DAsync time / cuMemcpyDtoDAsync time = %.3g x\n", threeDUs / flatUs);
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const Judged after = judge(to, poolHost);
    const bool right[] = {after.gatherRight(1), after.gatherRight(2),
                          after.flatWrong == 0, after.rows2D == 0,
                          after.rows3D == 0,    withBatch && after.gatherRight(0)};  // the batch last: it may not run
    const size_t timed = withBatch ? 6 : 5;
    size_t rightCount = 0;
    for (size_t way = 0; way < timed; ++way) rightCount += right[way] ? 1 : 0;
    std::printf("destinations as their way writes them, after the timed runs: %zu of %zu\n", rightCount, timed);
    verdict.check("every timed way wrote its own destination, as in step 2", rightCount == timed);
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    const bool bench = args.has("--bench");

    course::printStep(1, "initialise, a pool of 16384 blocks of 4 KiB, pitched images and volumes");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    course::printDeviceName(ordinal, device);
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    const std::string noBatch = lesson25::batchCallsUnavailable(driverVersion);  // versions, entry points
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    const std::vector<unsigned char> poolHost = lesson25::pattern(kBlocks * kBlockBytes, 21);
    CUdeviceptr pool = 0;
    CUdeviceptr gathered[3] = {};  // batched, per piece, contiguous; each with a guard after it
    CUdeviceptr flatTarget = 0;    // the flat copy's, as large, so that a copy too long shows
    CHECK_DRIVER(cuMemAlloc(&pool, poolHost.size()));
    CHECK_DRIVER(cuMemcpyHtoDAsync(pool, poolHost.data(), poolHost.size(), stream));
    for (CUdeviceptr& destination : gathered) CHECK_DRIVER(cuMemAlloc(&destination, kGathered + kGuard));
    CHECK_DRIVER(cuMemAlloc(&flatTarget, kGathered + kGuard));
    std::vector<CUdeviceptr> dsts(kPieces);
    std::vector<CUdeviceptr> srcs(kPieces);
    std::vector<size_t> sizes(kPieces, kBlockBytes);
    for (size_t i = 0; i < kPieces; ++i) {
        dsts[i] = gathered[0] + i * kBlockBytes;
        srcs[i] = pool + blockOf(i) * kBlockBytes;
    }
    CUdeviceptr image[2] = {};  // source, destination
    CUdeviceptr volume[2] = {};
    size_t imagePitch = 0;
    size_t volumePitch = 0;
    for (int i = 0; i < 2; ++i) {
        CHECK_DRIVER(cuMemAllocPitch(&image[i], &imagePitch, k2DWidth, k2DRows, 4));
        CHECK_DRIVER(cuMemAllocPitch(&volume[i], &volumePitch, k3DWidth, k3DRows * k3DSlices, 4));
    }
    // The strided sources hold the pool's first bytes, row padding included: the host keeps them.
    CHECK_DRIVER(cuMemcpyHtoDAsync(image[0], poolHost.data(), imagePitch * k2DRows, stream));
    CHECK_DRIVER(cuMemcpyHtoDAsync(volume[0], poolHost.data(), volumePitch * k3DRows * k3DSlices, stream));
    const Destinations to{
        {gathered[0], gathered[1], gathered[2]}, flatTarget, image[1], imagePitch, volume[1], volumePitch};
    refill(to, stream);
    std::printf("image pitch: %zu bytes; volume pitch: %zu bytes\n", imagePitch, volumePitch);

    // The six ways, each a function that only queues work on the stream.
#if CUDA_VERSION >= 12080
    CUmemcpyAttributes attrs{};
    attrs.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    attrs.srcLocHint = lesson25::deviceLocation(ordinal);
    attrs.dstLocHint = lesson25::deviceLocation(ordinal);
    size_t firstCopy = 0;
    auto batched = [&] {
        CHECK_DRIVER(
            lesson25::memcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), kPieces, &attrs, &firstCopy, 1, stream));
    };
#else
    auto batched = [] {};
#endif
    auto perPiece = [&] {
        for (size_t i = 0; i < kPieces; ++i)
            CHECK_DRIVER(cuMemcpyAsync(gathered[1] + i * kBlockBytes, srcs[i], kBlockBytes, stream));
    };
    auto contiguous = [&] { CHECK_DRIVER(cuMemcpyAsync(gathered[2], pool, kGathered, stream)); };
    auto flat = [&] { CHECK_DRIVER(cuMemcpyDtoDAsync(flatTarget, pool, kStridedBytes, stream)); };
    const CUDA_MEMCPY3D copy2D = stridedCopy(image[0], imagePitch, image[1], imagePitch, k2DWidth, k2DRows, 1);
    const CUDA_MEMCPY3D copy3D =
        stridedCopy(volume[0], volumePitch, volume[1], volumePitch, k3DWidth, k3DRows, k3DSlices);
    auto strided2D = [&] {
        CUDA_MEMCPY2D copy{};  // the same fields as the 3-D description, in the 2-D struct
        copy.srcMemoryType = copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        copy.srcDevice = copy2D.srcDevice;
        copy.srcPitch = copy2D.srcPitch;
        copy.dstDevice = copy2D.dstDevice;
        copy.dstPitch = copy2D.dstPitch;
        copy.WidthInBytes = copy2D.WidthInBytes;
        copy.Height = copy2D.Height;
        CHECK_DRIVER(cuMemcpy2DAsync(&copy, stream));
    };
    auto strided3D = [&] { CHECK_DRIVER(cuMemcpy3DAsync(&copy3D, stream)); };
    const Ways ways{batched, perPiece, contiguous, flat, strided2D, strided3D};

    // Step 2: each way once, and its bytes checked on the host.
    course::printStep(2, "every way once, every byte checked");
    course::Verdict verdict;
    if (noBatch.empty()) ways.batched();
    ways.perPiece();
    ways.strided2D();
    ways.strided3D();
    ways.contiguous();
    ways.flat();
    CHECK_DRIVER(cuStreamSynchronize(stream));
    checkEveryWay(verdict, judge(to, poolHost), noBatch);

    // Step 3: the timings, only with --bench. Printed, never checked: they belong to the GPU and the
    // run. What is checked is that each timed way wrote its own destination.
    course::printStep(3, "timings: gather three ways, strided copies against one flat copy");
    if (!bench)
        std::printf("timings: run with --bench\n");
    else
        timeEveryWay(verdict, stream, ways, to, poolHost, noBatch.empty());

    course::printStep(4, "release everything, newest first");
    for (int i = 1; i >= 0; --i) {
        CHECK_DRIVER(cuMemFree(volume[i]));
        CHECK_DRIVER(cuMemFree(image[i]));
    }
    CHECK_DRIVER(cuMemFree(flatTarget));
    for (int way = 2; way >= 0; --way) CHECK_DRIVER(cuMemFree(gathered[way]));
    CHECK_DRIVER(cuMemFree(pool));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: buffers, stream, primary context\n");

    course::printStep(5, "check");
    return verdict.finish();
}
