// Lesson 20, program 1 of 4 — a tensor map, argument by argument, and the rules it must meet.
//
// A CUtensorMap is a 128-byte descriptor of a tensor in global memory and of the box (tile) the
// copy engine moves between it and shared memory. cuda.h calls it an opaque value that "should
// only be accessed through CUDA APIs and PTX": cuTensorMapEncodeTiled creates one from its
// arguments (cuTensorMapReplaceAddress changes the address in one, and PTX's tensormap.replace,
// for sm_90a in cccl's wrappers, changes one in global memory); other code should not touch it.
// This program encodes the map of a 1000 x 700 float matrix with 32 x 32 boxes and the 128-byte
// swizzle, printing each argument with the rule cuda.h gives for it, then provokes three wrong
// descriptors — a misaligned address, a row stride that is not a multiple of 16 bytes, a box
// row wider than the swizzle span — and checks that the call refuses each with
// CUDA_ERROR_INVALID_VALUE (and that the padded matrix of the second encodes). Last, two checks
// of what this driver does beyond what cuda.h spells out: it takes a host pointer as readily as
// device memory, and wants a current context for the call.
//
//   encode_rules [--device N]
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "tensor_maps.h"
#include "tile_shape.h"

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    // Step 1: CUDA 12.0 headers and driver, compute capability 9.0.
    course::printStep(1, "initialise the driver, check versions and compute capability");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    if (!lesson20::tensorMapsUsable(device, ordinal)) return course::kExitNotApplicable;
