// Lesson 19, program 1 of 6 — pitched memory and CUDA arrays: where a 2D image or a 3D volume lives
// on the device, and how cuMemcpy2D / cuMemcpy3D move all of it or a box of it.
//
// A row of 999 floats is 3996 bytes. cuMemAllocPitch pads every row to a pitch of its choosing, so
// that each row starts aligned; an element is then at base + y * pitch + x * sizeof(float), and every
// 2D copy names the pitch of both sides. This program allocates such an image, copies it in and out
// whole and as a rectangle that is not the whole image, lets the driver refuse a row wider than the
// pitch, then moves the image into a 2D CUDA array (an opaque layout made for textures, addressed in
// elements of a declared format) and a volume into a 3D array, and checks on the host every copy
// whose result cuda.h defines (a copy at half an element, which cuda.h forbids, is only shown).
//
//   pitched_and_arrays [--device N]
#include <cuda.h>

#include <cstdio>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace {

// Floats per row: 3996 bytes = 4 x 999, a multiple of 4 (ElementSizeBytes here) but of no larger power
// of two, so of no texture pitch alignment above 4 bytes (32 on the H100).
constexpr size_t kWidth = 999;
constexpr size_t kHeight = 300;
constexpr size_t kRowBytes = kWidth * sizeof(float);

// A 2D copy of `height` rows of `widthBytes`, everything else zero: the callers fill in both sides.
CUDA_MEMCPY2D copy2D(size_t widthBytes, size_t height) {
    CUDA_MEMCPY2D copy{};
    copy.WidthInBytes = widthBytes;
    copy.Height = height;
    return copy;
}

// The whole pitched image into a tightly packed host image: the device side skips each row's padding.
std::vector<float> download(CUdeviceptr image, size_t pitch) {
    std::vector<float> host(kWidth * kHeight, 0.0f);
    CUDA_MEMCPY2D down = copy2D(kRowBytes, kHeight);
    down.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    down.srcDevice = image;
    down.srcPitch = pitch;
    down.dstMemoryType = CU_MEMORYTYPE_HOST;
    down.dstHost = host.data();
    down.dstPitch = kRowBytes;
    CHECK_DRIVER(cuMemcpy2D(&down));
    return host;
}

// Step 4: a rectangle read out of the device image and one written into it; both checked. Returns
// the image as it now is on the device.
std::vector<float> rectangles(CUdeviceptr image, size_t pitch, const std::vector<float>& host,
                              course::Verdict& verdict) {
    // Read: 250 x 80 texels from (100, 50) into a tightly packed host buffer. The device side starts
    // at x bytes into row y: srcXInBytes is in BYTES, srcY in rows.
    constexpr size_t kX = 100, kY = 50, kW = 250, kH = 80;
    std::vector<float> part(kW * kH);
    CUDA_MEMCPY2D read = copy2D(kW * sizeof(float), kH);
    read.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    read.srcDevice = image;
    read.srcPitch = pitch;
    read.srcXInBytes = kX * sizeof(float);
    read.srcY = kY;
    read.dstMemoryType = CU_MEMORYTYPE_HOST;
    read.dstHost = part.data();
    read.dstPitch = kW * sizeof(float);
    CHECK_DRIVER(cuMemcpy2D(&read));
    bool readExact = true;
    for (size_t y = 0; y < kH; ++y)
        for (size_t x = 0; x < kW; ++x) readExact = readExact && part[y * kW + x] == host[(kY + y) * kWidth + kX + x];
    std::printf("rectangle read: %zu x %zu texels from (%zu, %zu), srcXInBytes %zu\n", kW, kH, kX, kY,
                kX * sizeof(float));
    verdict.check("the rectangle read holds exactly the image's texels there", readExact);

    // Write: a 64 x 32 patch of negative values at (900, 200), then the whole image back.
    constexpr size_t kPX = 900, kPY = 200, kPW = 64, kPH = 32;
    std::vector<float> patch(kPW * kPH);
    for (size_t i = 0; i < patch.size(); ++i) patch[i] = -1.0f - static_cast<float>(i);
    CUDA_MEMCPY2D write = copy2D(kPW * sizeof(float), kPH);
    write.srcMemoryType = CU_MEMORYTYPE_HOST;
    write.srcHost = patch.data();
    write.srcPitch = kPW * sizeof(float);
    write.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    write.dstDevice = image;
    write.dstPitch = pitch;
    write.dstXInBytes = kPX * sizeof(float);
    write.dstY = kPY;
    CHECK_DRIVER(cuMemcpy2D(&write));
    const std::vector<float> back = download(image, pitch);
    size_t wrong = 0;
    for (size_t y = 0; y < kHeight; ++y)
        for (size_t x = 0; x < kWidth; ++x) {
            const bool inPatch = x >= kPX && x < kPX + kPW && y >= kPY && y < kPY + kPH;
            const float want = inPatch ? patch[(y - kPY) * kPW + (x - kPX)] : host[y * kWidth + x];
            wrong += back[y * kWidth + x] != want;
        }
    std::printf("rectangle written: %zu x %zu texels at (%zu, %zu); texels wrong in the image afterwards: %zu\n", kPW,
                kPH, kPX, kPY, wrong);
    verdict.check("the rectangle written landed in place and nothing else changed", wrong == 0);
    return back;
}

