// Lesson 25, program 7 — 2-D fills of pitched memory: cuMemsetD2D8, cuMemsetD2D16, cuMemsetD2D32 and
// their Async forms, and the 1-D cuMemsetD16Async; every byte of the pitch, padding included, read
// back to see that nothing outside the rectangle changed.
//
// A 2-D fill writes Height rows of Width elements, rows dstPitch bytes apart. Width counts elements
// of the fill's size (8, 16 or 32 bits), the pitch counts bytes: the same 600-byte rectangle is a
// Width of 600, 300 or 150.
//
//   fills               the walkthrough
//   fills --device N    another GPU
#include <cuda.h>

#include <cstdio>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "copy_helpers.h"

namespace {

// The pitched image (rows of 1000 bytes), and the rectangle every fill writes: 600 bytes x 16 rows
// from byte 40 of row 3 (40 is a multiple of 2 and 4: cuMemsetD2D16 and cuMemsetD2D32 need their
// pointer and pitch "two byte aligned" and "four byte aligned", cuda.h:11395-11396, 11436-11437).
constexpr size_t kRowBytes = 1000;
constexpr size_t kRows = 24;
constexpr size_t kX = 40;
constexpr size_t kY = 3;
constexpr size_t kWidthBytes = 600;
constexpr size_t kHeight = 16;

struct Fill {
    const char* call;
    unsigned int elementBytes;
    unsigned int value;  // no byte of it is 0xa5
    const char* check;
};
constexpr Fill kFills[] = {
    {"cuMemsetD2D8", 1, 0x3C, "cuMemsetD2D8 filled its rectangle and nothing else"},
    {"cuMemsetD2D16", 2, 0xB1C2, "cuMemsetD2D16 filled its rectangle and nothing else"},
    {"cuMemsetD2D32", 4, 0xD3E4F506u, "cuMemsetD2D32 filled its rectangle and nothing else"},
    {"cuMemsetD2D8Async", 1, 0x4B, "cuMemsetD2D8Async filled its rectangle and nothing else"},
    {"cuMemsetD2D16Async", 2, 0x1A2B, "cuMemsetD2D16Async filled its rectangle and nothing else"},
    {"cuMemsetD2D32Async", 4, 0x0C1D2E3Fu, "cuMemsetD2D32Async filled its rectangle and nothing else"},
};

// Fill number `which` of kFills into the rectangle at `corner`. Width is in elements.
void fillRectangle(size_t which, CUdeviceptr corner, size_t pitch, CUstream stream) {
    const unsigned int v = kFills[which].value;
    switch (which) {
        case 0: CHECK_DRIVER(cuMemsetD2D8(corner, pitch, static_cast<unsigned char>(v), kWidthBytes, kHeight)); break;
        case 1:
            CHECK_DRIVER(cuMemsetD2D16(corner, pitch, static_cast<unsigned short>(v), kWidthBytes / 2, kHeight));
            break;
        case 2: CHECK_DRIVER(cuMemsetD2D32(corner, pitch, v, kWidthBytes / 4, kHeight)); break;
        case 3:
            CHECK_DRIVER(cuMemsetD2D8Async(corner, pitch, static_cast<unsigned char>(v), kWidthBytes, kHeight, stream));
            break;
        case 4:
            CHECK_DRIVER(
                cuMemsetD2D16Async(corner, pitch, static_cast<unsigned short>(v), kWidthBytes / 2, kHeight, stream));
            break;
        default: CHECK_DRIVER(cuMemsetD2D32Async(corner, pitch, v, kWidthBytes / 4, kHeight, stream)); break;
    }
}

// Byte `offset` of a run of `elementBytes`-byte copies of `value`, least significant byte first
// (the byte order of x86-64, AArch64 and the GPU).
unsigned char valueByte(unsigned int value, unsigned int elementBytes, size_t offset) {
    return static_cast<unsigned char>(value >> (8 * (offset % elementBytes)));
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "initialise, a pitched image, a stream, the spin kernel");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    course::printDeviceName(ordinal, device);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("copy_kernels.fatbin").c_str()));
    CUfunction spin = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&spin, module, "spin"));
    CUdeviceptr image = 0;
    size_t pitch = 0;
    CHECK_DRIVER(cuMemAllocPitch(&image, &pitch, kRowBytes, kRows, 4));
    std::printf("pitch of a %zu-byte row: %zu bytes\n", kRowBytes, pitch);
    const CUdeviceptr corner = image + kY * pitch + kX;
    course::Verdict verdict;

    // Steps 2 and 3: each fill on a fresh image of 0xa5. The synchronous forms go to the legacy
    // stream, which the NON_BLOCKING stream is not ordered with (cuda.h:429): the refill on the
    // stream is waited for before each of them. The Async forms are queued behind a 50 ms kernel and
    // the refill, on the stream, with no wait by the host: in stream order they run after both. A
    // fill that did not wait its turn in the stream would land while the kernel runs, and the refill
    // after it would wipe it out. The stream is waited for again before the image is read back.
    unsigned long long nanoseconds = 50000000ULL;
    void* params[] = {&nanoseconds};
    for (size_t which = 0; which < 6; ++which) {
        if (which == 0) course::printStep(2, "cuMemsetD2D8, cuMemsetD2D16, cuMemsetD2D32: 600 bytes x 16 rows");
        if (which == 3) course::printStep(3, "the same three on a stream, behind a kernel: the Async forms");
        const Fill& fill = kFills[which];
        const bool onTheStream = which >= 3;
        if (onTheStream) CHECK_DRIVER(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
        CHECK_DRIVER(cuMemsetD8Async(image, lesson25::kFill, pitch * kRows, stream));
        if (!onTheStream) CHECK_DRIVER(cuStreamSynchronize(stream));
        fillRectangle(which, corner, pitch, stream);
        CHECK_DRIVER(cuStreamSynchronize(stream));
        const std::vector<unsigned char> got = lesson25::download(image, pitch * kRows);  // after the legacy fills too
        size_t inside = 0;
        size_t outside = 0;
        for (size_t y = 0; y < kRows; ++y)
            for (size_t x = 0; x < pitch; ++x) {
                const unsigned char byte = got[y * pitch + x];
                if (x >= kX && x < kX + kWidthBytes && y >= kY && y < kY + kHeight)
                    inside += byte == valueByte(fill.value, fill.elementBytes, x - kX) ? 1 : 0;
                else
                    outside += byte == lesson25::kFill ? 1 : 0;
            }
        std::printf("%s, Width %zu: %zu of %zu rectangle bytes hold the value, %zu of %zu other bytes still 0xa5\n",
                    fill.call, kWidthBytes / fill.elementBytes, inside, kWidthBytes * kHeight, outside,
                    pitch * kRows - kWidthBytes * kHeight);
        verdict.check(fill.check, inside == kWidthBytes * kHeight && outside == pitch * kRows - kWidthBytes * kHeight);
    }

    // Step 4: a 1-D fill of 16-bit values, N counted in elements, at byte 2 of a 4096-byte buffer.
    course::printStep(4, "cuMemsetD16Async: 1000 halfwords from byte 2");
    CUdeviceptr line = 0;
    CHECK_DRIVER(cuMemAlloc(&line, 4096));
    CHECK_DRIVER(cuMemsetD8Async(line, lesson25::kFill, 4096, stream));
    CHECK_DRIVER(cuMemsetD16Async(line + 2, 0xBEEF, 1000, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const std::vector<unsigned char> got = lesson25::download(line, 4096);
    size_t lineWrong = 0;
    for (size_t i = 0; i < 4096; ++i)
        lineWrong += got[i] != (i >= 2 && i < 2002 ? valueByte(0xBEEF, 2, i - 2) : lesson25::kFill) ? 1 : 0;
    std::printf("buffer bytes as expected (0xbeef in bytes 2 to 2001, the rest 0xa5): %zu of 4096\n", 4096 - lineWrong);
    verdict.check("cuMemsetD16Async filled 1000 halfwords and nothing else", lineWrong == 0);

    course::printStep(5, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(line));
    CHECK_DRIVER(cuMemFree(image));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: buffers, module, stream, primary context\n");

    course::printStep(6, "check");
    return verdict.finish();
}
