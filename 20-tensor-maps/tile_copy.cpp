// Lesson 20, program 2 of 4 — tiles through the copy engine: load, transform, store.
//
// Tensor maps reach a kernel as `const __grid_constant__ CUtensorMap` parameters. In
// transformTiles each block's thread 0 asks the copy engine for one 32 x 32 box of the input
// (cp.async.bulk.tensor, counted on an mbarrier); every thread then computes 2 v + 1 in shared
// memory, and thread 0 has the engine store the box to the output (bulk group). The matrix,
// 1000 x 700 floats, is no multiple of the box: the last column and row of boxes hang over the
// edge. The host checks every output element, that nothing outside the matrix was written (the
// output's rows are padded, and guard rows follow it), and what the edge box held beyond the
// matrix: zeros with CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, NaN with ..._NAN_REQUEST_ZERO_FMA (the
// kernel poisons each tile before its load, so the fill seen there is the copy engine's). The
// NaN-filling run's output and the inside of its edge box are checked too.
// Each block waits for its box on the mbarrier until a deadline (1 s), not for ever: a block
// whose box had not arrived by then (its byte count was never reached) is counted, and the
// host checks that there were none, so a wrong count ends in a FAIL instead of a hang.
//
//   tile_copy [--device N]
#include <cuda.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "tensor_maps.h"
#include "tile_shape.h"

