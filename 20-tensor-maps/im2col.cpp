// Lesson 20, program 4 of 4 — im2col through the copy engine, and one map pointed at another buffer.
//
// A convolution becomes a matrix product once each output pixel's receptive field is laid out as
// one row: the im2col matrix. A tensor map made by cuTensorMapEncodeIm2col lets the copy engine
// gather those rows itself. The input here is NHWC (2 images of 8 x 8 pixels, 8 float channels);
// the filter is 3 x 3 with stride 1 and one pixel of padding. In im2colTaps each block takes one
// filter tap and, with one im2col load (cp.async.bulk.tensor ... .im2col), gets the pixel under that
// tap for all 128 output pixels, padding filled with zeros; it writes them to the tap's columns of
// the matrix, and the host compares every element with an im2col of the same input computed here.
// Then cuTensorMapReplaceAddress points the same map at a second input (every value negated): the
// same launch must now give the second input's im2col, and no value of the first.
// Last, cuTensorMapEncodeIm2colWide, which cuda.h supports from compute capability 10.0 on: what it
// answers on this GPU is printed, as an observation.
//
//   im2col [--device N]
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "tensor_maps.h"
#include "tile_shape.h"

namespace {

#if CUDA_VERSION >= 12000
using lesson20::kIm2colChannels;  // the shapes of tile_shape.h
using lesson20::kIm2colFilter;
using lesson20::kIm2colHeight;
using lesson20::kIm2colImages;
using lesson20::kIm2colPad;
using lesson20::kIm2colPixels;
using lesson20::kIm2colTaps;
using lesson20::kIm2colWidth;

constexpr unsigned int kInputFloats = kIm2colImages * kIm2colHeight * kIm2colWidth * kIm2colChannels;
constexpr unsigned int kRowFloats = kIm2colTaps * kIm2colChannels;  // one row of the im2col matrix
constexpr unsigned int kMatrixFloats = kIm2colPixels * kRowFloats;
constexpr float kSentinel = -0.5f;  // never an input value (whole numbers) nor the fill (0)

// The im2col matrix of an NHWC input, computed on the host: row p is output pixel p (image n, row
// oh, column ow), column tap * channels + c holds channel c of the input pixel under filter tap
// (r, s) = (tap / 3, tap % 3), at (oh - pad + r, ow - pad + s); zero where that lies in the padding.
std::vector<float> hostIm2col(const std::vector<float>& input) {
    std::vector<float> matrix(kMatrixFloats, 0.0f);
    const int pad = static_cast<int>(kIm2colPad);
    const int height = static_cast<int>(kIm2colHeight);
    const int width = static_cast<int>(kIm2colWidth);
    for (unsigned int p = 0; p < kIm2colPixels; ++p) {
        const int n = static_cast<int>(p / (kIm2colHeight * kIm2colWidth));
        const int oh = static_cast<int>(p / kIm2colWidth % kIm2colHeight);
        const int ow = static_cast<int>(p % kIm2colWidth);
        for (unsigned int tap = 0; tap < kIm2colTaps; ++tap) {
            const int ih = oh - pad + static_cast<int>(tap / kIm2colFilter);
            const int iw = ow - pad + static_cast<int>(tap % kIm2colFilter);
            if (ih < 0 || ih >= height || iw < 0 || iw >= width) continue;
            const size_t pixel = (static_cast<size_t>(n) * kIm2colHeight + ih) * kIm2colWidth + iw;
            for (unsigned int c = 0; c < kIm2colChannels; ++c)
                matrix[p * kRowFloats + tap * kIm2colChannels + c] = input[pixel * kIm2colChannels + c];
        }
    }
    return matrix;
}

// One launch of im2colTaps, a block per filter tap, over a matrix set to the sentinel first.
// Returns the matrix as the kernel left it, and how many blocks gave up waiting for their load.
std::vector<float> runIm2col(CUfunction kernel, const CUtensorMap& map, CUdeviceptr matrix, CUdeviceptr lateBlocks,
                             unsigned int* late) {
    unsigned int sentinelBits = 0;
    std::memcpy(&sentinelBits, &kSentinel, sizeof(sentinelBits));
    CHECK_DRIVER(cuMemsetD32(matrix, sentinelBits, kMatrixFloats));
    CHECK_DRIVER(cuMemsetD32(lateBlocks, 0, 1));
    CUtensorMap mapArg = map;
    void* params[] = {&mapArg, &matrix, &lateBlocks};
    CHECK_DRIVER(cuLaunchKernel(kernel, kIm2colTaps, 1, 1, lesson20::kTileThreads, 1, 1, 0, nullptr, params, nullptr));
    CHECK_DRIVER(cuCtxSynchronize());
    *late = lesson20::lateBlocks(lateBlocks);
    std::printf("blocks whose load had not arrived after %.0f s (the mbarrier wait's deadline): %u of %u\n",
                static_cast<double>(lesson20::kWaitDeadlineNs) / 1e9, *late, kIm2colTaps);
    return lesson20::copyBack<float>(matrix, kMatrixFloats);
}

// Elements of `matrix` equal to the same element of `expected`.
unsigned int countEqual(const std::vector<float>& matrix, const std::vector<float>& expected) {
    unsigned int equal = 0;
    for (size_t i = 0; i < matrix.size(); ++i) equal += matrix[i] == expected[i];
    return equal;
}

// Elements that hold the value `other` has there, where that is an input value (not the fill).
unsigned int countValuesOf(const std::vector<float>& matrix, const std::vector<float>& other) {
    unsigned int same = 0;
    for (size_t i = 0; i < matrix.size(); ++i) same += other[i] != 0.0f && matrix[i] == other[i];
    return same;
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    // Step 1: as in encode_rules.
    course::printStep(1, "initialise the driver, check versions and compute capability");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    if (!lesson20::tensorMapsUsable(device, ordinal)) return course::kExitNotApplicable;
#if CUDA_VERSION >= 12000
    course::Verdict verdict;

    // Step 2: the kernel from the fatbin.
    course::printStep(2, "the primary context and the kernel (fatbin)");
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    CHECK_DRIVER(cuCtxSetCurrent(primary));
    CUmodule module = lesson20::loadKernels();
    CUfunction im2colTaps = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&im2colTaps, module, "im2colTaps"));

    // Step 3: two NHWC inputs of the same shape, the first 1, 2, 3, ... in memory order, the
    // second the same values negated; the im2col matrix the kernel writes.
    course::printStep(3, "two NHWC inputs and the im2col matrix");
    std::vector<float> first(kInputFloats);
    std::vector<float> second(kInputFloats);
    for (unsigned int i = 0; i < kInputFloats; ++i) {
        first[i] = static_cast<float>(i + 1);
        second[i] = -first[i];
    }
    CUdeviceptr firstInput = 0;
    CUdeviceptr secondInput = 0;
    CUdeviceptr matrix = 0;
    CUdeviceptr lateBlocks = 0;
    CHECK_DRIVER(cuMemAlloc(&firstInput, kInputFloats * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&secondInput, kInputFloats * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&matrix, kMatrixFloats * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&lateBlocks, sizeof(unsigned int)));
    CHECK_DRIVER(cuMemcpyHtoD(firstInput, first.data(), kInputFloats * sizeof(float)));
    CHECK_DRIVER(cuMemcpyHtoD(secondInput, second.data(), kInputFloats * sizeof(float)));
    std::printf("input (NHWC): %u images of %u x %u pixels, %u float channels\n", kIm2colImages, kIm2colHeight,
                kIm2colWidth, kIm2colChannels);
    std::printf("filter: %u x %u, stride 1, padding %u; im2col matrix: %u rows (output pixels) x %u floats\n",
                kIm2colFilter, kIm2colFilter, kIm2colPad, kIm2colPixels, kRowFloats);

    // Step 4: the im2col map. Dimension 0 first: {C, W, H, N}, strides of W, H and N in bytes.
    // The bounding box holds the filter bases (top-left corners) of the output pixels: from the
    // lower corner, an offset from pixel 0, to the upper corner, an offset from the last pixel,
    // in each of H and W: -pad and pad - (filter - 1). The same in H and W here, so the order of
    // the two entries does not matter. A load's im2col offsets (the tap) are added to each base.
    course::printStep(4, "cuTensorMapEncodeIm2col: the bounding box, channels per pixel, pixels per column");
    const cuuint64_t globalDim[4] = {kIm2colChannels, kIm2colWidth, kIm2colHeight, kIm2colImages};
    const cuuint64_t globalStrides[3] = {kIm2colChannels * sizeof(float),
                                         kIm2colWidth * kIm2colChannels * sizeof(float),
                                         kIm2colHeight * kIm2colWidth * kIm2colChannels * sizeof(float)};
    const int pad = static_cast<int>(kIm2colPad);
    const int far = pad - static_cast<int>(kIm2colFilter - 1);
    const int lowerCorner[2] = {-pad, -pad};  // one entry per spatial dimension: H and W
    const int upperCorner[2] = {far, far};
    const cuuint32_t elementStrides[4] = {1, 1, 1, 1};  // the convolution's stride; the first is ignored
    CUtensorMap map;
    CHECK_DRIVER(cuTensorMapEncodeIm2col(
        &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, reinterpret_cast<void*>(firstInput), globalDim, globalStrides,
        lowerCorner, upperCorner, kIm2colChannels, kIm2colPixels, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
        CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    std::printf("globalDim {C, W, H, N}: {%u, %u, %u, %u}; globalStrides: {%llu, %llu, %llu} bytes\n", kIm2colChannels,
                kIm2colWidth, kIm2colHeight, kIm2colImages, static_cast<unsigned long long>(globalStrides[0]),
                static_cast<unsigned long long>(globalStrides[1]), static_cast<unsigned long long>(globalStrides[2]));
    std::printf("pixelBoxLowerCorner: {%d, %d}; pixelBoxUpperCorner: {%d, %d}\n", lowerCorner[0], lowerCorner[1],
                upperCorner[0], upperCorner[1]);
    std::printf("channelsPerPixel: %u; pixelsPerColumn: %u (one load: %zu bytes)\n", kIm2colChannels, kIm2colPixels,
                kIm2colPixels * kIm2colChannels * sizeof(float));

    // Step 5: one block per filter tap, the tap's (w, h) as the load's im2col offsets.
    course::printStep(5, "one im2col load per filter tap; the matrix against the host's im2col");
    const std::vector<float> firstExpected = hostIm2col(first);
    unsigned int fill = 0;
    for (const float v : firstExpected) fill += v == 0.0f;
    unsigned int late = 0;
    const std::vector<float> firstRun = runIm2col(im2colTaps, map, matrix, lateBlocks, &late);
    verdict.check("every im2col block's load arrived before the mbarrier wait's deadline", late == 0);
    const unsigned int firstEqual = countEqual(firstRun, firstExpected);
    std::printf("im2col matrix elements equal to the host's im2col of the first input: %u of %u (%u of them padding)\n",
                firstEqual, kMatrixFloats, fill);
    verdict.check("the im2col loads give the host's im2col of the input, padding included",
                  firstEqual == kMatrixFloats);

    // Step 6: the same map, another address. cuda.h: the call modifies the map "with an updated
    // globalAddress", which "must follow previous alignment requirements".
    course::printStep(6, "cuTensorMapReplaceAddress: the same map over the second input");
    CHECK_DRIVER(cuTensorMapReplaceAddress(&map, reinterpret_cast<void*>(secondInput)));
    const std::vector<float> secondRun = runIm2col(im2colTaps, map, matrix, lateBlocks, &late);
    const unsigned int secondEqual = countEqual(secondRun, hostIm2col(second));
    const unsigned int stale = countValuesOf(secondRun, firstExpected);
    std::printf("im2col matrix elements equal to the host's im2col of the second input: %u of %u\n", secondEqual,
                kMatrixFloats);
    std::printf("elements holding a value of the first input: %u\n", stale);
    verdict.check("after cuTensorMapReplaceAddress the loads give the second input's im2col",
                  late == 0 && secondEqual == kMatrixFloats);
    verdict.check("after cuTensorMapReplaceAddress no element comes from the first input", stale == 0);

    // Step 7: the W-only variant (the .im2col::w loads). cuda.h: "only supported on devices of
    // compute capability 10.0 or higher", and it names no code for older ones: printed, not checked.
    course::printStep(7, "cuTensorMapEncodeIm2colWide (compute capability 10.0 and newer)");
#if CUDA_VERSION >= 12080
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    if (driverVersion >= 12080) {
        CUtensorMap wide;
        const CUresult wideResult = cuTensorMapEncodeIm2colWide(
            &wide, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, reinterpret_cast<void*>(firstInput), globalDim, globalStrides,
            lowerCorner[0], upperCorner[0], kIm2colChannels, kIm2colWidth, elementStrides,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_IM2COL_WIDE_MODE_W, CU_TENSOR_MAP_SWIZZLE_64B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        std::printf("cuTensorMapEncodeIm2colWide (W mode, 64-byte swizzle), encoded and never used here, observed: %s\n",
                    course::driverErrorName(wideResult));
    } else {
        std::printf("cuTensorMapEncodeIm2colWide: not called (it came with CUDA 12.8; the driver supports %s)\n",
                    course::formatCudaVersion(driverVersion).c_str());
    }
#else
    std::printf("cuTensorMapEncodeIm2colWide: not called (it came with CUDA 12.8; built with %s headers)\n",
                course::formatCudaVersion(CUDA_VERSION).c_str());
#endif

    // Step 8: reverse order. The maps are plain values and need no release.
    course::printStep(8, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(lateBlocks));
    CHECK_DRIVER(cuMemFree(matrix));
    CHECK_DRIVER(cuMemFree(secondInput));
    CHECK_DRIVER(cuMemFree(firstInput));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("buffers, module and primary context: released\n");
    return verdict.finish();
#else
    return course::kExitNotApplicable;
#endif
}
