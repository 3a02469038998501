// Lesson 25, program 4 — the copies that name a CUDA array by handle and byte offset
// (cuMemcpyHtoA, cuMemcpyAtoH and their Async forms, cuMemcpyAtoA, cuMemcpyDtoA, cuMemcpyAtoD),
// and the planes of an NV12 array (cuArrayGetPlane) where the driver creates one.
//
// Lesson 19 copied into arrays with cuMemcpy2D/3D. The calls here are older and simpler: one array,
// one offset in bytes, one byte count. cuda.h documents each for a "1D CUDA array"
// (cuda.h:9750, 9786, 9824, 9861, 9898); the program uses 1-D arrays of 4096 four-byte elements.
//
//   array_copies               the walkthrough
//   array_copies --device N    another GPU
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "copy_helpers.h"

namespace {

constexpr size_t kElements = 4096;
constexpr size_t kArrayBytes = kElements * 4;

// A 1-D array of 4096 elements of four bytes, every byte 0xa5 (written with cuMemcpyHtoA).
CUarray fourByteArray(CUarray_format format, unsigned int channels) {
    CUDA_ARRAY_DESCRIPTOR desc{};
    desc.Width = kElements;
    desc.Height = 0;  // 1-D
    desc.Format = format;
    desc.NumChannels = channels;
    CUarray array = nullptr;
    CHECK_DRIVER(cuArrayCreate(&array, &desc));
    const std::vector<unsigned char> fill(kArrayBytes, lesson25::kFill);
    CHECK_DRIVER(cuMemcpyHtoA(array, 0, fill.data(), kArrayBytes));
    // cuda.h: "synchronous memory operations can exhibit asynchronous behavior" (cuda.h:14249-14250),
    // and the stream of step 3 is not ordered after the legacy stream: wait for the fill here.
    CHECK_DRIVER(cuCtxSynchronize());
    return array;
}

// Puts `bytes` bytes of `data`, from byte `from`, at byte `offset` of an array's host model.
void place(std::vector<unsigned char>& model, size_t offset, const std::vector<unsigned char>& data, size_t from,
           size_t bytes) {
    for (size_t i = 0; i < bytes; ++i) model[offset + i] = data[from + i];
}

// The whole array, read back with cuMemcpyAtoH.
std::vector<unsigned char> wholeArray(CUarray array) {
    std::vector<unsigned char> got(kArrayBytes);
    CHECK_DRIVER(cuMemcpyAtoH(got.data(), array, 0, kArrayBytes));
    return got;
}

const char* formatName(CUarray_format format) {
    switch (format) {
        case CU_AD_FORMAT_UNSIGNED_INT8: return "CU_AD_FORMAT_UNSIGNED_INT8";
        case CU_AD_FORMAT_UNSIGNED_INT32: return "CU_AD_FORMAT_UNSIGNED_INT32";
        case CU_AD_FORMAT_FLOAT: return "CU_AD_FORMAT_FLOAT";
        case CU_AD_FORMAT_NV12: return "CU_AD_FORMAT_NV12";
        default: return "(another CUarray_format)";
    }
}

// A plane's descriptor, printed and compared with what cuda.h says that plane is (cuda.h:11996-11999).
bool planeIs(CUarray plane, int index, size_t width, size_t height, unsigned int channels) {
    CUDA_ARRAY_DESCRIPTOR desc{};
    CHECK_DRIVER(cuArrayGetDescriptor(&desc, plane));
    std::printf("plane %d: %zu x %zu, %u channel(s) of %s\n", index, desc.Width, desc.Height, desc.NumChannels,
                formatName(desc.Format));
    return desc.Width == width && desc.Height == height && desc.NumChannels == channels &&
           desc.Format == CU_AD_FORMAT_UNSIGNED_INT8;
}

// Host rows of `rowBytes` bytes into a plane and back (cuMemcpy2D names the plane as an array).
// Returns the bytes that came back different.
size_t planeRoundTrip(CUarray plane, const std::vector<unsigned char>& data, size_t rowBytes, size_t rows) {
    CUDA_MEMCPY2D in{};
    in.srcMemoryType = CU_MEMORYTYPE_HOST;
    in.srcHost = data.data();
    in.srcPitch = rowBytes;
    in.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    in.dstArray = plane;
    in.WidthInBytes = rowBytes;
    in.Height = rows;
    CHECK_DRIVER(cuMemcpy2D(&in));
    std::vector<unsigned char> back(data.size(), lesson25::kFill);
    CUDA_MEMCPY2D out{};
    out.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    out.srcArray = plane;
    out.dstMemoryType = CU_MEMORYTYPE_HOST;
    out.dstHost = back.data();
    out.dstPitch = rowBytes;
    out.WidthInBytes = rowBytes;
    out.Height = rows;
    CHECK_DRIVER(cuMemcpy2D(&out));
    return lesson25::differences(back.data(), data.data(), data.size());
}

// Step 6 with an NV12 array the driver created: its two planes, their descriptors, and a round trip
// through each (every byte of both planes written and read back).
void nv12Planes(course::Verdict& verdict, CUarray nv12) {
    CUarray luma = nullptr;
    CUarray chroma = nullptr;
    CHECK_DRIVER(cuArrayGetPlane(&luma, nv12, 0));
    CHECK_DRIVER(cuArrayGetPlane(&chroma, nv12, 1));
    const bool lumaAsSaid = planeIs(luma, 0, 64, 32, 1);
    const bool chromaAsSaid = planeIs(chroma, 1, 32, 16, 2);
    verdict.check("plane 0 is 64 x 32 x 1 and plane 1 32 x 16 x 2 channels of UNSIGNED_INT8",
                  lumaAsSaid && chromaAsSaid);
    const std::vector<unsigned char> y = lesson25::pattern(64 * 32, 14);
    const std::vector<unsigned char> uv = lesson25::pattern(32 * 2 * 16, 15);
    const size_t wrongPlanes = planeRoundTrip(luma, y, 64, 32) + planeRoundTrip(chroma, uv, 64, 16);
    std::printf("plane bytes back as written: %zu of %zu\n", y.size() + uv.size() - wrongPlanes, y.size() + uv.size());
    verdict.check("each plane holds what was copied into it", wrongPlanes == 0);
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "initialise, create a stream");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    course::printDeviceName(ordinal, device);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    course::Verdict verdict;