namespace {

#if CUDA_VERSION >= 12000
using lesson20::kTileCols;
using lesson20::kTileRows;

constexpr unsigned int kCols = 1000;         // input and output: 1000 x 700 floats
constexpr unsigned int kRows = 700;          // (neither a multiple of 32)
constexpr unsigned int kOutputPitch = 1024;  // output row: 1000 floats + 24 of padding
constexpr unsigned int kGuardRows = 32;      // rows after the output matrix
constexpr float kSentinel = -1.0f;           // never a result: results are 2 v + 1 >= 1

constexpr unsigned int kGridX = (kCols + kTileCols - 1) / kTileCols;
constexpr unsigned int kGridY = (kRows + kTileRows - 1) / kTileRows;

// One launch of transformTiles: a block per box, the maps passed by value like any parameter.
// Returns how many blocks gave up waiting for their box (kernels/tensor_map_kernels.cu).
unsigned int transform(CUfunction kernel, const CUtensorMap& input, const CUtensorMap& output, CUdeviceptr edgeBox,
                       CUdeviceptr lateBlocks) {
    CHECK_DRIVER(cuMemsetD32(lateBlocks, 0, 1));
    CUtensorMap inputArg = input;
    CUtensorMap outputArg = output;
    void* params[] = {&inputArg, &outputArg, &edgeBox, &lateBlocks};
    CHECK_DRIVER(cuLaunchKernel(kernel, kGridX, kGridY, 1, lesson20::kTileThreads, 1, 1, 0, nullptr, params, nullptr));
    CHECK_DRIVER(cuCtxSynchronize());
    return lesson20::lateBlocks(lateBlocks);
}

// The line and the check after each launch: a late block stored nothing, and its wait is what
// a byte count that does not match the box ends in.
void reportLateBlocks(unsigned int late, course::Verdict& verdict) {
    std::printf("blocks whose box had not arrived after %.0f s (the mbarrier wait's deadline): %u of %u\n",
                static_cast<double>(lesson20::kWaitDeadlineNs) / 1e9, late, kGridX * kGridY);
    verdict.check("every block's box arrived before the mbarrier wait's deadline", late == 0);
}

// The last box: where it starts, and which of its elements lie inside the matrix.
constexpr unsigned int kEdgeX = (kCols - 1) / kTileCols * kTileCols;
constexpr unsigned int kEdgeY = (kRows - 1) / kTileRows * kTileRows;
constexpr bool insideMatrix(unsigned int r, unsigned int c) {
    return kEdgeY + r < kRows && kEdgeX + c < kCols;
}

// The output as the host sees it: elements of the matrix equal to 2 v + 1, and elements outside
// it (padding, guard rows) that no longer hold the sentinel.
struct OutputCounts {
    size_t transformed = 0;
    size_t outsideWritten = 0;
};
OutputCounts countOutput(const std::vector<float>& output, const std::vector<float>& input) {
    OutputCounts counts;
    for (size_t r = 0; r < kRows + kGuardRows; ++r)
        for (size_t c = 0; c < kOutputPitch; ++c) {
            const float value = output[r * kOutputPitch + c];
            if (r < kRows && c < kCols)
                counts.transformed += value == 2.0f * input[r * kCols + c] + 1.0f;
            else
                counts.outsideWritten += value != kSentinel;
        }
    return counts;
}

// The edge box's elements inside the matrix that hold the input's value.
unsigned int countInsideSame(const std::vector<float>& box, const std::vector<float>& input) {
    unsigned int same = 0;
    for (unsigned int r = 0; r < kTileRows; ++r)
        for (unsigned int c = 0; c < kTileCols; ++c)
            same += insideMatrix(r, c) && box[r * kTileCols + c] == input[(kEdgeY + r) * kCols + kEdgeX + c];
    return same;
}

// Counts the edge box's out-of-bounds elements for which `fill` holds.
template <typename Predicate>
unsigned int countOutside(const std::vector<float>& box, Predicate fill) {
    unsigned int count = 0;
    for (unsigned int r = 0; r < kTileRows; ++r)
        for (unsigned int c = 0; c < kTileCols; ++c) count += !insideMatrix(r, c) && fill(box[r * kTileCols + c]);
    return count;
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

    // Step 2: the kernel from the fatbin, and the two versions cuda.h lets one ask of it: the
    // binary architecture and the PTX virtual architecture it was compiled for.
    course::printStep(2, "the primary context and the kernel (fatbin)");
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    CHECK_DRIVER(cuCtxSetCurrent(primary));
    CUmodule module = lesson20::loadKernels();
    CUfunction transformTiles = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&transformTiles, module, "transformTiles"));
    int binaryVersion = 0;
    int ptxVersion = 0;
    CHECK_DRIVER(cuFuncGetAttribute(&binaryVersion, CU_FUNC_ATTRIBUTE_BINARY_VERSION, transformTiles));
    CHECK_DRIVER(cuFuncGetAttribute(&ptxVersion, CU_FUNC_ATTRIBUTE_PTX_VERSION, transformTiles));
    std::printf("transformTiles code for (CU_FUNC_ATTRIBUTE_BINARY_VERSION): sm_%d\n", binaryVersion);
    std::printf("transformTiles compiled from PTX for (CU_FUNC_ATTRIBUTE_PTX_VERSION): compute_%d\n", ptxVersion);

    // Step 3: the input packed (rows 4000 bytes apart), element (r, c) = 1000 r + c; the output
    // with rows of 1024 floats and kGuardRows more rows, all set to the sentinel first.
    course::printStep(3, "the input and the padded output matrix");
    std::vector<float> input(static_cast<size_t>(kCols) * kRows);
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i);
    const size_t outputCount = static_cast<size_t>(kOutputPitch) * (kRows + kGuardRows);
    CUdeviceptr inputBuffer = 0;
    CUdeviceptr outputBuffer = 0;
    CUdeviceptr edgeZero = 0;
    CUdeviceptr edgeNan = 0;
    CUdeviceptr lateBlocks = 0;
    CHECK_DRIVER(cuMemAlloc(&inputBuffer, input.size() * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&outputBuffer, outputCount * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&edgeZero, kTileRows * kTileCols * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&edgeNan, kTileRows * kTileCols * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&lateBlocks, sizeof(unsigned int)));
    CHECK_DRIVER(cuMemcpyHtoD(inputBuffer, input.data(), input.size() * sizeof(float)));
    unsigned int sentinelBits = 0;
    std::memcpy(&sentinelBits, &kSentinel, sizeof(sentinelBits));
    CHECK_DRIVER(cuMemsetD32(outputBuffer, sentinelBits, outputCount));
    std::printf("input: %u x %u floats, rows %zu bytes apart\n", kCols, kRows, kCols * sizeof(float));
    std::printf("output: rows %zu bytes apart (%u floats of padding), then %u guard rows, all %.1f first\n",
                kOutputPitch * sizeof(float), kOutputPitch - kCols, kGuardRows, kSentinel);

    // Step 4: three maps: the input with either out-of-bounds fill, and the output with its pitch.
    course::printStep(4, "three tensor maps (cuTensorMapEncodeTiled)");
    CUtensorMap inputZeroFill;
    CUtensorMap inputNanFill;
    CUtensorMap outputMap;
    CHECK_DRIVER(lesson20::encodeFloatMatrix(&inputZeroFill, inputBuffer, kCols, kRows, kCols * sizeof(float),
                                             kTileCols, kTileRows, CU_TENSOR_MAP_SWIZZLE_NONE,
                                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    CHECK_DRIVER(lesson20::encodeFloatMatrix(&inputNanFill, inputBuffer, kCols, kRows, kCols * sizeof(float), kTileCols,
                                             kTileRows, CU_TENSOR_MAP_SWIZZLE_NONE,
                                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA));
    CHECK_DRIVER(lesson20::encodeFloatMatrix(&outputMap, outputBuffer, kCols, kRows, kOutputPitch * sizeof(float),
                                             kTileCols, kTileRows, CU_TENSOR_MAP_SWIZZLE_NONE,
                                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    std::printf("box: %u x %u floats; grid: %u x %u blocks of %u threads\n", kTileCols, kTileRows, kGridX, kGridY,
                lesson20::kTileThreads);
    std::printf("last box: columns %u to %u, rows %u to %u (%u x %u of its elements inside the matrix)\n", kEdgeX,
                kEdgeX + kTileCols - 1, kEdgeY, kEdgeY + kTileRows - 1, kCols - kEdgeX, kRows - kEdgeY);

    // Step 5: the launch with zero fill; the output and the edge box checked on the host.
    course::printStep(5, "load, 2 v + 1, store; the output and the edge box");
    // The kernel writes a poison over each tile before its load (kernels/tensor_map_kernels.cu):
    // the zeros counted below were written by the copy engine.
    reportLateBlocks(transform(transformTiles, inputZeroFill, outputMap, edgeZero, lateBlocks), verdict);
    const OutputCounts zeroRun = countOutput(lesson20::copyBack<float>(outputBuffer, outputCount), input);
    std::printf("output elements equal to 2 v + 1: %zu of %zu\n", zeroRun.transformed, input.size());
    std::printf("elements outside the matrix (padding, guard rows) the store changed: %zu\n", zeroRun.outsideWritten);
    verdict.check("every output element is 2 v + 1", zeroRun.transformed == input.size());
    verdict.check("the store wrote nothing outside the matrix", zeroRun.outsideWritten == 0);
    const std::vector<float> boxZero = lesson20::copyBack<float>(edgeZero, kTileRows * kTileCols);
    const unsigned int insideSame = countInsideSame(boxZero, input);
    const unsigned int insideCount = (kCols - kEdgeX) * (kRows - kEdgeY);
    const unsigned int outsideCount = kTileRows * kTileCols - insideCount;
    const unsigned int zeros = countOutside(boxZero, [](float v) { return v == 0.0f; });
    std::printf("edge box, elements inside the matrix as loaded: %u of %u equal to the input\n", insideSame,
                insideCount);
    std::printf("edge box, out-of-bounds elements with FLOAT_OOB_FILL_NONE: %u of %u are zero\n", zeros, outsideCount);
    verdict.check("the edge box holds the matrix's elements where it overlaps the matrix", insideSame == insideCount);
    verdict.check("out-of-bounds elements are zero with CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE", zeros == outsideCount);

    // Step 6: the same launch with the NaN-filling input map: only the fill differs, so the
    // output (set to the sentinel again first) and the edge box's inside elements are as before.
    course::printStep(6, "the same with CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA");
    CHECK_DRIVER(cuMemsetD32(outputBuffer, sentinelBits, outputCount));
    reportLateBlocks(transform(transformTiles, inputNanFill, outputMap, edgeNan, lateBlocks), verdict);
    const OutputCounts nanRun = countOutput(lesson20::copyBack<float>(outputBuffer, outputCount), input);
    std::printf("output elements equal to 2 v + 1: %zu of %zu\n", nanRun.transformed, input.size());
    verdict.check("with the NaN-filling map too, every output element is 2 v + 1", nanRun.transformed == input.size());
    const std::vector<float> boxNan = lesson20::copyBack<float>(edgeNan, kTileRows * kTileCols);
    const unsigned int insideSameNan = countInsideSame(boxNan, input);
    std::printf("edge box, elements inside the matrix as loaded: %u of %u equal to the input\n", insideSameNan,
                insideCount);
    verdict.check("with the NaN-filling map too, the edge box holds the matrix's elements where it overlaps it",
                  insideSameNan == insideCount);
    const unsigned int nans = countOutside(boxNan, [](float v) { return std::isnan(v); });
    unsigned int fillBits = 0;
    std::memcpy(&fillBits, &boxNan.back(), sizeof(fillBits));  // the box's last element is outside
    std::printf(
        "edge box, out-of-bounds elements with FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA: %u of %u are NaN "
        "(bits 0x%08x)\n",
        nans, outsideCount, fillBits);
    verdict.check("out-of-bounds elements are NaN with CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA",
                  nans == outsideCount);

    // Step 7: reverse order. The maps are plain values and need no release.
    course::printStep(7, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(lateBlocks));
    CHECK_DRIVER(cuMemFree(edgeNan));
    CHECK_DRIVER(cuMemFree(edgeZero));
    CHECK_DRIVER(cuMemFree(outputBuffer));
    CHECK_DRIVER(cuMemFree(inputBuffer));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("buffers, module and primary context: released\n");
    return verdict.finish();
#else
    return course::kExitNotApplicable;
#endif
}
