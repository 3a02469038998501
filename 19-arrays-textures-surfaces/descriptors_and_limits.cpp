// Lesson 19, program 6 of 6 — what the driver gives back: the descriptors of CUDA arrays, texture and
// surface objects read back and compared with what they were made from, the widest 1D texture over
// linear memory, and the memory an array holds until cuArrayDestroy.
//
// The Get calls return the driver's copy of what each object was made from: how code that receives a
// handle learns its shape. Step 6 compares free device memory: the tests run it with nothing beside it.
//
//   descriptors_and_limits [--device N]
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "texture_helpers.h"

namespace {

// The 2D array of step 2 (300 x 200 texels of two 16-bit channels) and the volume of step 3.
constexpr size_t kWidth = 300;
constexpr size_t kHeight = 200;
constexpr size_t kDepth = 6;
constexpr size_t kLine = 4096;  // the 1D array's width: Height 0 makes an array one-dimensional
// Step 6's array: 4096 x 4096 texels of four floats, 256 MiB.
constexpr size_t kBigSide = 4096;
constexpr size_t kBigBytes = kBigSide * kBigSide * 4 * sizeof(float);

bool sameArray(const CUDA_ARRAY_DESCRIPTOR& got, const CUDA_ARRAY_DESCRIPTOR& asked) {
    return got.Width == asked.Width && got.Height == asked.Height && got.Format == asked.Format &&
           got.NumChannels == asked.NumChannels;
}

bool sameArray3D(const CUDA_ARRAY3D_DESCRIPTOR& got, const CUDA_ARRAY3D_DESCRIPTOR& asked) {
    return got.Width == asked.Width && got.Height == asked.Height && got.Depth == asked.Depth &&
           got.Format == asked.Format && got.NumChannels == asked.NumChannels && got.Flags == asked.Flags;
}

// 16-bit texels, neighbours all different: texel i holds i * 7 + 3, modulo 65536.
std::vector<unsigned short> pattern(size_t count) {
    std::vector<unsigned short> values(count);
    for (size_t i = 0; i < count; ++i) values[i] = static_cast<unsigned short>(i * 7 + 3);
    return values;
}

// The 2D array's texels, read back into tightly packed host rows that start as 0xffff.
std::vector<unsigned short> imageOf(CUarray image, size_t rowBytes) {
    std::vector<unsigned short> back(rowBytes / sizeof(unsigned short) * kHeight, 0xffff);
    CUDA_MEMCPY2D out{};
    out.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    out.srcArray = image;
    out.dstMemoryType = CU_MEMORYTYPE_HOST;
    out.dstHost = back.data();
    out.dstPitch = rowBytes;
    out.WidthInBytes = rowBytes;
    out.Height = kHeight;
    CHECK_DRIVER(cuMemcpy2D(&out));
    return back;
}

// A tightly packed host volume (kDepth slices of `rowBytes` x kHeight) into or out of a 3D array.
void copyVolume(CUarray array, void* host, size_t rowBytes, bool toArray) {
    CUDA_MEMCPY3D copy{};
    if (toArray) {
        copy.srcMemoryType = CU_MEMORYTYPE_HOST;
        copy.srcHost = host;
        copy.srcPitch = rowBytes;
        copy.srcHeight = kHeight;
        copy.dstMemoryType = CU_MEMORYTYPE_ARRAY;
        copy.dstArray = array;
    } else {
        copy.srcMemoryType = CU_MEMORYTYPE_ARRAY;
        copy.srcArray = array;
        copy.dstMemoryType = CU_MEMORYTYPE_HOST;
        copy.dstHost = host;
        copy.dstPitch = rowBytes;
        copy.dstHeight = kHeight;
    }
    copy.WidthInBytes = rowBytes;
    copy.Height = kHeight;
    copy.Depth = kDepth;
    CHECK_DRIVER(cuMemcpy3D(&copy));
}

// Step 5: the widest 1D texture over linear memory that cuDeviceGetTexture1DLinearMaxWidth allows
// for one 8-bit channel, then one element more. cuTexObjectCreate: the number of elements "cannot
// exceed" the limit; the check asks only that it is refused.
void linearLimit(course::Verdict& verdict, CUdevice device) {
    const char* const kAccepted = "a 1D linear texture exactly as wide as the limit is accepted";
    const char* const kRefused = "one element more is refused";
    size_t maxWidth = 0;
    CHECK_DRIVER(cuDeviceGetTexture1DLinearMaxWidth(&maxWidth, CU_AD_FORMAT_UNSIGNED_INT8, 1, device));
    std::printf("cuDeviceGetTexture1DLinearMaxWidth (8-bit, 1 channel) in elements: %zu\n", maxWidth);
    size_t freeBytes = 0;
    size_t total = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &total));
    if (maxWidth + 1 > freeBytes / 2) {  // a buffer for maxWidth + 1 bytes must fit with room to spare
        std::printf("check %s: SKIP (needs %zu bytes, %zu free)\n", kAccepted, maxWidth + 1, freeBytes);
        std::printf("check %s: SKIP (needs %zu bytes, %zu free)\n", kRefused, maxWidth + 1, freeBytes);
        return;
    }
    CUdeviceptr bytes = 0;
    CHECK_DRIVER(cuMemAlloc(&bytes, maxWidth + 1));  // room for both textures: the refusal is the size alone
    CUDA_RESOURCE_DESC resource{};
    resource.resType = CU_RESOURCE_TYPE_LINEAR;
    resource.res.linear.devPtr = bytes;
    resource.res.linear.format = CU_AD_FORMAT_UNSIGNED_INT8;
    resource.res.linear.numChannels = 1;
    resource.res.linear.sizeInBytes = maxWidth;  // elements = sizeInBytes / (1 byte x 1 channel)
    const CUDA_TEXTURE_DESC texture = lesson19::textureDesc(CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, 0);
    CUtexObject widest = 0;
    const CUresult atLimit = REPORT_DRIVER(cuTexObjectCreate(&widest, &resource, &texture, nullptr));
    std::printf("cuTexObjectCreate at the limit: %s\n", course::driverErrorName(atLimit));
    verdict.check(kAccepted, atLimit == CUDA_SUCCESS);
    if (atLimit == CUDA_SUCCESS) CHECK_DRIVER(cuTexObjectDestroy(widest));
    resource.res.linear.sizeInBytes = maxWidth + 1;
    CUtexObject tooWide = 0;
    const CUresult pastLimit = REPORT_DRIVER(cuTexObjectCreate(&tooWide, &resource, &texture, nullptr));
    std::printf("cuTexObjectCreate one element past the limit: %s\n", course::driverErrorName(pastLimit));
    verdict.check(kRefused, pastLimit != CUDA_SUCCESS);
    if (pastLimit == CUDA_SUCCESS) CHECK_DRIVER(cuTexObjectDestroy(tooWide));
    CHECK_DRIVER(cuMemFree(bytes));
}

