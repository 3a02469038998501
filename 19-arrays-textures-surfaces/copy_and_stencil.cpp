// Lesson 19, program 5 of 6 — two ways to copy a sub-rectangle between pitched images, and two ways
// for a stencil kernel to read its neighbours.
//
// A sub-rectangle is h rows of w texels at some offset: one cuMemcpy2D moves all of it, or h calls
// of cuMemcpyDtoD move it a row at a time. A 5-point stencil reads each texel's four neighbours: a
// texture object over the image (point sampling, clamp addressing does the edges) or plain global
// loads (the kernel clamps its own indices). The plain run checks all four results on the host, and
// that the stencils' grid, which overhangs the image by whole columns and rows of threads, writes
// nothing outside it (the row padding and guard rows below the image keep a sentinel); with --bench
// the image is 8192 x 8192 floats and each way is timed, as GB/s and as a share of a DRAM peak
// computed from the memory clock and bus width this GPU reports, next to a whole-image cuMemcpyDtoD.
// The timed runs are not checked again.
//
//   copy_and_stencil [--device N] [--bench]
#include <cuda.h>

#include <bit>
#include <cstdio>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/dram_peak.h"
#include "texture_helpers.h"

namespace {

// Rows allocated below each image and never part of it: one block height of the stencils' launch,
// so that a thread of the last row of blocks that writes past the image's last row lands in them.
constexpr size_t kGuardRows = 16;

// A pitched device image and its size (its allocation has kGuardRows more rows).
struct Pitched {
    CUdeviceptr memory;
    size_t pitch;
    size_t width;
    size_t height;
};

// The sub-rectangle: from (w/8, h/8) of the source, 3/4 of each side, to (w/16, h/16) of the destination.
struct Rect {
    size_t srcX, srcY, dstX, dstY, width, height;
};

Rect rectFor(size_t width, size_t height) {
    return {width / 8, height / 8, width / 16, height / 16, width * 3 / 4, height * 3 / 4};
}

void copyWith2D(const Pitched& src, const Pitched& dst, const Rect& r) {
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = src.memory;
    copy.srcPitch = src.pitch;
    copy.srcXInBytes = r.srcX * sizeof(float);
    copy.srcY = r.srcY;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = dst.memory;
    copy.dstPitch = dst.pitch;
    copy.dstXInBytes = r.dstX * sizeof(float);
    copy.dstY = r.dstY;
    copy.WidthInBytes = r.width * sizeof(float);
    copy.Height = r.height;
    CHECK_DRIVER(cuMemcpy2D(&copy));
}

// The same rectangle as one cuMemcpyDtoD per row: the address arithmetic cuMemcpy2D does for us.
void copyByRows(const Pitched& src, const Pitched& dst, const Rect& r) {
    for (size_t row = 0; row < r.height; ++row)
        CHECK_DRIVER(cuMemcpyDtoD(dst.memory + (r.dstY + row) * dst.pitch + r.dstX * sizeof(float),
                                  src.memory + (r.srcY + row) * src.pitch + r.srcX * sizeof(float),
                                  r.width * sizeof(float)));
}

// The first `rows` rows of the allocation, `rowBytes` of each, one host row per row.
std::vector<float> rowsToHost(const Pitched& image, size_t rowBytes, size_t rows) {
    std::vector<float> host(rowBytes / sizeof(float) * rows);
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = image.memory;
    copy.srcPitch = image.pitch;
    copy.dstMemoryType = CU_MEMORYTYPE_HOST;
    copy.dstHost = host.data();
    copy.dstPitch = rowBytes;
    copy.WidthInBytes = rowBytes;
    copy.Height = rows;
    CHECK_DRIVER(cuMemcpy2D(&copy));
    return host;
}

// The image alone, its rows packed.
std::vector<float> download(const Pitched& image) {
    return rowsToHost(image, image.width * sizeof(float), image.height);
}

// The destination after a rectangle copy onto a cleared image: the source's texels inside the
// rectangle, kCleared everywhere else. Returns the number of texels that are not so.
constexpr float kCleared = -1.0f;
size_t wrongAfterCopy(const std::vector<float>& src, const std::vector<float>& dst, size_t width, size_t height,
                      const Rect& r) {
    size_t wrong = 0;
    for (size_t y = 0; y < height; ++y)
        for (size_t x = 0; x < width; ++x) {
            const bool inside = x >= r.dstX && x < r.dstX + r.width && y >= r.dstY && y < r.dstY + r.height;
            const float want = inside ? src[(y - r.dstY + r.srcY) * width + (x - r.dstX + r.srcX)] : kCleared;
            wrong += dst[y * width + x] != want;
        }
    return wrong;
}

// The whole allocation, padding and guard rows included, one row of pitch bytes per host row.
std::vector<float> downloadAll(const Pitched& image) {
    return rowsToHost(image, image.pitch, image.height + kGuardRows);
}

// Sets every word of the allocation, padding and guard rows included, to kCleared.
void clearAll(const Pitched& image, unsigned int cleared) {
    CHECK_DRIVER(
        cuMemsetD2D32(image.memory, image.pitch, cleared, image.pitch / sizeof(float), image.height + kGuardRows));
}

// How many words outside the image (x >= width in a row's padding, or a guard row) no longer hold
// kCleared, in an allocation read with downloadAll.
size_t writtenOutside(const std::vector<float>& all, const Pitched& image) {
    const size_t stride = image.pitch / sizeof(float);
    size_t written = 0;
    for (size_t y = 0; y < image.height + kGuardRows; ++y)
        for (size_t x = 0; x < stride; ++x)
            if (y >= image.height || x >= image.width) written += all[y * stride + x] != kCleared;
    return written;
}

// The stencil on the host, in the kernels' order of additions: bit for bit what they compute. `out`
// has rows of outStride floats.
size_t wrongAfterStencil(const std::vector<float>& in, const std::vector<float>& out, size_t width, size_t height,
                         size_t outStride) {
    size_t wrong = 0;
    for (size_t y = 0; y < height; ++y)
        for (size_t x = 0; x < width; ++x) {
            const size_t left = x > 0 ? x - 1 : 0, right = x + 1 < width ? x + 1 : width - 1;
            const size_t up = y > 0 ? y - 1 : 0, down = y + 1 < height ? y + 1 : height - 1;
            float sum = in[y * width + x];
            sum += in[y * width + left];
            sum += in[y * width + right];
            sum += in[up * width + x];
            sum += in[down * width + x];
            wrong += out[y * outStride + x] != sum * 0.2f;
        }
    return wrong;
}

// Milliseconds per run of `enqueue`, from events around `runs` runs after two untimed ones.
template <typename Enqueue>
double millisecondsPerRun(int runs, const Enqueue& enqueue) {
    CUevent start = nullptr;
    CUevent stop = nullptr;
    CHECK_DRIVER(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    for (int i = 0; i < 2; ++i) enqueue();
    CHECK_DRIVER(cuEventRecord(start, nullptr));
    for (int i = 0; i < runs; ++i) enqueue();
    CHECK_DRIVER(cuEventRecord(stop, nullptr));
    CHECK_DRIVER(cuEventSynchronize(stop));
    float milliseconds = 0.0f;
    CHECK_DRIVER(cuEventElapsedTime(&milliseconds, start, stop));
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    return static_cast<double>(milliseconds) / runs;
}

// One "bench:" rate line, and its share of the DRAM peak when the device reports one.
void benchRate(const char* metric, double bytes, double milliseconds, double peakGBs) {
    const double gbs = bytes / (milliseconds / 1e3) / 1e9;
    std::printf("bench: %s = %.1f GB/s\n", metric, gbs);
    if (peakGBs > 0.0) std::printf("bench: %s share of DRAM peak = %.1f %%\n", metric, 100.0 * gbs / peakGBs);
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    const bool bench = args.has("--bench");
    course::Verdict verdict;

    course::printStep(1, "initialise the driver, the primary context, the stencil kernels");
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
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("stencil.fatbin").c_str()));
    CUfunction stencilTexture = nullptr;
    CUfunction stencilGlobal = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&stencilTexture, module, "stencilTexture"));
    CHECK_DRIVER(cuModuleGetFunction(&stencilGlobal, module, "stencilGlobal"));

    // Step 2: two pitched images of the same size; the source gets a pattern of exact floats.
    course::printStep(2, "two pitched images");
    const size_t width = bench ? 8192 : 1000;
    const size_t height = bench ? 8192 : 600;
    Pitched src{0, 0, width, height};
    Pitched dst{0, 0, width, height};
    CHECK_DRIVER(cuMemAllocPitch(&src.memory, &src.pitch, width * sizeof(float), height + kGuardRows, sizeof(float)));
    CHECK_DRIVER(cuMemAllocPitch(&dst.memory, &dst.pitch, width * sizeof(float), height + kGuardRows, sizeof(float)));
    std::vector<float> host(width * height);
    for (size_t y = 0; y < height; ++y)
        for (size_t x = 0; x < width; ++x) host[y * width + x] = static_cast<float>((x * 7 + y * 13) % 1024) / 8.0f;
    CUDA_MEMCPY2D up{};
    up.srcMemoryType = CU_MEMORYTYPE_HOST;
    up.srcHost = host.data();
    up.srcPitch = width * sizeof(float);
    up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    up.dstDevice = src.memory;
    up.dstPitch = src.pitch;
    up.WidthInBytes = width * sizeof(float);
    up.Height = height;
    CHECK_DRIVER(cuMemcpy2D(&up));
    const Rect rect = rectFor(width, height);
    std::printf("images: %zu x %zu floats, pitch %zu bytes\n", width, height, src.pitch);
    std::printf("sub-rectangle: %zu x %zu floats from (%zu, %zu) to (%zu, %zu)\n", rect.width, rect.height, rect.srcX,
                rect.srcY, rect.dstX, rect.dstY);

    // Steps 3 and 4: each copy onto a cleared destination (cuMemsetD2D32: 32-bit words, pitched).
    course::printStep(3, "the sub-rectangle with one cuMemcpy2D");
    const unsigned int cleared = std::bit_cast<unsigned int>(kCleared);
    CHECK_DRIVER(cuMemsetD2D32(dst.memory, dst.pitch, cleared, width, height));
    copyWith2D(src, dst, rect);
    const size_t wrong2D = wrongAfterCopy(host, download(dst), width, height, rect);
    std::printf("texels wrong in the destination: %zu\n", wrong2D);
    verdict.check("cuMemcpy2D copies exactly the sub-rectangle", wrong2D == 0);

    course::printStep(4, "the same sub-rectangle with one cuMemcpyDtoD per row");
    CHECK_DRIVER(cuMemsetD2D32(dst.memory, dst.pitch, cleared, width, height));
    copyByRows(src, dst, rect);
    const size_t wrongRows = wrongAfterCopy(host, download(dst), width, height, rect);
    std::printf("cuMemcpyDtoD calls: %zu; texels wrong in the destination: %zu\n", rect.height, wrongRows);
    verdict.check("row-by-row cuMemcpyDtoD copies exactly the sub-rectangle", wrongRows == 0);

    // Step 5: the stencil both ways, from src into dst, each result checked bit for bit. dst is
    // cleared before each kernel, padding and guard rows included: the stencil never yields kCleared
    // (every input is >= 0), so a texel a kernel failed to write keeps it and counts as wrong, and a
    // word outside the image that lost it was written by a thread the bounds test should have
    // stopped. Blocks of 32 x 16 threads do not divide 1000 x 600: the last column and the last row
    // of blocks reach past the image.
    course::printStep(5, "a 5-point stencil through a texture and with global loads");
    const CUDA_RESOURCE_DESC resource =
        lesson19::pitchResource(src.memory, CU_AD_FORMAT_FLOAT, 1, width, height, src.pitch);
    const CUDA_TEXTURE_DESC textureDesc = lesson19::textureDesc(CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, 0);
    CUtexObject texture = 0;
    CHECK_DRIVER(cuTexObjectCreate(&texture, &resource, &textureDesc, nullptr));
    int w = static_cast<int>(width);
    int h = static_cast<int>(height);
    void* textureParams[] = {&texture, &dst.memory, &dst.pitch, &w, &h};
    void* globalParams[] = {&src.memory, &src.pitch, &dst.memory, &dst.pitch, &w, &h};
    constexpr unsigned int kBlockX = 32, kBlockY = 16;
    const unsigned int gridX = (w + kBlockX - 1) / kBlockX;
    const unsigned int gridY = (h + kBlockY - 1) / kBlockY;
    std::printf("launch: %u x %u blocks of %u x %u threads: %u columns and %u rows of threads beyond the image\n",
                gridX, gridY, kBlockX, kBlockY, gridX * kBlockX - w, gridY * kBlockY - h);
    auto runTexture = [&] {
        CHECK_DRIVER(
            cuLaunchKernel(stencilTexture, gridX, gridY, 1, kBlockX, kBlockY, 1, 0, nullptr, textureParams, nullptr));
    };
    auto runGlobal = [&] {
        CHECK_DRIVER(
            cuLaunchKernel(stencilGlobal, gridX, gridY, 1, kBlockX, kBlockY, 1, 0, nullptr, globalParams, nullptr));
    };
    const size_t stride = dst.pitch / sizeof(float);
    clearAll(dst, cleared);
    runTexture();
    const std::vector<float> afterTexture = downloadAll(dst);
    const size_t wrongTexture = wrongAfterStencil(host, afterTexture, width, height, stride);
    const size_t outsideTexture = writtenOutside(afterTexture, dst);
    clearAll(dst, cleared);
    runGlobal();
    const std::vector<float> afterGlobal = downloadAll(dst);
    const size_t wrongGlobal = wrongAfterStencil(host, afterGlobal, width, height, stride);
    const size_t outsideGlobal = writtenOutside(afterGlobal, dst);
    std::printf("texels that differ from the host's stencil: through a texture %zu, with global loads %zu\n",
                wrongTexture, wrongGlobal);
    std::printf(
        "words written outside the image (row padding, %zu guard rows): through a texture %zu, with global "
        "loads %zu\n",
        kGuardRows, outsideTexture, outsideGlobal);
    verdict.check("the stencil through a texture equals the host's", wrongTexture == 0);
    verdict.check("the stencil with global loads equals the host's", wrongGlobal == 0);
    verdict.check("the stencil through a texture writes nothing outside the image", outsideTexture == 0);
    verdict.check("the stencil with global loads writes nothing outside the image", outsideGlobal == 0);

    // Step 6: --bench only. Bytes counted are those each way must move at least: a copy reads and
    // writes its rectangle; a stencil reads its image once and writes it once (at best: neighbours
    // from caches). The whole-image cuMemcpyDtoD (pitch x height, padding included) shows what a plain
    // copy reaches on this GPU in this run.
    course::printStep(6, "benchmarks");
    if (!bench) {
        std::printf("benchmarks: not run (add --bench)\n");
    } else {
        int memoryClockKHz = 0;
        int busWidthBits = 0;
        CHECK_DRIVER(cuDeviceGetAttribute(&memoryClockKHz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, device));
        CHECK_DRIVER(cuDeviceGetAttribute(&busWidthBits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, device));
        const double peak = course::dramPeakGBs(memoryClockKHz, busWidthBits);
        std::printf("benchmarks on: %s (memory clock %d kHz, bus width %d bits)\n", name, memoryClockKHz, busWidthBits);
        if (peak > 0.0) std::printf("bench: DRAM peak (2 x memory clock x bus width / 8) = %.1f GB/s\n", peak);
        const double imageBytes = static_cast<double>(src.pitch * height);
        const double rectBytes = static_cast<double>(rect.width * rect.height * sizeof(float));
        const double texelBytes = static_cast<double>(width * height * sizeof(float));
        // A flat copy of pitch x height bytes is the same image only where both pitches are equal,
        // which cuda.h does not promise for two allocations of the same width.
        const bool samePitch = dst.pitch == src.pitch;
        const double wholeMs =
            samePitch ? millisecondsPerRun(
                            20, [&] { CHECK_DRIVER(cuMemcpyDtoD(dst.memory, src.memory, src.pitch * height)); })
                      : 0.0;
        const double copy2DMs = millisecondsPerRun(20, [&] { copyWith2D(src, dst, rect); });
        const double rowsMs = millisecondsPerRun(5, [&] { copyByRows(src, dst, rect); });
        const double textureMs = millisecondsPerRun(20, runTexture);
        const double globalMs = millisecondsPerRun(20, runGlobal);
        if (samePitch)
            benchRate("cuMemcpyDtoD whole image (read + write)", 2 * imageBytes, wholeMs, peak);
        else
            std::printf("whole-image cuMemcpyDtoD: not timed (pitches %zu and %zu differ)\n", src.pitch, dst.pitch);
        benchRate("cuMemcpy2D sub-rectangle (read + write)", 2 * rectBytes, copy2DMs, peak);
        benchRate("row-by-row cuMemcpyDtoD sub-rectangle", 2 * rectBytes, rowsMs, peak);
        std::printf("bench: cuMemcpy2D / row-by-row cuMemcpyDtoD = %.1f x\n", rowsMs / copy2DMs);
        benchRate("stencil through a texture (read + write)", 2 * texelBytes, textureMs, peak);
        benchRate("stencil with global loads (read + write)", 2 * texelBytes, globalMs, peak);
        std::printf("bench: stencil texture / global loads = %.2f x\n", globalMs / textureMs);
    }

    course::printStep(7, "release everything: the texture object before the memory it reads");
    CHECK_DRIVER(cuTexObjectDestroy(texture));
    CHECK_DRIVER(cuMemFree(dst.memory));
    CHECK_DRIVER(cuMemFree(src.memory));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("texture object, images, module and primary context: released\n");
    return verdict.finish();
}