    // Step 2: host to array at a byte offset, the whole array back. The offset counts bytes, not
    // elements: 400 bytes is element 100.
    course::printStep(2, "cuMemcpyHtoA at byte 400, cuMemcpyAtoH of the whole array");
    CUarray words = fourByteArray(CU_AD_FORMAT_UNSIGNED_INT32, 1);
    const std::vector<unsigned char> data = lesson25::pattern(2000, 11);
    CHECK_DRIVER(cuMemcpyHtoA(words, 400, data.data(), data.size()));
    std::vector<unsigned char> wordsModel(kArrayBytes, lesson25::kFill);
    place(wordsModel, 400, data, 0, data.size());
    const std::vector<unsigned char> wordsBefore = wholeArray(words);
    const size_t wrongWords = lesson25::differences(wordsBefore.data(), wordsModel.data(), kArrayBytes);
    std::printf("array bytes as expected (2000 written at 400, the rest 0xa5): %zu of %zu\n", kArrayBytes - wrongWords,
                kArrayBytes);
    verdict.check("cuMemcpyHtoA wrote its 2000 bytes at byte 400 and nothing else", wrongWords == 0);

    // Step 3: the Async pair, on one stream, with pinned host memory (1024 bytes to send, 1024 to
    // receive and their tail guard: past byte 9216 the array holds the fill); then the whole array
    // again, against what it held after step 2 with the 1024 bytes at 8192.
    course::printStep(3, "cuMemcpyHtoAAsync then cuMemcpyAtoHAsync on one stream");
    void* pinned = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&pinned, 2 * 1024 + lesson25::kTailGuard));
    auto* send = static_cast<unsigned char*>(pinned);
    unsigned char* receive = send + 1024;
    const std::vector<unsigned char> asyncData = lesson25::pattern(1024, 12);
    const std::vector<unsigned char> guard = lesson25::tailGuard(5);
    std::memcpy(send, asyncData.data(), 1024);
    std::memset(receive, lesson25::kFill, 1024);
    std::memcpy(receive + 1024, guard.data(), guard.size());
    CHECK_DRIVER(cuMemcpyHtoAAsync(words, 8192, send, 1024, stream));
    CHECK_DRIVER(cuMemcpyAtoHAsync(receive, words, 8192, 1024, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const size_t wrongAsync = lesson25::differences(receive, asyncData.data(), 1024);
    const size_t guardKept = lesson25::tailGuardKept(receive + 1024, guard);
    std::printf("bytes back through the array: %zu of 1024\n", 1024 - wrongAsync);
    std::printf("tail guard bytes after them intact: %zu of %zu\n", guardKept, guard.size());
    verdict.check("the Async pair took 1024 bytes through the array and back", wrongAsync == 0);
    verdict.check("nothing was copied past the 1024 bytes read back", guardKept == guard.size());
    std::vector<unsigned char> afterModel = wordsBefore;
    place(afterModel, 8192, asyncData, 0, asyncData.size());
    const std::vector<unsigned char> wordsAfter = wholeArray(words);
    const size_t wrongAfterAsync = lesson25::differences(wordsAfter.data(), afterModel.data(), kArrayBytes);
    std::printf("array bytes as expected (as before, and 1024 at 8192): %zu of %zu\n", kArrayBytes - wrongAfterAsync,
                kArrayBytes);
    verdict.check("cuMemcpyHtoAAsync wrote its 1024 bytes at byte 8192 and nothing else", wrongAfterAsync == 0);

    // Step 4: array to array. "The size of the elements in the CUDA arrays need not be the same
    // format, but the elements must be the same size" (cuda.h:9902-9904): the bytes move as they are.
    course::printStep(4, "cuMemcpyAtoA: 2000 bytes of a UNSIGNED_INT32 array into a FLOAT array");
    CUarray floats = fourByteArray(CU_AD_FORMAT_FLOAT, 1);
    CHECK_DRIVER(cuMemcpyAtoA(floats, 128, words, 400, data.size()));
    std::vector<unsigned char> floatsModel(kArrayBytes, lesson25::kFill);
    place(floatsModel, 128, data, 0, data.size());
    const std::vector<unsigned char> floatsNow = wholeArray(floats);
    const size_t wrongFloats = lesson25::differences(floatsNow.data(), floatsModel.data(), kArrayBytes);
    std::printf("FLOAT array bytes as expected (2000 at 128, the rest 0xa5): %zu of %zu\n", kArrayBytes - wrongFloats,
                kArrayBytes);
    verdict.check("cuMemcpyAtoA moved the bytes unchanged between formats", wrongFloats == 0);

    // Step 5: device memory to an array of four 8-bit channels and back into device memory, each at
    // an offset; the array and the target are both read back whole. cuMemcpyAtoD's destination
    // "must be naturally aligned with the CUDA array elements" (cuda.h:9786-9788): 512 is a multiple of 4.
    course::printStep(5, "cuMemcpyDtoA, then cuMemcpyAtoD, through a 4 x UNSIGNED_INT8 array");
    CUarray pixels = fourByteArray(CU_AD_FORMAT_UNSIGNED_INT8, 4);
    const std::vector<unsigned char> deviceData = lesson25::pattern(kArrayBytes, 13);
    CUdeviceptr source = 0;
    CUdeviceptr target = 0;
    CHECK_DRIVER(cuMemAlloc(&source, kArrayBytes));
    CHECK_DRIVER(cuMemAlloc(&target, kArrayBytes));
    CHECK_DRIVER(cuMemcpyHtoD(source, deviceData.data(), kArrayBytes));
    CHECK_DRIVER(cuMemsetD8(target, lesson25::kFill, kArrayBytes));
    CHECK_DRIVER(cuMemcpyDtoA(pixels, 1024, source + 256, 4096));
    CHECK_DRIVER(cuMemcpyAtoD(target + 512, pixels, 1024, 4096));
    std::vector<unsigned char> pixelsModel(kArrayBytes, lesson25::kFill);
    place(pixelsModel, 1024, deviceData, 256, 4096);
    const std::vector<unsigned char> pixelsNow = wholeArray(pixels);
    const size_t wrongPixels = lesson25::differences(pixelsNow.data(), pixelsModel.data(), kArrayBytes);
    std::vector<unsigned char> targetModel(kArrayBytes, lesson25::kFill);
    place(targetModel, 512, deviceData, 256, 4096);
    const std::vector<unsigned char> landed = lesson25::download(target, kArrayBytes);
    const size_t wrongTarget = lesson25::differences(landed.data(), targetModel.data(), kArrayBytes);
    std::printf("array bytes as expected (4096 from source + 256 at 1024, the rest 0xa5): %zu of %zu\n",
                kArrayBytes - wrongPixels, kArrayBytes);
    std::printf("target bytes as expected (4096 from the array at 512, the rest 0xa5): %zu of %zu\n",
                kArrayBytes - wrongTarget, kArrayBytes);
    verdict.check("cuMemcpyDtoA and cuMemcpyAtoD moved 4096 bytes through the array, nothing else",
                  wrongPixels == 0 && wrongTarget == 0);

    // Step 6: NV12, 8-bit 4:2:0 YUV: a full-size luma plane and a half-size plane of interleaved
    // chroma pairs. cuda.h says what each plane is (cuda.h:11996-11999) but neither which devices
    // create an NV12 array nor which NumChannels its descriptor takes: NumChannels "may be 1, 2,
    // or 4" (cuda.h:11787-11788). The program tries those three, in that order, and runs the plane
    // checks only with an array the driver created; where it refuses all three, the step says so.
    course::printStep(6, "an NV12 array and its two planes (cuArrayGetPlane)");
    CUarray nv12 = nullptr;
    for (const unsigned int channels : {1u, 2u, 4u}) {
        CUDA_ARRAY_DESCRIPTOR nv12Desc{};
        nv12Desc.Width = 64;
        nv12Desc.Height = 32;
        nv12Desc.Format = CU_AD_FORMAT_NV12;
        nv12Desc.NumChannels = channels;
        const CUresult created = REPORT_DRIVER(cuArrayCreate(&nv12, &nv12Desc));
        std::printf("cuArrayCreate of a 64 x 32 NV12 array, NumChannels %u: %s\n", channels,
                    course::driverErrorName(created));
        if (created == CUDA_SUCCESS) break;
        nv12 = nullptr;
    }
    if (nv12 == nullptr)
        std::printf(
            "section NV12 planes: SKIP (cuArrayCreate refused CU_AD_FORMAT_NV12 with NumChannels 1, 2 and 4, "
            "the counts cuda.h allows)\n");
    else
        nv12Planes(verdict, nv12);
    // "If ... the array does not have a multi-planar format ... CUDA_ERROR_INVALID_VALUE is
    // returned" (cuda.h:11993-11994). Shown, not checked: with no NV12 array there is no bug in this
    // program that could change the answer, so a check would judge the driver alone, and no mutant
    // could make it fail.
    CUarray notAPlane = nullptr;
    const CUresult single = REPORT_DRIVER(cuArrayGetPlane(&notAPlane, words, 0));
    std::printf("cuArrayGetPlane on the UNSIGNED_INT32 array: %s\n", course::driverErrorName(single));

    // Step 7: release, newest first. cuda.h names no call that releases a plane: the program
    // destroys the NV12 array only, where there is one.
    course::printStep(7, "release everything, newest first");
    if (nv12 != nullptr) CHECK_DRIVER(cuArrayDestroy(nv12));
    CHECK_DRIVER(cuMemFree(target));
    CHECK_DRIVER(cuMemFree(source));
    CHECK_DRIVER(cuArrayDestroy(pixels));
    CHECK_DRIVER(cuArrayDestroy(floats));
    CHECK_DRIVER(cuMemFreeHost(pinned));
    CHECK_DRIVER(cuArrayDestroy(words));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: arrays, buffers, pinned memory, stream, primary context\n");

    course::printStep(8, "check");
    return verdict.finish();
}
