// Lesson 25, program 9 — what each way of copying costs, in one run on one GPU: a gather of 4096
// scattered 4 KiB blocks as one cuMemcpyBatchAsync, as one cuMemcpyAsync per block, and one
// contiguous copy of the same 16 MiB (the same bytes in one piece: the yardstick); and a 2-D and
// a 3-D copy of strided memory against one cuMemcpyDtoDAsync of the same bytes.
//
// The plain run does every copy once and checks its bytes; --bench times each, as the median of 21
// GPU spans (an event recorded before the copies, one after). A span holds the copies and any time
// the GPU waited for the host to submit them: 4096 separate calls take the host a while.
//
//   copy_bench [--device N] [--bench]
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "batch_compat.h"
#include "copy_helpers.h"

namespace {

constexpr size_t kBlocks = 16384;
constexpr size_t kBlockBytes = 4096;
constexpr size_t kPieces = 4096;
constexpr size_t kGathered = kPieces * kBlockBytes;  // 16 MiB
constexpr size_t kGuard = 4096;                      // after each gather's bytes: must keep the fill
// The strided copies: 4000-byte rows, 4096 of them (2-D), or 128 rows x 256 slices of 500 bytes
// (3-D): 16,384,000 bytes each, in memory from cuMemAllocPitch.
constexpr size_t k2DWidth = 4000;
constexpr size_t k2DRows = 4096;
constexpr size_t k3DWidth = 500;
constexpr size_t k3DRows = 128;
constexpr size_t k3DSlices = 256;
constexpr size_t kStridedBytes = k2DWidth * k2DRows;

size_t blockOf(size_t piece) {  // 4099 is odd: 4096 distinct blocks spread over the pool
    return (piece * 4099 + 977) % kBlocks;
}

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

// Rows of `width` bytes, `pitch` apart, of a pitched source and the pitched destination it was
// copied to (filled with 0xa5 before): the rows whose `width` bytes differ from the source's, or whose
// padding (the rest of the pitch) no longer holds the fill.
size_t rowsWrong(CUdeviceptr source, CUdeviceptr destination, size_t pitch, size_t width, size_t rows) {
    const std::vector<unsigned char> from = lesson25::download(source, pitch * rows);
    const std::vector<unsigned char> to = lesson25::download(destination, pitch * rows);
    size_t wrong = 0;
    for (size_t r = 0; r < rows; ++r)
        wrong += std::memcmp(&from[r * pitch], &to[r * pitch], width) != 0 ||
                         lesson25::notFill(&to[r * pitch + width], pitch - width) != 0
                     ? 1
                     : 0;
    return wrong;
}

// Step 2's checks of the three gathers: every piece equal to its block, and the guard after the
// gathered bytes still the fill.
void checkGathers(course::Verdict& verdict, const CUdeviceptr (&gathered)[3],
                  const std::vector<unsigned char>& poolHost, const std::string& noBatch) {
    size_t intact[3] = {};
    size_t guardKept[3] = {};
    for (int way = 0; way < 3; ++way) {
        const std::vector<unsigned char> got = lesson25::download(gathered[way], kGathered + kGuard);
        for (size_t i = 0; i < kPieces; ++i) {
            const size_t from = way == 2 ? i : blockOf(i);  // the contiguous copy: blocks in order
            intact[way] += std::memcmp(&got[i * kBlockBytes], &poolHost[from * kBlockBytes], kBlockBytes) == 0 ? 1 : 0;
        }
        guardKept[way] = kGuard - lesson25::notFill(&got[kGathered], kGuard);
    }
    std::printf("pieces intact: batched %zu, one call per piece %zu, contiguous %zu, of %zu\n", intact[0], intact[1],
                intact[2], kPieces);
    std::printf(
        "guard bytes after the gathered bytes still 0xa5: batched %zu, one call per piece %zu, contiguous %zu, "
        "of %zu\n",
        guardKept[0], guardKept[1], guardKept[2], kGuard);
    if (noBatch.empty())
        verdict.check("cuMemcpyBatchAsync gathered every piece, nothing past them",
                      intact[0] == kPieces && guardKept[0] == kGuard);
    else
        lesson25::skipCheck("cuMemcpyBatchAsync gathered every piece, nothing past them", noBatch);
    verdict.check("one cuMemcpyAsync per piece gathered every piece, nothing past them",
                  intact[1] == kPieces && guardKept[1] == kGuard);
    verdict.check("the contiguous copy moved the first 4096 blocks, nothing past them",
                  intact[2] == kPieces && guardKept[2] == kGuard);
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
    CHECK_DRIVER(cuMemAlloc(&pool, poolHost.size()));
    CHECK_DRIVER(cuMemcpyHtoDAsync(pool, poolHost.data(), poolHost.size(), stream));
    for (CUdeviceptr& destination : gathered) {
        CHECK_DRIVER(cuMemAlloc(&destination, kGathered + kGuard));
        CHECK_DRIVER(cuMemsetD8Async(destination, lesson25::kFill, kGathered + kGuard, stream));
    }
    std::vector<CUdeviceptr> dsts(kPieces);
    std::vector<CUdeviceptr> srcs(kPieces);
    std::vector<size_t> sizes(kPieces, kBlockBytes);
    for (size_t i = 0; i < kPieces; ++i) {
        dsts[i] = gathered[0] + i * kBlockBytes;
        srcs[i] = pool + blockOf(i) * kBlockBytes;
    }
    CUdeviceptr image[2] = {};
    CUdeviceptr volume[2] = {};
    size_t imagePitch = 0;
    size_t volumePitch = 0;
    for (int i = 0; i < 2; ++i) {
        CHECK_DRIVER(cuMemAllocPitch(&image[i], &imagePitch, k2DWidth, k2DRows, 4));
        CHECK_DRIVER(cuMemAllocPitch(&volume[i], &volumePitch, k3DWidth, k3DRows * k3DSlices, 4));
    }
    CHECK_DRIVER(cuMemcpyHtoDAsync(image[0], poolHost.data(), imagePitch * k2DRows, stream));
    CHECK_DRIVER(cuMemcpyHtoDAsync(volume[0], poolHost.data(), volumePitch * k3DRows * k3DSlices, stream));
    CHECK_DRIVER(cuMemsetD8Async(image[1], lesson25::kFill, imagePitch * k2DRows, stream));
    CHECK_DRIVER(cuMemsetD8Async(volume[1], lesson25::kFill, volumePitch * k3DRows * k3DSlices, stream));
    std::printf("image pitch: %zu bytes; volume pitch: %zu bytes\n", imagePitch, volumePitch);

    // The five ways, each a function that only queues work on the stream.
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
    auto flat = [&] { CHECK_DRIVER(cuMemcpyDtoDAsync(gathered[2], pool, kStridedBytes, stream)); };

    // Step 2: each way once, and its bytes checked on the host.
    course::printStep(2, "every way once, every byte checked");
    course::Verdict verdict;
    if (noBatch.empty()) batched();
    perPiece();
    strided2D();
    strided3D();
    contiguous();
    CHECK_DRIVER(cuStreamSynchronize(stream));
    checkGathers(verdict, gathered, poolHost, noBatch);
    const size_t rows2D = rowsWrong(image[0], image[1], imagePitch, k2DWidth, k2DRows);
    const size_t rows3D = rowsWrong(volume[0], volume[1], volumePitch, k3DWidth, k3DRows * k3DSlices);
    std::printf("rows wrong after the copy (data, or padding no longer 0xa5): 2-D %zu of %zu, 3-D %zu of %zu\n", rows2D,
                k2DRows, rows3D, k3DRows * k3DSlices);
    verdict.check("cuMemcpy2DAsync copied every row, nothing into the padding", rows2D == 0);
    verdict.check("cuMemcpy3DAsync copied every row of every slice, nothing into the padding", rows3D == 0);

    // Step 3: the timings, only with --bench. Printed, never checked: they belong to the GPU.
    course::printStep(3, "timings: gather three ways, strided copies against one flat copy");
    if (!bench) {
        std::printf("timings: run with --bench\n");
    } else {
        const double contiguousUs = medianMicroseconds(stream, contiguous);
        const double perPieceUs = medianMicroseconds(stream, perPiece);
        if (noBatch.empty()) {
            const double batchedUs = medianMicroseconds(stream, batched);
            std::printf("bench: gather 4096 x 4 KiB, one cuMemcpyBatchAsync = %.1f us\n", batchedUs);
            std::printf("bench: gather speed, cuMemcpyBatchAsync / contiguous copy = %.1f %%\n",
                        100.0 * contiguousUs / batchedUs);
        }
        std::printf("bench: gather 4096 x 4 KiB, one cuMemcpyAsync per piece = %.1f us\n", perPieceUs);
        std::printf("bench: gather speed, one cuMemcpyAsync per piece / contiguous copy = %.1f %%\n",
                    100.0 * contiguousUs / perPieceUs);
        std::printf("bench: contiguous cuMemcpyAsync of the same 16 MiB = %.1f us\n", contiguousUs);
        const double flatUs = medianMicroseconds(stream, flat);
        const double twoDUs = medianMicroseconds(stream, strided2D);
        const double threeDUs = medianMicroseconds(stream, strided3D);
        std::printf("bench: cuMemcpyDtoDAsync of 16384000 bytes = %.1f us\n", flatUs);
        std::printf("bench: cuMemcpy2DAsync 4000 x 4096 bytes = %.1f us\n", twoDUs);
        std::printf("bench: cuMemcpy3DAsync 500 x 128 x 256 bytes = %.1f us\n", threeDUs);
        std::printf("bench: cuMemcpy2DAsync time / cuMemcpyDtoDAsync time = %.2f x\n", twoDUs / flatUs);
        std::printf("bench: cuMemcpy3DAsync time / cuMemcpyDtoDAsync time = %.2f x\n", threeDUs / flatUs);
    }

    course::printStep(4, "release everything, newest first");
    for (int i = 1; i >= 0; --i) {
        CHECK_DRIVER(cuMemFree(volume[i]));
        CHECK_DRIVER(cuMemFree(image[i]));
    }
    for (int way = 2; way >= 0; --way) CHECK_DRIVER(cuMemFree(gathered[way]));
    CHECK_DRIVER(cuMemFree(pool));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: buffers, stream, primary context\n");

    course::printStep(5, "check");
    return verdict.finish();
}
