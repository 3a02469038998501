// Lesson 05, program 1 — device memory: allocate, memset, copy, give back.
//
// cuMemAlloc memory is reachable by the GPU only; the host sees it through copies.
// This program fills it with cuMemsetD8/D16/D32 and checks every element on the host,
// copies host -> device -> device -> host, and checks that the device memory was given
// back: cuMemGetInfo's free figure exactly where it started, and the driver no longer
// knowing the freed addresses.
//
//   device_memory [--device N] [--size BYTES]   BYTES: a positive multiple of 4 (default 4 MiB)
#include <cuda.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "memory_type.h"

namespace {

// Free device memory now, and its difference from `freeAtStart`. cuMemGetInfo's free
// figure is device-wide ("free according to the OS", cuda.h): another process that
// allocates meanwhile moves it too, so the exact comparison assumes the GPU is not shared
// while this program runs. No tolerance: the driver hands out device memory in pages
// (2 MiB on current GPUs), and a leaked buffer smaller than a page still keeps its page.
long long freeMemoryDifference(size_t freeAtStart) {
    size_t freeAtEnd = 0;
    size_t total = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeAtEnd, &total));
    const long long difference = static_cast<long long>(freeAtEnd) - static_cast<long long>(freeAtStart);
    std::printf("device free memory at end: %zu bytes\n", freeAtEnd);
    std::printf("free memory difference (end - start): %lld bytes (allowed: 0)\n", difference);
    return difference;
}

// Step 3's last check, on the bytes read back: elements [first, first + count) must
// hold `inside`, every byte of the others `outside`.
struct PartialFill {
    size_t insideSet = 0;
    size_t outsideKept = 0;
};
PartialFill countPartialFill(const std::vector<unsigned char>& raw, size_t first, size_t count, float inside,
                             unsigned char outside) {
    PartialFill result;
    for (size_t element = 0; element < raw.size() / 4; ++element) {
        const unsigned char* at = raw.data() + element * 4;
        if (element >= first && element < first + count) {
            float value = 0.0f;
            std::memcpy(&value, at, sizeof(value));  // no type punning: copy the bytes
            result.insideSet += value == inside;
        } else {
            result.outsideKept += static_cast<size_t>(std::count(at, at + 4, outside));
        }
    }
    return result;
}

}  // namespace

