// Lesson 25, program 2 — cuMemcpy3DBatchAsync: boxes of a volume, a host volume into a 3-D CUDA
// array, and a box of that array out again, each batch one call.
//
// Every operation of a 3-D batch has two operands, each a pointer (with a row length and a layer
// height, in elements) or a CUDA array (with an offset in elements), an extent in elements, and its
// own srcAccessOrder. Between pointers an element is one byte; with an array on either side it is
// the array's element (cuda.h:11189-11193). The copies inside a batch are unordered, and dependent
// copies within one batch "will result in undefined behavior" (cuda.h:11183-11184): a copy that
// reads what another writes goes into the next batch.
//
//   batched_3d               the walkthrough
//   batched_3d --device N    another GPU
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

// The device volume: kW x kH x kD bytes, rows packed.
constexpr size_t kW = 256;
constexpr size_t kH = 64;
constexpr size_t kD = 16;
// Eight boxes of 32 x 8 x 4 bytes taken from it.
constexpr size_t kBoxes = 8;
constexpr size_t kBoxW = 32;
constexpr size_t kBoxH = 8;
constexpr size_t kBoxD = 4;
constexpr size_t kBoxBytes = kBoxW * kBoxH * kBoxD;
// The CUDA array: 64 x 32 x 8 floats, and the box read back from it: 16 x 8 x 3 floats from
// (8, 4, 2), landing in rows of 20 floats and layers of 10 rows.
constexpr size_t kAW = 64;
constexpr size_t kAH = 32;
constexpr size_t kAD = 8;
constexpr size_t kOutRow = 20;
constexpr size_t kOutLayer = 10;
constexpr size_t kOutFloats = kOutRow * kOutLayer * 3;

#if CUDA_VERSION >= 12080  // everything below serves the batched copies
struct Origin {
    size_t x, y, z;
};
Origin boxOrigin(size_t box) {
    return {16 + 24 * box, (7 * box) % (kH - kBoxH), (5 * box) % (kD - kBoxD)};
}

// Array element (x, y, z) as the host wrote it: its index plus a quarter, exact in a float.
float arrayValue(size_t x, size_t y, size_t z) {
    return static_cast<float>((z * kAH + y) * kAW + x) + 0.25f;
}

CUmemcpy3DOperand pointerOperand(CUdeviceptr pointer, size_t rowLength, size_t layerHeight, CUmemLocation hint) {
    CUmemcpy3DOperand operand{};
    operand.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    operand.op.ptr.ptr = pointer;
    operand.op.ptr.rowLength = rowLength;  // 0: rows packed at the copy's width
    operand.op.ptr.layerHeight = layerHeight;
    operand.op.ptr.locHint = hint;  // ignored unless managed or pageable memory (cuda.h:4624)
    return operand;
}

CUmemcpy3DOperand arrayOperand(CUarray array, size_t x, size_t y, size_t z) {
    CUmemcpy3DOperand operand{};
    operand.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
    operand.op.array.array = array;
    operand.op.array.offset = CUoffset3D{x, y, z};
    return operand;
}

CUDA_MEMCPY3D_BATCH_OP operation(CUmemcpy3DOperand src, CUmemcpy3DOperand dst, size_t w, size_t h, size_t d) {
    CUDA_MEMCPY3D_BATCH_OP op{};
    op.src = src;
    op.dst = dst;
    op.extent = CUextent3D{w, h, d};  // "must not be 0" in any dimension
    op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    op.flags = CU_MEMCPY_FLAG_DEFAULT;
    return op;
}

// The whole CUDA array from or to the host (cuMemcpy3D, legacy stream), kAW x kAH x kAD floats
// with packed rows.
void wholeArrayCopy(CUarray array, void* host, bool intoArray) {
    CUDA_MEMCPY3D copy{};
    if (intoArray) {
        copy.srcMemoryType = CU_MEMORYTYPE_HOST;
        copy.srcHost = host;
        copy.srcPitch = kAW * sizeof(float);
        copy.srcHeight = kAH;
        copy.dstMemoryType = CU_MEMORYTYPE_ARRAY;
        copy.dstArray = array;
    } else {
        copy.srcMemoryType = CU_MEMORYTYPE_ARRAY;
        copy.srcArray = array;
        copy.dstMemoryType = CU_MEMORYTYPE_HOST;
        copy.dstHost = host;
        copy.dstPitch = kAW * sizeof(float);
        copy.dstHeight = kAH;
    }
    copy.WidthInBytes = kAW * sizeof(float);
    copy.Height = kAH;
    copy.Depth = kAD;
    CHECK_DRIVER(cuMemcpy3D(&copy));
    // A synchronous copy "can exhibit asynchronous behavior" (cuda.h:14249-14250), and the batches
    // run on a NON_BLOCKING stream, which does not wait for the legacy stream: wait here.
    CHECK_DRIVER(cuCtxSynchronize());
}

