// Lesson 25, program 5 — a mipmapped array: its levels (cuMipmappedArrayCreate,
// cuMipmappedArrayGetLevel), a texture that samples every one of them, and the memory a
// deferred-mapping one needs (cuMipmappedArrayGetMemoryRequirements).
//
// A mipmapped array holds one image at several resolutions, level 0 the largest. Each level is a
// CUDA array of its own that copies name by handle; a texture over the whole mipmapped array picks
// the level from the level of detail a fetch asks for (tex2DLod). Every texel of every level is
// fetched and compared with what the host wrote there.
//
//   mipmaps               the walkthrough
//   mipmaps --device N    another GPU
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "copy_helpers.h"

namespace {

constexpr size_t kWidth = 64;
constexpr size_t kHeight = 32;
constexpr unsigned int kLevels = 4;

// Texel (x, y) of level L as the host writes it: the level in the thousands, so that a fetch
// from the wrong level, or from the wrong texel, shows.
float texel(unsigned int level, size_t x, size_t y, size_t width) {
    return 1000.0f * static_cast<float>(level) + static_cast<float>(y * width + x);
}

struct Level {
    size_t width;
    size_t height;
};

struct Fetched {
    size_t right;      // values equal to the level's texel
    size_t guardKept;  // bytes of the tail guard after the values still as they were put there
};

// Fetches every texel centre of `level` through the texture (normalized coordinates, level of
// detail = level) into a buffer with a tail guard after it (copy_helpers.h): how many values came
// back as that level's texel, and whether the kernel wrote past them.
Fetched sampleEveryTexel(CUfunction sampleLevels, CUtexObject texture, unsigned int level, Level size) {
    const size_t count = size.width * size.height;
    std::vector<float> at(4 * count);
    for (size_t y = 0; y < size.height; ++y)
        for (size_t x = 0; x < size.width; ++x) {
            float* point = &at[4 * (y * size.width + x)];
            point[0] = (static_cast<float>(x) + 0.5f) / static_cast<float>(size.width);
            point[1] = (static_cast<float>(y) + 0.5f) / static_cast<float>(size.height);
            point[2] = static_cast<float>(level);
            point[3] = 0.0f;
        }
    const std::vector<unsigned char> guard = lesson25::tailGuard(6 + level);
    CUdeviceptr points = 0;
    CUdeviceptr values = 0;
    CHECK_DRIVER(cuMemAlloc(&points, at.size() * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&values, count * sizeof(float) + guard.size()));
    CHECK_DRIVER(cuMemcpyHtoD(points, at.data(), at.size() * sizeof(float)));
    lesson25::fillThenTailGuard(values, count * sizeof(float), guard, nullptr);  // the legacy stream, as the kernel
    int n = static_cast<int>(count);
    void* params[] = {&texture, &points, &values, &n};
    CHECK_DRIVER(cuLaunchKernel(sampleLevels, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    std::vector<float> got(count);
    CHECK_DRIVER(cuMemcpyDtoH(got.data(), values, count * sizeof(float)));  // after the kernel: legacy stream
    const std::vector<unsigned char> after = lesson25::download(values + count * sizeof(float), guard.size());
    Fetched fetched{0, lesson25::tailGuardKept(after.data(), guard)};
    for (size_t y = 0; y < size.height; ++y)
        for (size_t x = 0; x < size.width; ++x)
            fetched.right += got[y * size.width + x] == texel(level, x, y, size.width) ? 1 : 0;
    CHECK_DRIVER(cuMemFree(values));
    CHECK_DRIVER(cuMemFree(points));
    return fetched;
}

#if CUDA_VERSION >= 11060
// The bytes of the texels of levels 0 to `levels` - 1 of a float mipmapped array, each level's size
// from its own descriptor. `everyLevel` turns false if a level cannot be had.
size_t levelTexelBytes(CUmipmappedArray mipmap, unsigned int levels, bool& everyLevel) {
    size_t bytes = 0;
    for (unsigned int level = 0; level < levels; ++level) {
        CUarray levelArray = nullptr;
        CUDA_ARRAY3D_DESCRIPTOR levelDesc{};
        if (REPORT_DRIVER(cuMipmappedArrayGetLevel(&levelArray, mipmap, level)) != CUDA_SUCCESS ||
            REPORT_DRIVER(cuArray3DGetDescriptor(&levelDesc, levelArray)) != CUDA_SUCCESS) {
            everyLevel = false;
            continue;
        }
        bytes += levelDesc.Width * (levelDesc.Height == 0 ? 1 : levelDesc.Height) *
                 (levelDesc.Depth == 0 ? 1 : levelDesc.Depth) * levelDesc.NumChannels * sizeof(float);
    }
    return bytes;
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "initialise, load the sampling kernel");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    course::printDeviceName(ordinal, device);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("copy_kernels.fatbin").c_str()));
    CUfunction sampleLevels = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&sampleLevels, module, "sampleLevels"));
    course::Verdict verdict;

    // Step 2: four levels of a 64 x 32 float image. cuda.h does not give the size of each level:
    // the program asks each level's descriptor, and writes each level through its own handle.
    course::printStep(2, "cuMipmappedArrayCreate, four levels, each written through cuMipmappedArrayGetLevel");
    CUDA_ARRAY3D_DESCRIPTOR desc{};
    desc.Width = kWidth;
    desc.Height = kHeight;
    desc.Depth = 0;
    desc.Format = CU_AD_FORMAT_FLOAT;
    desc.NumChannels = 1;
    CUmipmappedArray mipmap = nullptr;
    CHECK_DRIVER(cuMipmappedArrayCreate(&mipmap, &desc, kLevels));
    std::vector<Level> levels;
    for (unsigned int level = 0; level < kLevels; ++level) {
        CUarray levelArray = nullptr;  // belongs to the mipmapped array: never destroyed on its own
        CHECK_DRIVER(cuMipmappedArrayGetLevel(&levelArray, mipmap, level));
        CUDA_ARRAY3D_DESCRIPTOR levelDesc{};
        CHECK_DRIVER(cuArray3DGetDescriptor(&levelDesc, levelArray));
        std::printf("level %u: %zu x %zu\n", level, levelDesc.Width, levelDesc.Height);
        const Level size{levelDesc.Width, levelDesc.Height};
        levels.push_back(size);
        std::vector<float> image(size.width * size.height);
        for (size_t y = 0; y < size.height; ++y)
            for (size_t x = 0; x < size.width; ++x) image[y * size.width + x] = texel(level, x, y, size.width);
        CUDA_MEMCPY2D copy{};
        copy.srcMemoryType = CU_MEMORYTYPE_HOST;
        copy.srcHost = image.data();
        copy.srcPitch = size.width * sizeof(float);
        copy.dstMemoryType = CU_MEMORYTYPE_ARRAY;
        copy.dstArray = levelArray;
        copy.WidthInBytes = size.width * sizeof(float);
        copy.Height = size.height;
        CHECK_DRIVER(cuMemcpy2D(&copy));
    }

    // Step 3: one texture over all levels. For a mipmapped array CU_TRSF_NORMALIZED_COORDINATES "has
    // to be set" (cuda.h:22960). Point filtering, and an integer level of detail: each fetch reads
    // one texel of one level. Every texel of all four levels is fetched.
    course::printStep(3, "a texture over the mipmapped array, every level sampled");
    CUDA_RESOURCE_DESC resource{};
    resource.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
    resource.res.mipmap.hMipmappedArray = mipmap;
    CUDA_TEXTURE_DESC textureDesc{};
    textureDesc.addressMode[0] = CU_TR_ADDRESS_MODE_CLAMP;
    textureDesc.addressMode[1] = CU_TR_ADDRESS_MODE_CLAMP;
    textureDesc.filterMode = CU_TR_FILTER_MODE_POINT;
    textureDesc.mipmapFilterMode = CU_TR_FILTER_MODE_POINT;
    textureDesc.flags = CU_TRSF_NORMALIZED_COORDINATES;
    textureDesc.minMipmapLevelClamp = 0.0f;
    textureDesc.maxMipmapLevelClamp = static_cast<float>(kLevels - 1);
    CUtexObject texture = 0;
    CHECK_DRIVER(cuTexObjectCreate(&texture, &resource, &textureDesc, nullptr));
    const char* const kLevelChecks[kLevels] = {
        "level 0 fetches return level 0's texels", "level 1 fetches return level 1's texels",
        "level 2 fetches return level 2's texels", "level 3 fetches return level 3's texels"};
    size_t guardKept = 0;  // over the four levels' tail guards
    for (unsigned int level = 0; level < kLevels; ++level) {
        const Fetched fetched = sampleEveryTexel(sampleLevels, texture, level, levels[level]);
        const size_t count = levels[level].width * levels[level].height;
        std::printf("level %u fetches equal to its texels: %zu of %zu\n", level, fetched.right, count);
        verdict.check(kLevelChecks[level], fetched.right == count);
        guardKept += fetched.guardKept;
    }
    std::printf("tail guard bytes after the fetched values intact: %zu of %zu\n", guardKept,
                kLevels * lesson25::kTailGuard);
    verdict.check("the kernel wrote nothing past the fetched values", guardKept == kLevels * lesson25::kTailGuard);

    // Step 4: the memory a mipmapped array needs, asked of one created with
    // CUDA_ARRAY3D_DEFERRED_MAPPING (any other: CUDA_ERROR_INVALID_VALUE, cuda.h:11967-11968): its
    // "total size" and "the alignment necessary for mapping" it (cuda.h:11970-11974). It is
    // 1024 x 1024 floats, so that its levels (4 MiB for level 0) are far above any alignment. cuda.h
    // does not give the levels' sizes: the program asks each level's descriptor, and holds the
    // requirement to the texels of all four. The alignment is shown; cuda.h says nothing of its form.
    // The count itself is held to the one size the program knows: a mipmapped array's descriptor
    // describes its base level (cuda.h:16445-16448, of the external-memory form, which refers to
    // cuMipmappedArrayCreate), the most detailed, "mipmap level zero" (cuda.h:23020); so level 0's
    // texels, counted from its own descriptor, are the 1024 x 1024 floats asked for.
    course::printStep(4, "cuMipmappedArrayGetMemoryRequirements of a deferred-mapping mipmapped array");
    const char* const kCovers = "the requirement holds the texels of all four levels, sized from their descriptors";
    const char* const kRefused = "a mipmapped array without deferred mapping has no requirements to give";