int main(int argc, char** argv) {
    const char* usage = "[--device N] [--size BYTES]";
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device", "--size"}, usage, args)) return course::kExitUsage;
    const long long requestedSize = args.valueOr("--size", 4LL << 20);
    if (requestedSize <= 0 || requestedSize % 4 != 0) {
        std::fprintf(stderr,
                     "%s: --size must be a positive multiple of 4 (cuMemsetD32 fills 4-byte elements), got %lld\n",
                     argv[0], requestedSize);
        std::fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return course::kExitUsage;
    }
    const size_t bytes = static_cast<size_t>(requestedSize);
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    // Step 1: the device's primary context (lesson 04), current on this thread.
    // cuMemGetInfo needs a current context, so the starting figure already includes the
    // context's own memory. cuda.h: `total` is the memory available to the current context
    // (less than the whole device under MIG or an MPS limit, for example); `free` is the
    // device memory free according to the OS, device-wide, and CUDA is not guaranteed to be
    // able to allocate all of it.
    course::printStep(1, "the primary context and free memory");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", ordinal, name);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    size_t freeAtStart = 0;
    size_t totalMemory = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeAtStart, &totalMemory));
    std::printf("device total memory (available to this context): %zu bytes\n", totalMemory);
    std::printf("device free memory at start: %zu bytes\n", freeAtStart);

    // Step 2: REPORT_DRIVER rather than CHECK_DRIVER: --size comes from the user, and a
    // size the device cannot hold is an error this program reports and cleans up after,
    // not a bug. A failed cuMemAlloc allocates nothing: free memory must not move.
    course::printStep(2, "allocate device memory");
    CUdeviceptr deviceA = 0;
    if (const CUresult allocated = REPORT_DRIVER(cuMemAlloc(&deviceA, bytes)); allocated != CUDA_SUCCESS) {
        std::printf("cuMemAlloc of %zu bytes: %s, nothing was allocated\n", bytes, course::driverErrorName(allocated));
        verdict.checkFreeMemory("free memory unchanged after the failed cuMemAlloc", freeMemoryDifference(freeAtStart) == 0);
        CHECK_DRIVER(cuCtxSetCurrent(nullptr));
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
        std::printf("primary context: released\n");
        verdict.check("device buffer of the requested size allocated", false);
        return verdict.finish();
    }
    // A CUdeviceptr is an integer (unsigned long long on 64-bit systems), not a pointer:
    // printf's %p expects a void* and is undefined for it. Print it as hex, with a cast.
    std::printf("device buffer A: 0x%llx (%zu bytes)\n", static_cast<unsigned long long>(deviceA), bytes);
    size_t freeWithA = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeWithA, &totalMemory));
    std::printf("device free memory after cuMemAlloc: %zu bytes (%lld bytes less)\n", freeWithA,
                static_cast<long long>(freeAtStart) - static_cast<long long>(freeWithA));
    std::printf("memory type of the cuMemAlloc buffer: %s\n", lesson05::memoryTypeOf(deviceA).text().c_str());

    // Step 3: N counts elements of the function's width (1, 2 or 4 bytes), not bytes, and
    // the address must be aligned to that width. A memset may return before it is done;
    // the cuMemcpyDtoH after it runs after it on the same (default) stream and returns
    // once the data is on the host.
    course::printStep(3, "cuMemsetD32, D16, D8: N counts elements, not bytes");
    const size_t count32 = bytes / 4;
    const size_t count16 = bytes / 2;
    // cuMemsetD32 takes the 32 bits to store. std::bit_cast gives a float's bits without
    // undefined behaviour; *(int*)&value breaks C++'s aliasing rules.
    constexpr float kFloatValue = 555.0f;
    constexpr std::uint32_t kFloatBits = std::bit_cast<std::uint32_t>(kFloatValue);
    CHECK_DRIVER(cuMemsetD32(deviceA, kFloatBits, count32));
    std::vector<float> floats(count32);
    CHECK_DRIVER(cuMemcpyDtoH(floats.data(), deviceA, bytes));
    const auto floatsSet = static_cast<size_t>(std::count(floats.begin(), floats.end(), kFloatValue));
    std::printf("cuMemsetD32 555.0f: %zu of %zu floats read back as 555.0f (bits 0x%08x)\n", floatsSet, count32,
                static_cast<unsigned int>(kFloatBits));
    verdict.check("cuMemsetD32 fills every float", floatsSet == count32);
    // 0x3c00 is 1.0 in IEEE half precision: this is how an fp16 tensor is filled with ones.
    constexpr std::uint16_t kHalfOne = 0x3c00;
    CHECK_DRIVER(cuMemsetD16(deviceA, kHalfOne, count16));
    std::vector<std::uint16_t> halves(count16);
    CHECK_DRIVER(cuMemcpyDtoH(halves.data(), deviceA, bytes));
    const auto halvesSet = static_cast<size_t>(std::count(halves.begin(), halves.end(), kHalfOne));
    std::printf("cuMemsetD16 0x3c00 (1.0 in fp16): %zu of %zu halves read back as 0x3c00\n", halvesSet, count16);
    verdict.check("cuMemsetD16 fills every half", halvesSet == count16);
    // cuMemsetD8(pointer, 0, bytes) is the usual way to zero a buffer; 0xa5 is easier to spot.
    constexpr unsigned char kByteValue = 0xa5;
    CHECK_DRIVER(cuMemsetD8(deviceA, kByteValue, bytes));
    std::vector<unsigned char> raw(bytes);
    CHECK_DRIVER(cuMemcpyDtoH(raw.data(), deviceA, bytes));
    const auto bytesSet = static_cast<size_t>(std::count(raw.begin(), raw.end(), kByteValue));
    std::printf("cuMemsetD8 0xa5: %zu of %zu bytes read back as 0xa5\n", bytesSet, bytes);
    verdict.check("cuMemsetD8 fills every byte", bytesSet == bytes);
    // A range in the middle: 555.0f over the 0xa5 bytes, starting at an element boundary.
    const size_t firstElement = count32 / 4;
    const size_t rangeElements = std::max<size_t>(1, count32 / 2);
    CHECK_DRIVER(cuMemsetD32(deviceA + firstElement * 4, kFloatBits, rangeElements));
    CHECK_DRIVER(cuMemcpyDtoH(raw.data(), deviceA, bytes));
    const PartialFill partial = countPartialFill(raw, firstElement, rangeElements, kFloatValue, kByteValue);
    const size_t outsideBytes = bytes - rangeElements * 4;
    std::printf(
        "partial cuMemsetD32 on elements [%zu, %zu): %zu of %zu set to 555.0f, %zu of %zu bytes outside still 0xa5\n",
        firstElement, firstElement + rangeElements, partial.insideSet, rangeElements, partial.outsideKept,
        outsideBytes);
    verdict.check("partial cuMemsetD32 sets its range and nothing else",
                  partial.insideSet == rangeElements && partial.outsideKept == outsideBytes);

    // Step 4: the synchronous copies run on the default stream in order: the DtoD may
    // return before it is done, but the DtoH after it waits for it and returns only when
    // the data is in `back`.
    course::printStep(4, "synchronous copies: host -> device -> device -> host");
    CUdeviceptr deviceB = 0;
    CHECK_DRIVER(cuMemAlloc(&deviceB, bytes));
    std::printf("device buffer B: 0x%llx (%zu bytes)\n", static_cast<unsigned long long>(deviceB), bytes);
    std::vector<unsigned char> source(bytes);
    std::vector<unsigned char> back(bytes);
    for (size_t i = 0; i < bytes; ++i) source[i] = static_cast<unsigned char>((i * 2654435761u) >> 24);
    CHECK_DRIVER(cuMemcpyHtoD(deviceA, source.data(), bytes));
    CHECK_DRIVER(cuMemcpyDtoD(deviceB, deviceA, bytes));
    CHECK_DRIVER(cuMemcpyDtoH(back.data(), deviceB, bytes));
    const bool syncRoundTrip = back == source;
    std::printf("round trip HtoD -> DtoD -> DtoH: %s (%zu bytes)\n", syncRoundTrip ? "equal" : "DIFFERENT", bytes);
    verdict.check("round trip returns the source", syncRoundTrip);

    // Step 5: give everything back, newest first, and check it two ways: free memory is
    // exactly where it started, and the driver no longer knows the freed addresses (a
    // freed address is neither allocated, mapped nor registered: CUDA_ERROR_INVALID_VALUE).
    // A process exit would hide a leak; a server that runs for weeks does not.
    course::printStep(5, "release everything and check");
    CHECK_DRIVER(cuMemFree(deviceB));
    CHECK_DRIVER(cuMemFree(deviceA));
    verdict.checkFreeMemory("free memory back after cuMemFree", freeMemoryDifference(freeAtStart) == 0);
    const lesson05::MemoryType freedA = lesson05::memoryTypeOf(deviceA);
    const lesson05::MemoryType freedB = lesson05::memoryTypeOf(deviceB);
    std::printf("memory type of buffer A after cuMemFree: %s\n", freedA.text().c_str());
    std::printf("memory type of buffer B after cuMemFree: %s\n", freedB.text().c_str());
    verdict.check("driver no longer knows the freed buffers", freedA.unknownToDriver() && freedB.unknownToDriver());
    // Unbind, then release: this program holds the only reference, so the release
    // destroys the primary context.
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context: released\n");
    return verdict.finish();
}