// Step 6: the pitched image into the 2D array and back out to the host. Then a copy into the array
// at an x offset of half an element, which cuda.h forbids ("must be evenly divisible by the array
// element size"): what the driver answers is shown, not checked, and the array is not read again.
void arrayCopies(CUarray array, CUdeviceptr image, size_t pitch, const std::vector<float>& current,
                 course::Verdict& verdict) {
    CUDA_MEMCPY2D toArray = copy2D(kRowBytes, kHeight);  // device to device: pitched memory -> array
    toArray.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    toArray.srcDevice = image;
    toArray.srcPitch = pitch;
    toArray.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    toArray.dstArray = array;
    CHECK_DRIVER(cuMemcpy2D(&toArray));
    std::vector<float> fromArray(current.size(), 0.0f);
    CUDA_MEMCPY2D out = copy2D(kRowBytes, kHeight);
    out.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    out.srcArray = array;
    out.dstMemoryType = CU_MEMORYTYPE_HOST;
    out.dstHost = fromArray.data();
    out.dstPitch = kRowBytes;
    CHECK_DRIVER(cuMemcpy2D(&out));
    verdict.check("the pitched image comes back from the 2D array exactly", fromArray == current);
    CUDA_MEMCPY2D halfElement = copy2D(2 * sizeof(float), 1);
    halfElement.srcMemoryType = CU_MEMORYTYPE_HOST;
    halfElement.srcHost = current.data();
    halfElement.srcPitch = kRowBytes;
    halfElement.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    halfElement.dstArray = array;
    halfElement.dstXInBytes = 2;
    const CUresult offsetResult = REPORT_DRIVER(cuMemcpy2D(&halfElement));
    std::printf("copy into the array at dstXInBytes 2, half an element (cuda.h forbids it): %s\n",
                course::driverErrorName(offsetResult));
}