#if CUDA_VERSION >= 12000
    course::Verdict verdict;

    // Step 2: the matrix the map describes: 1000 columns x 700 rows of floats, rows packed
    // (4000 bytes apart). cuda.h: cuMemAlloc's memory "is suitably aligned for any kind of
    // variable"; step 3 prints its address modulo 16.
    course::printStep(2, "the primary context and a matrix in device memory");
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    CHECK_DRIVER(cuCtxSetCurrent(primary));
    constexpr cuuint64_t kCols = 1000;
    constexpr cuuint64_t kRows = 700;
    CUdeviceptr matrix = 0;
    CHECK_DRIVER(cuMemAlloc(&matrix, kCols * kRows * sizeof(float)));
    std::printf("matrix: %llu x %llu floats, rows %llu bytes apart\n", static_cast<unsigned long long>(kCols),
                static_cast<unsigned long long>(kRows), static_cast<unsigned long long>(kCols * sizeof(float)));

    // Step 3: the call, one argument at a time, each with its rule from cuda.h.
    course::printStep(3, "cuTensorMapEncodeTiled, argument by argument");
    CUtensorMap map;  // alignas(128) in cuda.h: the 64-byte alignment the call asks for is met
    std::printf(
        "tensorMap: %zu bytes, address mod 64: %llu (must be 64-byte aligned; cuda.h declares it alignas(%zu); "
        "opaque: accessed only through CUDA APIs and PTX)\n",
        sizeof(map), static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(&map) % 64),
        alignof(CUtensorMap));
    std::printf("tensorDataType: CU_TENSOR_MAP_DATA_TYPE_FLOAT32 (4 bytes an element)\n");
    std::printf("tensorRank: 2 (1 to 5; at least 3 with interleave)\n");
    std::printf("globalAddress mod 16: %llu bytes (must be 16-byte aligned; 32 with 32-byte interleave)\n",
                static_cast<unsigned long long>(matrix % 16));
    const cuuint64_t globalDim[2] = {kCols, kRows};
    std::printf("globalDim: {%llu, %llu} (elements, dimension 0 first, the contiguous one; each 1 to 2^32)\n",
                static_cast<unsigned long long>(globalDim[0]), static_cast<unsigned long long>(globalDim[1]));
    const cuuint64_t globalStrides[1] = {kCols * sizeof(float)};
    std::printf(
        "globalStrides: {%llu} (bytes, rank - 1 of them: dimension 0's stride is the element; "
        "each a multiple of 16 and below 2^40)\n",
        static_cast<unsigned long long>(globalStrides[0]));
    const cuuint32_t boxDim[2] = {lesson20::kTileCols, lesson20::kTileRows};
    std::printf("boxDim: {%u, %u} (elements, each 1 to 256; boxDim[0] x 4 bytes = %u, a multiple of 16)\n", boxDim[0],
                boxDim[1], boxDim[0] * 4);
    const cuuint32_t elementStrides[2] = {1, 1};
    std::printf("elementStrides: {%u, %u} (1 to 8: every element; the first is ignored without interleave)\n",
                elementStrides[0], elementStrides[1]);
    std::printf("interleave: CU_TENSOR_MAP_INTERLEAVE_NONE (16B/32B: interleaved layouts such as NC/8HWC8)\n");
    std::printf(
        "swizzle: CU_TENSOR_MAP_SWIZZLE_128B (16-byte chunks within 128 bytes; the box row, %u bytes, "
        "must be at most 128)\n",
        boxDim[0] * 4);
    std::printf("l2Promotion: CU_TENSOR_MAP_L2_PROMOTION_L2_128B (L2 fills from DRAM in 128-byte requests)\n");
    std::printf("oobFill: CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE (zeros outside the matrix; NAN_REQUEST_ZERO_FMA: a NaN)\n");
    const CUresult valid = cuTensorMapEncodeTiled(
        &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, reinterpret_cast<void*>(matrix), globalDim, globalStrides, boxDim,
        elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    std::printf("cuTensorMapEncodeTiled: %s\n", course::driverErrorName(valid));
    verdict.check("the valid descriptor encodes", valid == CUDA_SUCCESS);

    // Step 4: three descriptors that break one rule each. cuda.h lists the rules and the call's
    // return codes without tying one to the other; the checks say what this driver does: it
    // refuses each when it is encoded, before any kernel could use it. REPORT_DRIVER prints its
    // report, the program goes on.
    course::printStep(4, "three wrong descriptors");
    auto refused = [](const char* what, CUresult result) {
        std::printf("%s: %s\n", what, course::driverErrorName(result));
        return result == CUDA_ERROR_INVALID_VALUE;
    };
    CUtensorMap wrong;
    // (a) The matrix seen from its second float: an address 4 bytes past a 16-byte boundary.
    const CUresult misaligned = REPORT_DRIVER(lesson20::encodeFloatMatrix(
        &wrong, matrix + sizeof(float), kCols - 1, kRows, kCols * sizeof(float), lesson20::kTileCols,
        lesson20::kTileRows, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    verdict.check("a global address off a 16-byte boundary is refused with CUDA_ERROR_INVALID_VALUE",
                  refused("globalAddress 4 bytes past the matrix's start", misaligned));
    // (b) A packed 1001-column matrix: rows 4004 bytes apart, not a multiple of 16 (cuda.h's rule).
    // Padded to 4016 bytes (the next multiple of 16) the driver accepts it, but NVIDIA's CUDA
    // Programming Guide (section 4.12.2.2.5) asks for global memory aligned to 128 bytes with any
    // swizzle mode (16 only without): an accepted encode shows what the driver checks, not that
    // the tensor is valid. Padded to 4096 bytes (a multiple of 128) it is valid by both texts.
    constexpr cuuint64_t kOddCols = 1001;
    const CUresult oddStride = REPORT_DRIVER(lesson20::encodeFloatMatrix(
        &wrong, matrix, kOddCols, kRows / 2, kOddCols * sizeof(float), lesson20::kTileCols, lesson20::kTileRows,
        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    verdict.check("a row stride that is not a multiple of 16 bytes is refused with CUDA_ERROR_INVALID_VALUE",
                  refused("globalStrides {4004} (1001 packed floats)", oddStride));
    const cuuint64_t sixteenBytes = (kOddCols * sizeof(float) + 15) / 16 * 16;
    const CUresult sixteen =
        lesson20::encodeFloatMatrix(&wrong, matrix, kOddCols, kRows / 2, sixteenBytes, lesson20::kTileCols,
                                    lesson20::kTileRows, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    std::printf("globalStrides {%llu} (padded to 16 bytes, below the guide's 128 for a swizzled map): %s\n",
                static_cast<unsigned long long>(sixteenBytes), course::driverErrorName(sixteen));
    const cuuint64_t paddedBytes = (kOddCols * sizeof(float) + 127) / 128 * 128;
    const CUresult padded =
        lesson20::encodeFloatMatrix(&wrong, matrix, kOddCols, kRows / 2, paddedBytes, lesson20::kTileCols,
                                    lesson20::kTileRows, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    std::printf("globalStrides {%llu} (the same rows padded to a multiple of 128): %s\n",
                static_cast<unsigned long long>(paddedBytes), course::driverErrorName(padded));
    verdict.check("the same matrix with rows padded to a multiple of 128 bytes encodes", padded == CUDA_SUCCESS);
    // (c) A box 64 floats wide: its rows are 256 bytes, more than the 128-byte swizzle span.
    // (Without swizzle, or with 64 x 2-byte elements, the same box would be fine.)
    const CUresult wideBox = REPORT_DRIVER(
        lesson20::encodeFloatMatrix(&wrong, matrix, kCols, kRows, kCols * sizeof(float), 64, lesson20::kTileRows,
                                    CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    verdict.check("a box row wider than the swizzle span is refused with CUDA_ERROR_INVALID_VALUE",
                  refused("boxDim {64, 32} with CU_TENSOR_MAP_SWIZZLE_128B (256-byte box rows)", wideBox));

    // Step 5: two things the call does not do. It checks the numbers, not the memory they name:
    // a host pointer is as good as device memory to it. And it wants a current context: cuda.h
    // says only that it creates a descriptor and returns it in tensorMap, and lists
    // CUDA_ERROR_INVALID_CONTEXT among its codes without saying when; these checks say what
    // this driver does (the README names it).
    course::printStep(5, "what the driver does not check, and the context it needs");
    std::vector<float> hostMatrix(kCols * kRows);  // glibc's allocations are 16-byte aligned
    const CUresult hostPointer = lesson20::encodeFloatMatrix(
        &wrong, reinterpret_cast<CUdeviceptr>(hostMatrix.data()), kCols, kRows, kCols * sizeof(float),
        lesson20::kTileCols, lesson20::kTileRows, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    std::printf("globalAddress of pageable host memory (mod 16: %llu bytes): %s\n",
                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(hostMatrix.data()) % 16),
                course::driverErrorName(hostPointer));
    verdict.check("a map of pageable host memory encodes: the driver checks numbers, not memory",
                  hostPointer == CUDA_SUCCESS);
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CUcontext current = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    std::printf("current context after cuCtxSetCurrent(NULL): %s\n", current == nullptr ? "none" : "one");
    const CUresult noContext = REPORT_DRIVER(lesson20::encodeFloatMatrix(
        &wrong, matrix, kCols, kRows, kCols * sizeof(float), lesson20::kTileCols, lesson20::kTileRows,
        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    std::printf("the valid descriptor with no current context: %s\n", course::driverErrorName(noContext));
    verdict.check("the valid descriptor with no current context is refused with CUDA_ERROR_INVALID_CONTEXT",
                  current == nullptr && noContext == CUDA_ERROR_INVALID_CONTEXT);
    CHECK_DRIVER(cuCtxSetCurrent(primary));

    // Step 6: a tensor map is a value, not a driver object: nothing to destroy. It names the
    // matrix's address, so the matrix must outlive every kernel launched with the map.
    course::printStep(6, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(matrix));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("tensor maps: nothing to release (128-byte values); matrix and primary context: released\n");
    return verdict.finish();
#else
    return course::kExitNotApplicable;
#endif
}