// The eight boxes against their regions of the host volume.
void checkBoxes(course::Verdict& verdict, CUdeviceptr boxes, const std::vector<unsigned char>& volumeHost) {
    const std::vector<unsigned char> gotBoxes = lesson25::download(boxes, kBoxes * kBoxBytes);
    size_t wrongBoxBytes = 0;
    for (size_t b = 0; b < kBoxes; ++b) {
        const Origin o = boxOrigin(b);
        for (size_t z = 0; z < kBoxD; ++z)
            for (size_t y = 0; y < kBoxH; ++y)
                wrongBoxBytes += lesson25::differences(&gotBoxes[b * kBoxBytes + (z * kBoxH + y) * kBoxW],
                                                       &volumeHost[((o.z + z) * kH + o.y + y) * kW + o.x], kBoxW);
    }
    std::printf("box bytes equal to their place in the volume: %zu of %zu\n", kBoxes * kBoxBytes - wrongBoxBytes,
                kBoxes * kBoxBytes);
    verdict.check("every box equals its region of the volume", wrongBoxBytes == 0);
}

// The whole array, filled with 0xa5 bytes before batch 1, against the host volume: every element.
void checkWholeArray(course::Verdict& verdict, CUarray array) {
    std::vector<float> inArray(kAW * kAH * kAD);
    wholeArrayCopy(array, inArray.data(), false);
    size_t right = 0;
    for (size_t z = 0; z < kAD; ++z)
        for (size_t y = 0; y < kAH; ++y)
            for (size_t x = 0; x < kAW; ++x) {
                const float expected = arrayValue(x, y, z);
                right += std::memcmp(&inArray[(z * kAH + y) * kAW + x], &expected, sizeof(float)) == 0 ? 1 : 0;
            }
    std::printf("array elements equal to the host volume: %zu of %zu\n", right, inArray.size());
    verdict.check("the host volume arrived in the array, every element", right == inArray.size());
}

