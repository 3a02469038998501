// Lesson 19, program 4 of 6 — surface objects: a kernel that writes an image into a CUDA array.
//
// A texture reads an array; a surface object (cuSurfObjectCreate) lets a kernel read and write one,
// by integer coordinates, with x in bytes. The array must be made for it: cuArray3DCreate with
// CUDA_ARRAY3D_SURFACE_LDST (cuArrayCreate has no flags). This program shows what the driver answers
// for a surface over an ordinary array, writes an image through a surface, reads it back with cuMemcpy2D,
// and then reads it once more through a texture over the same array — in a later kernel, because
// within one kernel texture fetches are not kept coherent with that kernel's surface writes.
//
//   surfaces [--device N]
#include <cuda.h>

#include <bit>
#include <cstdio>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "texture_helpers.h"

namespace {

constexpr int kWidth = 1000;
constexpr int kHeight = 600;
// Rows allocated below the texture kernel's output and never part of it: one block height, so that a
// thread of the last row of blocks that writes past the image's last row lands in them.
constexpr size_t kGuardRows = 16;
constexpr float kSentinel = -1.0f;  // no texel has it

// How many texels differ from x + kWidth * y, the value writeThroughSurface writes.
size_t wrongTexels(const std::vector<float>& image) {
    size_t wrong = 0;
    for (int y = 0; y < kHeight; ++y)
        for (int x = 0; x < kWidth; ++x) wrong += image[y * kWidth + x] != static_cast<float>(x + kWidth * y);
    return wrong;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    course::printStep(1, "initialise the driver, the primary context, the kernels");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", ordinal, name);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("surfaces.fatbin").c_str()));
    CUfunction writeThroughSurface = nullptr;
    CUfunction readThroughTexture = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&writeThroughSurface, module, "writeThroughSurface"));
    CHECK_DRIVER(cuModuleGetFunction(&readThroughTexture, module, "readThroughTexture"));

    // Step 2: the flag that makes an array usable by surfaces. cuda.h documents
    // CUDA_ARRAY3D_SURFACE_LDST for surface references; the programming guide says a surface object
    // reads and writes an array "created with the cudaArraySurfaceLoadStore flag" (the runtime's name
    // for it). Whether cuSurfObjectCreate refuses an array without it is shown, not checked: the
    // object is destroyed unused, and the lesson writes only through an array made with the flag.
    course::printStep(2, "an array made without CUDA_ARRAY3D_SURFACE_LDST");
    CUDA_ARRAY3D_DESCRIPTOR desc{};
    desc.Width = kWidth;
    desc.Height = kHeight;
    desc.Depth = 0;  // 0: a 2D array
    desc.Format = CU_AD_FORMAT_FLOAT;
    desc.NumChannels = 1;
    desc.Flags = 0;
    CUarray plain = nullptr;
    CHECK_DRIVER(cuArray3DCreate(&plain, &desc));
    const CUDA_RESOURCE_DESC plainResource = lesson19::arrayResource(plain);
    CUsurfObject unflagged = 0;
    const CUresult plainResult = REPORT_DRIVER(cuSurfObjectCreate(&unflagged, &plainResource));
    std::printf("cuSurfObjectCreate over an array without CUDA_ARRAY3D_SURFACE_LDST: %s\n",
                course::driverErrorName(plainResult));
    if (plainResult == CUDA_SUCCESS) CHECK_DRIVER(cuSurfObjectDestroy(unflagged));
    CHECK_DRIVER(cuArrayDestroy(plain));

    // Step 3: the same array with the flag, zeroed from the host (an array has no memset), a surface
    // over it, and one thread per texel writing x + width * y through it.
    course::printStep(3, "a kernel writes an image through a surface (cuSurfObjectCreate)");
    desc.Flags = CUDA_ARRAY3D_SURFACE_LDST;
    CUarray array = nullptr;
    CHECK_DRIVER(cuArray3DCreate(&array, &desc));
    const std::vector<float> zeros(static_cast<size_t>(kWidth) * kHeight, 0.0f);
    lesson19::copyToArray(array, zeros.data(), kWidth * sizeof(float), kHeight);
    const CUDA_RESOURCE_DESC resource = lesson19::arrayResource(array);
    CUsurfObject surface = 0;
    CHECK_DRIVER(cuSurfObjectCreate(&surface, &resource));
    int width = kWidth;
    int height = kHeight;
    void* writeParams[] = {&surface, &width, &height};
    const unsigned int gridX = (kWidth + 15) / 16;
    const unsigned int gridY = (kHeight + 15) / 16;
    CHECK_DRIVER(cuLaunchKernel(writeThroughSurface, gridX, gridY, 1, 16, 16, 1, 0, nullptr, writeParams, nullptr));
    // A surface x that is not a whole element's byte offset is a fault inside the kernel, reported
    // by the next call that waits for it (on the H100, CUDA_ERROR_MISALIGNED_ADDRESS). Such an error
    // "leaves the process in an inconsistent state" (cuda.h), so the program stops with its verdict.
    const CUresult writeResult = cuCtxSynchronize();
    std::printf("surface-writing kernel: %s\n", course::driverErrorName(writeResult));
    if (!verdict.check("the surface-writing kernel ends without an error", writeResult == CUDA_SUCCESS))
        return verdict.finish();  // the process ends here, and its context with it
    std::vector<float> written(zeros.size(), 0.0f);
    CUDA_MEMCPY2D out{};  // array -> host, after the kernel (cuMemcpy2D waits for the null stream's work)
    out.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    out.srcArray = array;
    out.dstMemoryType = CU_MEMORYTYPE_HOST;
    out.dstHost = written.data();
    out.dstPitch = kWidth * sizeof(float);
    out.WidthInBytes = kWidth * sizeof(float);
    out.Height = kHeight;
    CHECK_DRIVER(cuMemcpy2D(&out));
    const size_t wrongWritten = wrongTexels(written);
    std::printf("image written through the surface: %d x %d texels, wrong: %zu\n", kWidth, kHeight, wrongWritten);
    verdict.check("the image written through the surface reads back exactly", wrongWritten == 0);

    // Step 4: a texture over the same array, read by the next kernel into pitched memory. The
    // surface kernel has finished by then (same stream), so the fetches see its writes. The grid of
    // 16 x 16 blocks reaches 8 columns and 8 rows past the 1000 x 600 image: the output's row padding
    // and guard rows start as kSentinel and must keep it.
    course::printStep(4, "a later kernel reads the same array through a texture");
    const CUDA_TEXTURE_DESC textureDesc = lesson19::textureDesc(CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, 0);
    CUtexObject texture = 0;
    CHECK_DRIVER(cuTexObjectCreate(&texture, &resource, &textureDesc, nullptr));
    CUdeviceptr copy = 0;
    size_t pitch = 0;
    const size_t rows = kHeight + kGuardRows;
    CHECK_DRIVER(cuMemAllocPitch(&copy, &pitch, kWidth * sizeof(float), rows, sizeof(float)));
    const size_t stride = pitch / sizeof(float);
    CHECK_DRIVER(cuMemsetD2D32(copy, pitch, std::bit_cast<unsigned int>(kSentinel), stride, rows));
    void* readParams[] = {&texture, &copy, &pitch, &width, &height};
    CHECK_DRIVER(cuLaunchKernel(readThroughTexture, gridX, gridY, 1, 16, 16, 1, 0, nullptr, readParams, nullptr));
    std::vector<float> all(stride * rows, 0.0f);  // the whole allocation, padding and guard rows included
    CUDA_MEMCPY2D back{};
    back.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    back.srcDevice = copy;
    back.srcPitch = pitch;
    back.dstMemoryType = CU_MEMORYTYPE_HOST;
    back.dstHost = all.data();
    back.dstPitch = pitch;
    back.WidthInBytes = pitch;
    back.Height = rows;
    CHECK_DRIVER(cuMemcpy2D(&back));
    std::vector<float> read(zeros.size(), 0.0f);
    size_t outside = 0;
    for (size_t y = 0; y < rows; ++y)
        for (size_t x = 0; x < stride; ++x) {
            if (y < static_cast<size_t>(kHeight) && x < static_cast<size_t>(kWidth))
                read[y * kWidth + x] = all[y * stride + x];
            else
                outside += all[y * stride + x] != kSentinel;
        }
    const size_t wrongRead = wrongTexels(read);
    std::printf("image read through a texture by the next kernel: wrong texels: %zu\n", wrongRead);
    std::printf(
        "grid beyond the image: %u columns, %u rows; words written outside the image (row padding, %zu guard "
        "rows): %zu\n",
        gridX * 16 - kWidth, gridY * 16 - kHeight, kGuardRows, outside);
    verdict.check("a later kernel reads the surface's writes through a texture", wrongRead == 0);
    verdict.check("the texture-reading kernel writes nothing outside the image", outside == 0);

    // Step 5: the objects before the array they describe.
    course::printStep(5, "release everything: texture and surface objects before the array");
    CHECK_DRIVER(cuMemFree(copy));
    CHECK_DRIVER(cuTexObjectDestroy(texture));
    CHECK_DRIVER(cuSurfObjectDestroy(surface));
    CHECK_DRIVER(cuArrayDestroy(array));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("texture and surface objects, memory, array, module and primary context: released\n");
    return verdict.finish();
}
