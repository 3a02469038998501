// Lesson 25, program 6 — CUDA arrays whose memory the program supplies: a deferred-mapping array
// (cuArrayGetMemoryRequirements, then cuMemMapArrayAsync), and sparse arrays
// (cuArrayGetSparseProperties, cuMipmappedArrayGetSparseProperties, one tile mapped).
//
// A CUDA array created with CUDA_ARRAY3D_DEFERRED_MAPPING or CUDA_ARRAY3D_SPARSE has no memory of
// its own. cuMemMapArrayAsync maps memory from cuMemCreate (lesson 11) into it: all of it at once
// for a deferred-mapping array, tile by tile for a sparse one. The allocation must be made with
// CU_MEM_CREATE_USAGE_TILE_POOL (cuda.h:13029).
//
//   deferred_and_sparse               the walkthrough
//   deferred_and_sparse --device N    another GPU
#include <cuda.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "copy_helpers.h"

namespace {

// A tile pool of at least `bytes`, in whole allocation granules and in whole `alignment`s.
CUmemGenericAllocationHandle tilePool(int ordinal, size_t bytes, size_t alignment) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal;
    prop.allocFlags.usage = CU_MEM_CREATE_USAGE_TILE_POOL;
    size_t granularity = 0;
    CHECK_DRIVER(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    const size_t unit = granularity > alignment ? granularity : alignment;
    const size_t size = (bytes + unit - 1) / unit * unit;
    CUmemGenericAllocationHandle handle = 0;
    CHECK_DRIVER(cuMemCreate(&handle, size, &prop, 0));
    std::printf("tile pool: %zu bytes (granularity %zu)\n", size, granularity);
    return handle;
}

// A width x height float image of test data `seed`, from the host into the array at (x, y).
// Returns what was written.
std::vector<unsigned char> copyIntoArray(CUarray array, size_t x, size_t y, size_t width, size_t height,
                                         unsigned seed) {
    std::vector<unsigned char> data = lesson25::pattern(width * height * sizeof(float), seed);
    CUDA_MEMCPY2D in{};
    in.srcMemoryType = CU_MEMORYTYPE_HOST;
    in.srcHost = data.data();
    in.srcPitch = width * sizeof(float);
    in.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    in.dstArray = array;
    in.dstXInBytes = x * sizeof(float);
    in.dstY = y;
    in.WidthInBytes = width * sizeof(float);
    in.Height = height;
    CHECK_DRIVER(cuMemcpy2D(&in));
    return data;
}

// The same rectangle back from the array: the bytes that differ from `data`.
size_t differencesInArray(CUarray array, size_t x, size_t y, size_t width, size_t height,
                          const std::vector<unsigned char>& data) {
    std::vector<unsigned char> back(data.size(), lesson25::kFill);
    CUDA_MEMCPY2D out{};
    out.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    out.srcArray = array;
    out.srcXInBytes = x * sizeof(float);
    out.srcY = y;
    out.dstMemoryType = CU_MEMORYTYPE_HOST;
    out.dstHost = back.data();
    out.dstPitch = width * sizeof(float);
    out.WidthInBytes = width * sizeof(float);
    out.Height = height;
    CHECK_DRIVER(cuMemcpy2D(&out));
    return lesson25::differences(back.data(), data.data(), data.size());
}

CUDA_ARRAY3D_DESCRIPTOR floatImage(size_t width, size_t height, unsigned int flags) {
    CUDA_ARRAY3D_DESCRIPTOR desc{};
    desc.Width = width;
    desc.Height = height;
    desc.Depth = 0;
    desc.Format = CU_AD_FORMAT_FLOAT;
    desc.NumChannels = 1;
    desc.Flags = flags;
    return desc;
}

// Steps 2 and 3: a 2048 x 1024 float array with deferred mapping: what it needs, then that memory
// mapped into it, an image copied in and out as with any array, and the memory unmapped.
void deferredMapping(course::Verdict& verdict, int ordinal, CUdevice device, CUstream stream) {
    const char* const kCovers = "the requirement covers every texel";
    const char* const kRefused = "an array without deferred mapping has no requirements to give";
    const char* const kMapped = "the mapped deferred array holds what was copied into it";
#if CUDA_VERSION >= 11060
    int supported = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED, device));
    std::printf("CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED: %d\n", supported);
    if (supported != 0) {
        constexpr size_t kTexelBytes = 2048 * 1024 * sizeof(float);  // 8 MiB: far above any alignment
        const CUDA_ARRAY3D_DESCRIPTOR desc = floatImage(2048, 1024, CUDA_ARRAY3D_DEFERRED_MAPPING);
        CUarray deferred = nullptr;
        CHECK_DRIVER(cuArray3DCreate(&deferred, &desc));
        CUDA_ARRAY_MEMORY_REQUIREMENTS needs{};
        CHECK_DRIVER(cuArrayGetMemoryRequirements(&needs, deferred, device));
        // "size represents the total size of the CUDA array", "alignment ... the alignment necessary
        // for mapping" it (cuda.h:11947-11950): the size is held to the texels, the alignment shown.
        std::printf("memory requirements: %zu bytes, aligned to %zu bytes (texels: %zu bytes)\n", needs.size,
                    needs.alignment, kTexelBytes);
        verdict.check(kCovers, needs.size >= kTexelBytes);
        // "If the CUDA array is not allocated with flag CUDA_ARRAY3D_DEFERRED_MAPPING
        // CUDA_ERROR_INVALID_VALUE will be returned" (cuda.h:11944-11945).
        const CUDA_ARRAY3D_DESCRIPTOR plainDesc = floatImage(2048, 1024, 0);
        CUarray plain = nullptr;
        CHECK_DRIVER(cuArray3DCreate(&plain, &plainDesc));
        CUDA_ARRAY_MEMORY_REQUIREMENTS none{};
        const CUresult refused = REPORT_DRIVER(cuArrayGetMemoryRequirements(&none, plain, device));
        std::printf("cuArrayGetMemoryRequirements of an ordinary array: %s\n", course::driverErrorName(refused));
        verdict.check(kRefused, refused == CUDA_ERROR_INVALID_VALUE);
        CHECK_DRIVER(cuArrayDestroy(plain));

        course::printStep(3, "map a tile pool into the deferred array, use it, unmap it");
        const CUmemGenericAllocationHandle pool = tilePool(ordinal, needs.size, needs.alignment);
        CUarrayMapInfo map{};
        map.resourceType = CU_RESOURCE_TYPE_ARRAY;
        map.resource.array = deferred;  // the subresource is ignored for deferred mapping (cuda.h:13017-13018)
        map.memOperationType = CU_MEM_OPERATION_TYPE_MAP;
        map.memHandleType = CU_MEM_HANDLE_TYPE_GENERIC;
        map.memHandle.memHandle = pool;
        map.offset = 0;
        map.deviceBitMask = 1u << ordinal;  // exactly one bit: the stream's device
        CHECK_DRIVER(cuMemMapArrayAsync(&map, 1, stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
        const std::vector<unsigned char> image = copyIntoArray(deferred, 0, 0, desc.Width, desc.Height, 16);
        const size_t wrong = differencesInArray(deferred, 0, 0, desc.Width, desc.Height, image);
        std::printf("texels back from the mapped array: %zu of %zu bytes\n", image.size() - wrong, image.size());
        verdict.check(kMapped, wrong == 0);
        map.memOperationType = CU_MEM_OPERATION_TYPE_UNMAP;
        map.memHandle.memHandle = 0;  // "must be NULL" to unmap
        CHECK_DRIVER(cuMemMapArrayAsync(&map, 1, stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
        CHECK_DRIVER(cuMemRelease(pool));
        CHECK_DRIVER(cuArrayDestroy(deferred));
        return;
    }
    const std::string reason = "no deferred-mapping arrays on this device";
#else
    (void)verdict, (void)ordinal, (void)device, (void)stream;
    std::printf("CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED: not in these headers\n");
    const std::string reason = "built with headers older than CUDA 11.6";
#endif
    lesson25::skipCheck(kCovers, reason);
    lesson25::skipCheck(kRefused, reason);
    course::printStep(3, "map a tile pool into the deferred array, use it, unmap it");
    lesson25::skipCheck(kMapped, reason);
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

    course::printStep(2, "cuArrayGetMemoryRequirements of a deferred-mapping array");
    deferredMapping(verdict, ordinal, device, stream);

    // Step 4: sparse arrays. A sparse array is mapped in tiles; its properties give the tile.
    course::printStep(4, "cuArrayGetSparseProperties and cuMipmappedArrayGetSparseProperties");
    const char* const kArrayProps =
        "the sparse array has a tile, mip tail from level 0, of size 0 unless SINGLE_MIPTAIL";
    const char* const kTail = "the mip tail starts at the first level smaller than a tile";
    const char* const kTile = "the mapped tile holds what was copied into it";
    int sparse = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&sparse, CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED, device));
    std::printf("CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED: %d\n", sparse);
    if (sparse == 0) {
        lesson25::skipCheck(kArrayProps, "no sparse arrays on this device");
        lesson25::skipCheck(kTail, "no sparse arrays on this device");
        course::printStep(5, "map one tile of the sparse array, use it, unmap it");
        lesson25::skipCheck(kTile, "no sparse arrays on this device");
    } else {
        // A sparse 1024 x 1024 float array, and a sparse mipmapped 1024 x 256 one down to 1 x 1. The
        // mipmapped one is not square: its levels' height falls below a tile's before their width
        // does, so where its mip tail starts tells "width, height or depth" from "width and height".
        constexpr unsigned int kSparseLevels = 11;  // 1024, 512, ..., 1 wide
        const CUDA_ARRAY3D_DESCRIPTOR sparseDesc = floatImage(1024, 1024, CUDA_ARRAY3D_SPARSE);
        CUarray sparseArray = nullptr;
        CHECK_DRIVER(cuArray3DCreate(&sparseArray, &sparseDesc));
        const CUDA_ARRAY3D_DESCRIPTOR sparseMipDesc = floatImage(1024, 256, CUDA_ARRAY3D_SPARSE);
        CUmipmappedArray sparseMipmap = nullptr;
        CHECK_DRIVER(cuMipmappedArrayCreate(&sparseMipmap, &sparseMipDesc, kSparseLevels));
        // For a sparse array that is not mipmapped, miptailSize is "the total size of the array" if
        // flags has CU_ARRAY_SPARSE_PROPERTIES_SINGLE_MIPTAIL, "Otherwise, it will be zero", and
        // "miptailFirstLevel is always zero" (cuda.h:11898-11900); flags "will either be zero or
        // CU_ARRAY_SPARSE_PROPERTIES_SINGLE_MIPTAIL" (cuda.h:3460). The fields start as values the
        // driver cannot return (no tile, every bit of flags, of miptailFirstLevel and of miptailSize
        // set), so that a field left unwritten, or an answer about another array, fails the check
        // whichever way flags comes back.
        constexpr unsigned long long kUnwritten = ~0ull;
        CUDA_ARRAY_SPARSE_PROPERTIES props{};
        props.flags = ~0u;
        props.miptailFirstLevel = ~0u;
        props.miptailSize = kUnwritten;
        CHECK_DRIVER(cuArrayGetSparseProperties(&props, sparseArray));
        const unsigned int tileW = props.tileExtent.width;
        const unsigned int tileH = props.tileExtent.height;
        const bool singleMiptail = props.flags == CU_ARRAY_SPARSE_PROPERTIES_SINGLE_MIPTAIL;
        std::printf(
            "sparse 1024 x 1024 float array: tile %u x %u x %u, mip tail from level %u, %llu bytes, "
            "SINGLE_MIPTAIL %s\n",
            tileW, tileH, props.tileExtent.depth, props.miptailFirstLevel, props.miptailSize,
            lesson25::yesNo(singleMiptail));
        const bool flagsAnswered = props.flags == 0 || singleMiptail;
        const bool sizeAnswered =
            singleMiptail ? props.miptailSize != 0 && props.miptailSize != kUnwritten : props.miptailSize == 0;
        verdict.check(kArrayProps,
                      tileW > 0 && tileH > 0 && props.miptailFirstLevel == 0 && flagsAnswered && sizeAnswered);

        // "The mip tail region includes all mip levels whose width, height or depth is less than that
        // of the tile" (cuda.h:11923-11924); 2-D levels report a depth of 0, so width and height decide.
        CUDA_ARRAY_SPARSE_PROPERTIES mipProps{};
        CHECK_DRIVER(cuMipmappedArrayGetSparseProperties(&mipProps, sparseMipmap));
        std::printf("sparse mipmapped 1024 x 256 float array: mip tail from level %u, %llu bytes\n",
                    mipProps.miptailFirstLevel, mipProps.miptailSize);
        bool tailWhereSmaller = mipProps.miptailSize != 0 && mipProps.miptailFirstLevel < kSparseLevels;
        for (unsigned int level = 0; tailWhereSmaller && level <= mipProps.miptailFirstLevel; ++level) {
            CUarray levelArray = nullptr;
            CHECK_DRIVER(cuMipmappedArrayGetLevel(&levelArray, sparseMipmap, level));
            CUDA_ARRAY3D_DESCRIPTOR levelDesc{};
            CHECK_DRIVER(cuArray3DGetDescriptor(&levelDesc, levelArray));
            const bool smaller =
                levelDesc.Width < mipProps.tileExtent.width || levelDesc.Height < mipProps.tileExtent.height;
            tailWhereSmaller = smaller == (level == mipProps.miptailFirstLevel);
        }
        verdict.check(kTail, tailWhereSmaller);

        // Step 5: one tile, at tile (1, 1) of level 0, mapped onto a tile pool. "These offsets and
        // extents must be aligned to the corresponding tile dimension" (cuda.h:13000).
        course::printStep(5, "map one tile of the sparse array, use it, unmap it");
        const CUmemGenericAllocationHandle pool = tilePool(ordinal, size_t{tileW} * tileH * sizeof(float), 0);
        CUarrayMapInfo map{};
        map.resourceType = CU_RESOURCE_TYPE_ARRAY;
        map.resource.array = sparseArray;
        map.subresourceType = CU_ARRAY_SPARSE_SUBRESOURCE_TYPE_SPARSE_LEVEL;
        map.subresource.sparseLevel.offsetX = tileW;
        map.subresource.sparseLevel.offsetY = tileH;
        map.subresource.sparseLevel.extentWidth = tileW;
        map.subresource.sparseLevel.extentHeight = tileH;
        map.subresource.sparseLevel.extentDepth = 1;  // "must be set to 1" for 2-D arrays
        map.memOperationType = CU_MEM_OPERATION_TYPE_MAP;
        map.memHandleType = CU_MEM_HANDLE_TYPE_GENERIC;
        map.memHandle.memHandle = pool;
        map.deviceBitMask = 1u << ordinal;
        CHECK_DRIVER(cuMemMapArrayAsync(&map, 1, stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
        const std::vector<unsigned char> tile = copyIntoArray(sparseArray, tileW, tileH, tileW, tileH, 17);
        const size_t wrong = differencesInArray(sparseArray, tileW, tileH, tileW, tileH, tile);
        std::printf("bytes back from the mapped tile: %zu of %zu\n", tile.size() - wrong, tile.size());
        verdict.check(kTile, wrong == 0);
        map.memOperationType = CU_MEM_OPERATION_TYPE_UNMAP;
        map.memHandle.memHandle = 0;
        CHECK_DRIVER(cuMemMapArrayAsync(&map, 1, stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
        CHECK_DRIVER(cuMemRelease(pool));
        CHECK_DRIVER(cuMipmappedArrayDestroy(sparseMipmap));
        CHECK_DRIVER(cuArrayDestroy(sparseArray));
    }

    course::printStep(6, "release everything, newest first");
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: stream, primary context (each step freed its own arrays and tile pools)\n");

    course::printStep(7, "check");
    return verdict.finish();
}