// The box read out of the array, in rows of 20 and layers of 10 floats, the gaps still the fill.
void checkArrayBox(course::Verdict& verdict, CUdeviceptr outBox) {
    std::vector<float> out(kOutFloats);
    CHECK_DRIVER(cuMemcpyDtoH(out.data(), outBox, kOutFloats * sizeof(float)));
    float fill = 0.0f;
    const unsigned char fillBytes[4] = {lesson25::kFill, lesson25::kFill, lesson25::kFill, lesson25::kFill};
    std::memcpy(&fill, fillBytes, sizeof(fill));
    size_t boxRight = 0;
    size_t gapsKept = 0;
    for (size_t z = 0; z < 3; ++z)
        for (size_t y = 0; y < kOutLayer; ++y)
            for (size_t x = 0; x < kOutRow; ++x) {
                const float value = out[(z * kOutLayer + y) * kOutRow + x];
                const float expected = x < 16 && y < 8 ? arrayValue(8 + x, 4 + y, 2 + z) : fill;
                if (x < 16 && y < 8)
                    boxRight += std::memcmp(&value, &expected, 4) == 0 ? 1 : 0;
                else
                    gapsKept += std::memcmp(&value, &fill, 4) == 0 ? 1 : 0;
            }
    std::printf("array box elements in place: %zu of %d\n", boxRight, 16 * 8 * 3);
    std::printf("elements between its rows and layers still fill: %zu of %zu\n", gapsKept, kOutFloats - 16 * 8 * 3);
    verdict.check("the array box arrived in rows of 20 and layers of 10 elements", boxRight == 16 * 8 * 3);
    verdict.check("the elements between its rows and layers keep the fill", gapsKept == kOutFloats - 16 * 8 * 3);
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
#if CUDA_VERSION < 12080
    return lesson25::skipBatchedCopies(lesson25::batchUnavailableReason(CUDA_VERSION));
#else
    const int ordinal = args.deviceOrdinal();

    // Step 1: the device, and whether this build and this driver have the batched copies.
    course::printStep(1, "initialise, check that the driver has cuMemcpy3DBatchAsync");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    course::printDeviceName(ordinal, device);
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("driver supports CUDA: %s\n", course::formatCudaVersion(driverVersion).c_str());
    const std::string unavailable = lesson25::batchCallsUnavailable(driverVersion);  // versions, entry points
    if (!unavailable.empty()) return lesson25::skipBatchedCopies(unavailable);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUstream stream = nullptr;  // "Must not be default NULL stream" (cuda.h:11232)
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    // Step 2: the operands. The host volume is pinned: a copy in stream order reads it later.
    course::printStep(2, "a device volume, a pinned host volume, a 3-D CUDA array");
    const std::vector<unsigned char> volumeHost = lesson25::pattern(kW * kH * kD, 5);
    CUdeviceptr volume = 0;
    CHECK_DRIVER(cuMemAlloc(&volume, volumeHost.size()));
    CHECK_DRIVER(cuMemcpyHtoDAsync(volume, volumeHost.data(), volumeHost.size(), stream));  // in stream order
    CUdeviceptr boxes = 0;
    CHECK_DRIVER(cuMemAlloc(&boxes, kBoxes * kBoxBytes));
    void* floatsMemory = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&floatsMemory, kAW * kAH * kAD * sizeof(float)));
    auto* floats = static_cast<float*>(floatsMemory);
    for (size_t z = 0; z < kAD; ++z)
        for (size_t y = 0; y < kAH; ++y)
            for (size_t x = 0; x < kAW; ++x) floats[(z * kAH + y) * kAW + x] = arrayValue(x, y, z);
    CUDA_ARRAY3D_DESCRIPTOR arrayDesc{};
    arrayDesc.Width = kAW;
    arrayDesc.Height = kAH;
    arrayDesc.Depth = kAD;
    arrayDesc.Format = CU_AD_FORMAT_FLOAT;
    arrayDesc.NumChannels = 1;
    CUarray array = nullptr;
    CHECK_DRIVER(cuArray3DCreate(&array, &arrayDesc));
    std::vector<unsigned char> arrayFill(kAW * kAH * kAD * sizeof(float), lesson25::kFill);
    wholeArrayCopy(array, arrayFill.data(), true);  // an array has no memset: 0xa5 bytes from the host
    CUdeviceptr outBox = 0;
    CHECK_DRIVER(cuMemAlloc(&outBox, kOutFloats * sizeof(float)));
    std::printf("volume: %zu x %zu x %zu bytes; array: %zu x %zu x %zu floats\n", kW, kH, kD, kAW, kAH, kAD);

    // Step 3: batch 1, nine independent copies: eight boxes (pointer to pointer, extents in bytes;
    // the source rows are kW bytes and its layers kH rows, the destination packed) and the whole
    // host volume into the array (extent in array elements, the host rows packed).
    course::printStep(3, "batch 1: eight boxes of the volume, the host volume into the array");
    CHECK_DRIVER(cuMemsetD8Async(boxes, lesson25::kFill, kBoxes * kBoxBytes, stream));
    CHECK_DRIVER(cuMemsetD8Async(outBox, lesson25::kFill, kOutFloats * sizeof(float), stream));
    std::vector<CUDA_MEMCPY3D_BATCH_OP> first;
    for (size_t b = 0; b < kBoxes; ++b) {
        const Origin o = boxOrigin(b);
        const CUdeviceptr corner = volume + (o.z * kH + o.y) * kW + o.x;
        first.push_back(operation(pointerOperand(corner, kW, kH, lesson25::deviceLocation(ordinal)),
                                  pointerOperand(boxes + b * kBoxBytes, 0, 0, lesson25::deviceLocation(ordinal)), kBoxW,
                                  kBoxH, kBoxD));
    }
    first.push_back(operation(pointerOperand(reinterpret_cast<CUdeviceptr>(floats), 0, 0, lesson25::hostLocation()),
                              arrayOperand(array, 0, 0, 0), kAW, kAH, kAD));
    CHECK_DRIVER(lesson25::memcpy3DBatchAsync(first.size(), first.data(), 0, stream));
    std::printf("batch 1: %zu operations\n", first.size());

    // Step 4: batch 2 reads what batch 1 wrote into the array, so it is a batch of its own: the
    // batches are in stream order, the copies inside one are not.
    course::printStep(4, "batch 2: a box of the array into rows of 20 and layers of 10 floats");
    CUDA_MEMCPY3D_BATCH_OP second =
        operation(arrayOperand(array, 8, 4, 2),
                  pointerOperand(outBox, kOutRow, kOutLayer, lesson25::deviceLocation(ordinal)), 16, 8, 3);
    CHECK_DRIVER(lesson25::memcpy3DBatchAsync(1, &second, 0, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));

    course::Verdict verdict;
    checkBoxes(verdict, boxes, volumeHost);
    checkWholeArray(verdict, array);  // the host volume, batch 1's ninth operation, read back whole
    checkArrayBox(verdict, outBox);

    // Step 5: a zero-initialised operation has srcAccessOrder 0, CU_MEMCPY_SRC_ACCESS_ORDER_INVALID:
    // "Each memcopy operation in opList must have a valid srcAccessOrder setting, otherwise this API
    // will return CUDA_ERROR_INVALID_VALUE" (cuda.h:11221-11222).
    course::printStep(5, "refusal: an operation without a srcAccessOrder");
    CUDA_MEMCPY3D_BATCH_OP unset = first[0];
    unset.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
    const CUresult refused = REPORT_DRIVER(lesson25::memcpy3DBatchAsync(1, &unset, 0, stream));
    std::printf("operation with srcAccessOrder 0: %s\n", course::driverErrorName(refused));
    verdict.check("an operation without a valid srcAccessOrder is refused with CUDA_ERROR_INVALID_VALUE",
                  refused == CUDA_ERROR_INVALID_VALUE);
    CHECK_DRIVER(cuStreamSynchronize(stream));

    // Step 6: release, newest first.
    course::printStep(6, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(outBox));
    CHECK_DRIVER(cuArrayDestroy(array));
    CHECK_DRIVER(cuMemFreeHost(floatsMemory));
    CHECK_DRIVER(cuMemFree(boxes));
    CHECK_DRIVER(cuMemFree(volume));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: buffers, array, pinned volume, stream, primary context\n");

    course::printStep(7, "check");
    return verdict.finish();
#endif
}