// Step 7: a volume of 64 x 32 x 16 float2 texels (2 channels: an 8-byte element) in a 3D array.
void volume(CUarray volumeArray, course::Verdict& verdict) {
    constexpr size_t kW = 64, kH = 32, kD = 16, kElement = 2 * sizeof(float);
    std::vector<float> host(kW * kH * kD * 2);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
    // Host memory is described by a pitch (bytes per row) and a height (rows per slice).
    CUDA_MEMCPY3D in{};
    in.srcMemoryType = CU_MEMORYTYPE_HOST;
    in.srcHost = host.data();
    in.srcPitch = kW * kElement;
    in.srcHeight = kH;
    in.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    in.dstArray = volumeArray;
    in.WidthInBytes = kW * kElement;
    in.Height = kH;
    in.Depth = kD;
    CHECK_DRIVER(cuMemcpy3D(&in));
    std::vector<float> back(host.size(), 0.0f);
    CUDA_MEMCPY3D out = in;  // the same copy, the other way round
    out.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    out.srcArray = volumeArray;
    out.dstMemoryType = CU_MEMORYTYPE_HOST;
    out.dstHost = back.data();
    out.dstPitch = kW * kElement;
    out.dstHeight = kH;
    CHECK_DRIVER(cuMemcpy3D(&out));
    verdict.check("the volume comes back from the 3D array exactly", back == host);

    // A box of 16 x 8 x 4 texels from (8, 4, 2): srcXInBytes counts bytes, so 8 texels of 8 bytes.
    constexpr size_t kX = 8, kY = 4, kZ = 2, kBW = 16, kBH = 8, kBD = 4;
    std::vector<float> box(kBW * kBH * kBD * 2);
    CUDA_MEMCPY3D part = out;  // array -> host again, from an offset, into a smaller host box
    part.srcXInBytes = kX * kElement;
    part.srcY = kY;
    part.srcZ = kZ;
    part.dstHost = box.data();
    part.dstPitch = kBW * kElement;
    part.dstHeight = kBH;
    part.WidthInBytes = kBW * kElement;
    part.Height = kBH;
    part.Depth = kBD;
    CHECK_DRIVER(cuMemcpy3D(&part));
    bool boxExact = true;
    for (size_t z = 0; z < kBD; ++z)
        for (size_t y = 0; y < kBH; ++y)
            for (size_t c = 0; c < kBW * 2; ++c)
                boxExact = boxExact &&
                           box[(z * kBH + y) * kBW * 2 + c] == host[((kZ + z) * kH + kY + y) * kW * 2 + kX * 2 + c];
    std::printf("box read from the 3D array: %zu x %zu x %zu texels from (%zu, %zu, %zu), srcXInBytes %zu\n", kBW, kBH,
                kBD, kX, kY, kZ, kX * kElement);
    verdict.check("the box read from the 3D array holds exactly the volume's texels there", boxExact);
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    course::printStep(1, "initialise the driver, make the primary context current");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", ordinal, name);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));

    // Step 2: the pitch is the driver's choice. ElementSizeBytes (4) names the widest access the
    // kernels will make. cuda.h: the pitch "is guaranteed to work with ::cuMemcpy2D() under all
    // circumstances", and "The byte alignment of the pitch returned by ::cuMemAllocPitch() is
    // guaranteed to match or exceed the alignment requirement for texture binding with
    // ::cuTexRefSetAddress2D()"; that requirement, in cuTexRefSetAddress2D's own text, is
    // CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, the same attribute a texture object's
    // pitch2D::pitchInBytes "has to be aligned to". So the check below tests a documented guarantee.
    // The base address is another matter: a texture over pitched memory needs devPtr aligned to
    // CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, and no header promises that of cuMemAllocPitch's
    // pointer, so whether it is is shown, not checked (and a rectangle's start inside the image in
    // general is not).
    course::printStep(2, "a pitched image (cuMemAllocPitch)");
    CUdeviceptr image = 0;
    size_t pitch = 0;
    CHECK_DRIVER(cuMemAllocPitch(&image, &pitch, kRowBytes, kHeight, sizeof(float)));
    int pitchAlignment = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&pitchAlignment, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, device));
    std::printf("image: %zu x %zu floats, a row is %zu bytes\n", kWidth, kHeight, kRowBytes);
    std::printf("pitch (cuMemAllocPitch): %zu bytes, %zu bytes of padding per row\n", pitch, pitch - kRowBytes);
    std::printf("texture pitch alignment (CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT): %d bytes\n", pitchAlignment);
    std::printf("row width a multiple of it: %s; pitch a multiple of it: %s\n",
                kRowBytes % static_cast<size_t>(pitchAlignment) == 0 ? "yes" : "no",
                pitch % static_cast<size_t>(pitchAlignment) == 0 ? "yes" : "no");
    verdict.check("the pitch holds a row and is a multiple of the texture pitch alignment",
                  pitch >= kRowBytes && pitch % static_cast<size_t>(pitchAlignment) == 0);
    int textureAlignment = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&textureAlignment, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, device));
    const bool baseAligned = image % static_cast<size_t>(textureAlignment) == 0;
    const CUdeviceptr rectangleStart = image + 50 * pitch + 100 * sizeof(float);  // step 4's rectangle, (100, 50)
    std::printf("texture alignment (CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT): %d bytes\n", textureAlignment);
    std::printf("image base a multiple of it: %s; address of texel (100, 50) a multiple of it: %s\n",
                baseAligned ? "yes" : "no", rectangleStart % static_cast<size_t>(textureAlignment) == 0 ? "yes" : "no");

    // Step 3: the whole image in and out. The host side has no padding: its pitch is the row width.
    course::printStep(3, "the whole image in and out (cuMemcpy2D, host <-> pitched device)");
    std::vector<float> host(kWidth * kHeight);
    for (size_t y = 0; y < kHeight; ++y)
        for (size_t x = 0; x < kWidth; ++x) host[y * kWidth + x] = static_cast<float>(x + 1000 * y);  // exact
    CUDA_MEMCPY2D up = copy2D(kRowBytes, kHeight);
    up.srcMemoryType = CU_MEMORYTYPE_HOST;
    up.srcHost = host.data();
    up.srcPitch = kRowBytes;
    up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    up.dstDevice = image;
    up.dstPitch = pitch;
    CHECK_DRIVER(cuMemcpy2D(&up));
    verdict.check("the image comes back from pitched memory exactly", download(image, pitch) == host);

    course::printStep(4, "a rectangle out and a rectangle in (srcXInBytes / dstXInBytes, srcY / dstY)");
    const std::vector<float> current = rectangles(image, pitch, host, verdict);

    // Step 5: cuda.h: "dstPitch must be greater than or equal to WidthInBytes + dstXInBytes". A row
    // one float wider than the pitch would run into the next row. cuda.h names no error code for
    // cuMemcpy2D breaking that "must", so the check requires only a refusal (any result but
    // CUDA_SUCCESS); which code this driver gives is printed (observed on the H100:
    // CUDA_ERROR_INVALID_VALUE).
    course::printStep(5, "a row wider than the pitch is refused");
    std::vector<float> wide(pitch / sizeof(float) + 1, 0.0f);
    CUDA_MEMCPY2D tooWide = copy2D(pitch + sizeof(float), 1);
    tooWide.srcMemoryType = CU_MEMORYTYPE_HOST;
    tooWide.srcHost = wide.data();
    tooWide.srcPitch = pitch + sizeof(float);
    tooWide.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    tooWide.dstDevice = image;
    tooWide.dstPitch = pitch;
    const CUresult wideResult = REPORT_DRIVER(cuMemcpy2D(&tooWide));
    std::printf("copy of a %zu-byte row into a %zu-byte pitch: %s\n", pitch + sizeof(float), pitch,
                course::driverErrorName(wideResult));
    verdict.check("a row wider than the pitch is refused", wideResult != CUDA_SUCCESS);

    // Step 6: a CUDA array is described in elements of a format (here 1 channel of 32-bit float, a
    // 4-byte element); its layout is the driver's own, so it has no pitch and copies name it as an
    // array. A copy's x offset is still in bytes and must be a whole number of elements.
    course::printStep(6, "a 2D CUDA array (cuArrayCreate): the image in and out");
    CUDA_ARRAY_DESCRIPTOR arrayDesc{};
    arrayDesc.Width = kWidth;
    arrayDesc.Height = kHeight;
    arrayDesc.Format = CU_AD_FORMAT_FLOAT;
    arrayDesc.NumChannels = 1;
    CUarray array = nullptr;
    CHECK_DRIVER(cuArrayCreate(&array, &arrayDesc));
    CUDA_ARRAY_DESCRIPTOR readBack{};
    CHECK_DRIVER(cuArrayGetDescriptor(&readBack, array));
    std::printf("2D array (cuArrayGetDescriptor): %zu x %zu, format 0x%x, %u channel(s)\n", readBack.Width,
                readBack.Height, static_cast<unsigned>(readBack.Format), readBack.NumChannels);
    verdict.check("the 2D array's descriptor reads back as created",
                  readBack.Width == kWidth && readBack.Height == kHeight && readBack.Format == CU_AD_FORMAT_FLOAT &&
                      readBack.NumChannels == 1);
    arrayCopies(array, image, pitch, current, verdict);

    // Step 7: cuArray3DCreate makes 1D, 2D and 3D arrays (Height or Depth 0 for fewer dimensions)
    // and takes the flags cuArrayCreate has no room for (surfaces, layers, cube maps).
    course::printStep(7, "a 3D CUDA array (cuArray3DCreate): a volume in and out, and a box of it");
    CUDA_ARRAY3D_DESCRIPTOR volumeDesc{};
    volumeDesc.Width = 64;
    volumeDesc.Height = 32;
    volumeDesc.Depth = 16;
    volumeDesc.Format = CU_AD_FORMAT_FLOAT;
    volumeDesc.NumChannels = 2;
    CUarray volumeArray = nullptr;
    CHECK_DRIVER(cuArray3DCreate(&volumeArray, &volumeDesc));
    CUDA_ARRAY3D_DESCRIPTOR volumeBack{};
    CHECK_DRIVER(cuArray3DGetDescriptor(&volumeBack, volumeArray));
    std::printf("3D array (cuArray3DGetDescriptor): %zu x %zu x %zu, format 0x%x, %u channel(s), flags %u\n",
                volumeBack.Width, volumeBack.Height, volumeBack.Depth, static_cast<unsigned>(volumeBack.Format),
                volumeBack.NumChannels, volumeBack.Flags);
    verdict.check("the 3D array's descriptor reads back as created",
                  volumeBack.Width == 64 && volumeBack.Height == 32 && volumeBack.Depth == 16 &&
                      volumeBack.Format == CU_AD_FORMAT_FLOAT && volumeBack.NumChannels == 2);
    volume(volumeArray, verdict);

    course::printStep(8, "release everything, newest first");
    CHECK_DRIVER(cuArrayDestroy(volumeArray));
    CHECK_DRIVER(cuArrayDestroy(array));
    CHECK_DRIVER(cuMemFree(image));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("arrays, pitched image and primary context: released\n");
    return verdict.finish();
}