// Step 6: free device memory before and after a 256 MiB array is made, and after it is destroyed.
// Other work on the GPU can move the figure, so each check asks for three quarters of the size.
void arrayMemory(course::Verdict& verdict) {
    size_t before = 0;
    size_t made = 0;
    size_t after = 0;
    size_t total = 0;
    CHECK_DRIVER(cuMemGetInfo(&before, &total));
    CUDA_ARRAY_DESCRIPTOR desc{};
    desc.Width = kBigSide;
    desc.Height = kBigSide;
    desc.Format = CU_AD_FORMAT_FLOAT;
    desc.NumChannels = 4;
    CUarray big = nullptr;
    CHECK_DRIVER(cuArrayCreate(&big, &desc));
    CHECK_DRIVER(cuMemGetInfo(&made, &total));
    CHECK_DRIVER(cuArrayDestroy(big));
    CHECK_DRIVER(cuMemGetInfo(&after, &total));
    const size_t taken = before > made ? before - made : 0;
    const size_t given = after > made ? after - made : 0;
    std::printf("array of %zu MiB: free memory fell by 3/4 of it or more: %s; came back by 3/4 or more: %s\n",
                kBigBytes >> 20, taken >= kBigBytes / 4 * 3 ? "yes" : "no", given >= kBigBytes / 4 * 3 ? "yes" : "no");
    verdict.checkFreeMemory("a 256 MiB array takes its memory from the device", taken >= kBigBytes / 4 * 3);
    verdict.checkFreeMemory("cuArrayDestroy gives the array's memory back", given >= kBigBytes / 4 * 3);
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    course::printStep(1, "initialise the driver and the primary context");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", ordinal, name);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));

    // Step 2: cuArrayCreate makes a 1D array when Height is 0, a 2D one otherwise. A descriptor that
    // does not come back as asked ends the program: the copies below assume the shape.
    course::printStep(2, "cuArrayCreate: a 1D and a 2D array, their descriptors read back, an image through one");
    CUDA_ARRAY_DESCRIPTOR lineDesc{};
    lineDesc.Width = kLine;
    lineDesc.Height = 0;
    lineDesc.Format = CU_AD_FORMAT_FLOAT;
    lineDesc.NumChannels = 1;
    CUDA_ARRAY_DESCRIPTOR imageDesc{};
    imageDesc.Width = kWidth;
    imageDesc.Height = kHeight;
    imageDesc.Format = CU_AD_FORMAT_UNSIGNED_INT16;
    imageDesc.NumChannels = 2;
    CUarray line = nullptr;
    CHECK_DRIVER(cuArrayCreate(&line, &lineDesc));
    CUarray image = nullptr;
    CHECK_DRIVER(cuArrayCreate(&image, &imageDesc));
    CUDA_ARRAY_DESCRIPTOR got{};
    CHECK_DRIVER(cuArrayGetDescriptor(&got, line));
    std::printf("1D array: %zu x %zu, format %d, %u channel(s)\n", got.Width, got.Height, got.Format, got.NumChannels);
    const bool lineAsAsked = verdict.check("the 1D array reads back as asked, Height 0", sameArray(got, lineDesc));
    CHECK_DRIVER(cuArrayGetDescriptor(&got, image));
    std::printf("2D array: %zu x %zu, format %d, %u channel(s)\n", got.Width, got.Height, got.Format, got.NumChannels);
    if (!verdict.check("the 2D array reads back as asked", sameArray(got, imageDesc)) || !lineAsAsked)
        return verdict.finish();  // the process ends here, and its handles with it
    const size_t rowBytes = kWidth * 2 * sizeof(unsigned short);
    const std::vector<unsigned short> picture = pattern(kWidth * 2 * kHeight);
    lesson19::copyToArray(image, picture.data(), rowBytes, kHeight);
    verdict.check("the image comes back from the 2D array exactly", imageOf(image, rowBytes) == picture);

    // Step 3: cuArray3DCreate: a volume, and a 2D array (Depth 0) with the flag surfaces need.
    course::printStep(3, "cuArray3DCreate: a volume and a surface array, their descriptors read back");
    CUDA_ARRAY3D_DESCRIPTOR volumeDesc{};
    volumeDesc.Width = kWidth;
    volumeDesc.Height = kHeight;
    volumeDesc.Depth = kDepth;
    volumeDesc.Format = CU_AD_FORMAT_UNSIGNED_INT16;
    volumeDesc.NumChannels = 1;
    CUDA_ARRAY3D_DESCRIPTOR surfaceDesc{};
    surfaceDesc.Width = kWidth;
    surfaceDesc.Height = kHeight;
    surfaceDesc.Format = CU_AD_FORMAT_FLOAT;
    surfaceDesc.NumChannels = 1;
    surfaceDesc.Flags = CUDA_ARRAY3D_SURFACE_LDST;
    CUarray volume = nullptr;
    CHECK_DRIVER(cuArray3DCreate(&volume, &volumeDesc));
    CUarray canvas = nullptr;
    CHECK_DRIVER(cuArray3DCreate(&canvas, &surfaceDesc));
    CUDA_ARRAY3D_DESCRIPTOR got3D{};
    CHECK_DRIVER(cuArray3DGetDescriptor(&got3D, volume));
    std::printf("volume: %zu x %zu x %zu, flags %u\n", got3D.Width, got3D.Height, got3D.Depth, got3D.Flags);
    const bool volumeAsAsked = verdict.check("the volume reads back as asked", sameArray3D(got3D, volumeDesc));
    CHECK_DRIVER(cuArray3DGetDescriptor(&got3D, canvas));
    std::printf("surface array: %zu x %zu x %zu, flags %u\n", got3D.Width, got3D.Height, got3D.Depth, got3D.Flags);
    if (!verdict.check("the surface array reads back as asked, with CUDA_ARRAY3D_SURFACE_LDST",
                       sameArray3D(got3D, surfaceDesc)) ||
        !volumeAsAsked)
        return verdict.finish();
    std::vector<unsigned short> slices = pattern(kWidth * kHeight * kDepth);
    copyVolume(volume, slices.data(), kWidth * sizeof(unsigned short), true);
    std::vector<unsigned short> slicesBack(slices.size(), 0xffff);
    copyVolume(volume, slicesBack.data(), kWidth * sizeof(unsigned short), false);
    verdict.check("the volume comes back from the 3D array exactly", slicesBack == slices);

    // Step 4: a texture over the image with a resource view, one without, and a surface; what each
    // was made from comes back field by field. cuda.h: "If no resource view was set for texObject,
    // the CUDA_ERROR_INVALID_VALUE is returned."
    course::printStep(4, "texture and surface objects: what they were made from comes back");
    const CUDA_RESOURCE_DESC imageResource = lesson19::arrayResource(image);
    const CUDA_TEXTURE_DESC asked = lesson19::textureDesc(CU_TR_ADDRESS_MODE_MIRROR, CU_TR_FILTER_MODE_POINT,
                                                          CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_READ_AS_INTEGER);
    CUDA_RESOURCE_VIEW_DESC view{};
    view.format = CU_RES_VIEW_FORMAT_UINT_2X16;  // the array's own format: width and height must match
    view.width = kWidth;
    view.height = kHeight;
    CUtexObject viewed = 0;
    CHECK_DRIVER(cuTexObjectCreate(&viewed, &imageResource, &asked, &view));
    CUtexObject plain = 0;
    CHECK_DRIVER(cuTexObjectCreate(&plain, &imageResource, &asked, nullptr));
    CUDA_RESOURCE_DESC resourceBack{};
    CHECK_DRIVER(cuTexObjectGetResourceDesc(&resourceBack, viewed));
    verdict.check("cuTexObjectGetResourceDesc gives back the image array",
                  resourceBack.resType == CU_RESOURCE_TYPE_ARRAY && resourceBack.res.array.hArray == image);
    CUDA_TEXTURE_DESC textureBack{};
    std::memset(&textureBack, 0xff, sizeof(textureBack));  // no field holds the answer before the call
    CHECK_DRIVER(cuTexObjectGetTextureDesc(&textureBack, viewed));
    std::printf("texture: address modes %d %d, filter %d, flags 0x%x\n", textureBack.addressMode[0],
                textureBack.addressMode[1], textureBack.filterMode, textureBack.flags);
    verdict.check("cuTexObjectGetTextureDesc gives back the address modes, filter and flags",
                  textureBack.addressMode[0] == asked.addressMode[0] &&
                      textureBack.addressMode[1] == asked.addressMode[1] &&
                      textureBack.filterMode == asked.filterMode && textureBack.flags == asked.flags);
    CUDA_RESOURCE_VIEW_DESC viewBack{};
    CHECK_DRIVER(cuTexObjectGetResourceViewDesc(&viewBack, viewed));
    std::printf("resource view: format %d, %zu x %zu x %zu\n", viewBack.format, viewBack.width, viewBack.height,
                viewBack.depth);
    verdict.check("cuTexObjectGetResourceViewDesc gives back the view's format and size",
                  viewBack.format == view.format && viewBack.width == view.width && viewBack.height == view.height &&
                      viewBack.depth == view.depth);
    // cuda.h: "If no resource view was set for texObject, the CUDA_ERROR_INVALID_VALUE is
    // returned." What this driver answers is printed beside it, not checked.
    CUDA_RESOURCE_VIEW_DESC noView{};
    const CUresult withoutView = cuTexObjectGetResourceViewDesc(&noView, plain);
    std::printf("cuTexObjectGetResourceViewDesc of a texture made without a view: %s (cuda.h: CUDA_ERROR_INVALID_VALUE)\n",
                course::driverErrorName(withoutView));
    const CUDA_RESOURCE_DESC canvasResource = lesson19::arrayResource(canvas);
    CUsurfObject surface = 0;
    CHECK_DRIVER(cuSurfObjectCreate(&surface, &canvasResource));
    CUDA_RESOURCE_DESC surfaceBack{};
    CHECK_DRIVER(cuSurfObjectGetResourceDesc(&surfaceBack, surface));
    verdict.check("cuSurfObjectGetResourceDesc gives back the surface array",
                  surfaceBack.resType == CU_RESOURCE_TYPE_ARRAY && surfaceBack.res.array.hArray == canvas);

    course::printStep(5, "the widest 1D texture over linear memory (cuDeviceGetTexture1DLinearMaxWidth)");
    linearLimit(verdict, device);

    course::printStep(6, "cuArrayDestroy gives a 256 MiB array's memory back (cuMemGetInfo)");
    arrayMemory(verdict);

    // Step 7: the objects before the arrays they describe.
    course::printStep(7, "release everything: objects before arrays");
    CHECK_DRIVER(cuSurfObjectDestroy(surface));
    CHECK_DRIVER(cuTexObjectDestroy(plain));
    CHECK_DRIVER(cuTexObjectDestroy(viewed));
    CHECK_DRIVER(cuArrayDestroy(canvas));
    CHECK_DRIVER(cuArrayDestroy(volume));
    CHECK_DRIVER(cuArrayDestroy(image));
    CHECK_DRIVER(cuArrayDestroy(line));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("objects, arrays and primary context: released\n");
    return verdict.finish();
}