#if CUDA_VERSION >= 11060
    int deferred = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&deferred, CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED, device));
    std::printf("CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED: %d\n", deferred);
    if (deferred == 0) {
        lesson25::skipCheck(kCovers, "no deferred-mapping arrays on this device");
        lesson25::skipCheck(kRefused, "no deferred-mapping arrays on this device");
    } else {
        CUDA_ARRAY3D_DESCRIPTOR deferredDesc = desc;
        deferredDesc.Width = 1024;
        deferredDesc.Height = 1024;
        deferredDesc.Flags = CUDA_ARRAY3D_DEFERRED_MAPPING;
        CUmipmappedArray unmapped = nullptr;  // no memory behind it until cuMemMapArrayAsync
        CHECK_DRIVER(cuMipmappedArrayCreate(&unmapped, &deferredDesc, kLevels));
        CUDA_ARRAY_MEMORY_REQUIREMENTS needs{};
        CHECK_DRIVER(cuMipmappedArrayGetMemoryRequirements(&needs, unmapped, device));
        bool everyLevel = true;  // a level the array does not have: CUDA_ERROR_INVALID_VALUE (cuda.h:12503-12504)
        const size_t levelZeroBytes = levelTexelBytes(unmapped, 1, everyLevel);
        const size_t texelBytes = levelTexelBytes(unmapped, kLevels, everyLevel);
        const size_t askedBytes = deferredDesc.Width * deferredDesc.Height * sizeof(float);
        std::printf("memory requirements of 1024 x 1024, %u levels: %zu bytes, aligned to %zu bytes\n", kLevels,
                    needs.size, needs.alignment);
        std::printf("texels of level 0, from its descriptor: %zu bytes (1024 x 1024 floats: %zu)\n", levelZeroBytes,
                    askedBytes);
        std::printf("texels of the %u levels, from their descriptors: %zu bytes\n", kLevels, texelBytes);
        verdict.check(kCovers, everyLevel && levelZeroBytes == askedBytes && needs.size >= texelBytes);
        CUDA_ARRAY_MEMORY_REQUIREMENTS none{};
        const CUresult refused = REPORT_DRIVER(cuMipmappedArrayGetMemoryRequirements(&none, mipmap, device));
        std::printf("cuMipmappedArrayGetMemoryRequirements of the step-2 array: %s\n",
                    course::driverErrorName(refused));
        verdict.check(kRefused, refused == CUDA_ERROR_INVALID_VALUE);
        CHECK_DRIVER(cuMipmappedArrayDestroy(unmapped));
    }
#else
    std::printf("CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED: not in these headers\n");
    lesson25::skipCheck(kCovers, "built with headers older than CUDA 11.6");
    lesson25::skipCheck(kRefused, "built with headers older than CUDA 11.6");
#endif

    // Step 5: release, newest first. The level arrays came from the mipmapped array, and cuda.h
    // names no call that releases one of them: the program destroys the mipmapped array only.
    course::printStep(5, "release everything, newest first");
    CHECK_DRIVER(cuTexObjectDestroy(texture));
    CHECK_DRIVER(cuMipmappedArrayDestroy(mipmap));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: texture, mipmapped array, module, primary context\n");

    course::printStep(6, "check");
    return verdict.finish();
}
