// Lesson 11 — virtual memory management: addresses and physical memory, apart.
//
// cuMemAlloc gives device memory and its address in one call. The virtual memory
// management (VMM) calls split the two: cuMemCreate makes physical memory and returns a
// handle, cuMemAddressReserve reserves a range of addresses, cuMemMap puts the memory
// behind the addresses, and cuMemSetAccess says which device may touch them. The lesson
// maps one allocation at two addresses, provokes the error of reading a range that has
// no access, shows the memory outliving cuMemRelease while it is mapped, grows a buffer
// that keeps its address, and times that against allocate-copy-free.
//
//   11-virtual-memory              every step; growth timing 2 MiB -> 64 MiB
//   11-virtual-memory --bench      growth timing 2 MiB -> 1 GiB, with "bench:" lines
//   11-virtual-memory --device N   another GPU
#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "growable_buffer.h"
#include "growth_timing.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

std::string sizeText(size_t bytes) {
    return bytes >= 1024 * kMiB ? std::to_string(bytes / (1024 * kMiB)) + " GiB"
                                : std::to_string(bytes / kMiB) + " MiB";
}

size_t roundUp(size_t bytes, size_t granularity) {
    return (bytes + granularity - 1) / granularity * granularity;
}

size_t freeDeviceMemory() {
    size_t freeBytes = 0;
    size_t totalBytes = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &totalBytes));
    return freeBytes;
}

long long difference(size_t after, size_t before) {
    return static_cast<long long>(after) - static_cast<long long>(before);
}

// Copies `bytes` at `address` back to the host and counts the 32-bit words equal to `word`.
size_t wordsEqualTo(CUdeviceptr address, size_t bytes, std::uint32_t word) {
    std::vector<std::uint32_t> host(bytes / 4);
    CHECK_DRIVER(cuMemcpyDtoH(host.data(), address, bytes));
    return static_cast<size_t>(std::count(host.begin(), host.end(), word));
}

const char* accessName(unsigned long long flags) {
    switch (flags) {
        case CU_MEM_ACCESS_FLAGS_PROT_NONE: return "CU_MEM_ACCESS_FLAGS_PROT_NONE";
        case CU_MEM_ACCESS_FLAGS_PROT_READ: return "CU_MEM_ACCESS_FLAGS_PROT_READ";
        case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: return "CU_MEM_ACCESS_FLAGS_PROT_READWRITE";
        default: return "(unknown CUmemAccess_flags)";
    }
}

constexpr std::uint32_t kWordA = 0xaaaa0001;  // written through range A
constexpr std::uint32_t kWordB = 0xbbbb0002;  // written through range B

// The word each chunk of the growable buffer is filled with: its number, marked.
std::uint32_t chunkWord(size_t chunk) {
    return 0x600d0000u + static_cast<std::uint32_t>(chunk);
}

// Reads back every chunk but the newest through `address`, the buffer's address before
// the growth, and counts the words that still hold their chunk's word.
size_t wordsKeptBeforeNewestChunk(const GrowableBuffer& buffer, CUdeviceptr address) {
    size_t kept = 0;
    size_t start = 0;
    for (size_t chunk = 0; chunk + 1 < buffer.chunks.size(); ++chunk) {
        kept += wordsEqualTo(address + start, buffer.chunkBytes[chunk], chunkWord(chunk));
        start += buffer.chunkBytes[chunk];
    }
    return kept;
}

// Step 7's buffer: reserves `reservedBytes` once, grows from `firstSize` to `lastSize` by
// doubling, and after each growth reads every earlier chunk back through the address the
// buffer had before it. True when the address never moved and every word was still there.
bool growInPlace(CUdevice device, size_t firstSize, size_t lastSize, size_t reservedBytes) {
    GrowableBuffer buffer = reserveGrowable(reservedBytes);
    const CUdeviceptr address = buffer.base;  // what a user of the buffer would keep
    std::printf("reserved %s of addresses at 0x%llx\n", sizeText(buffer.reserved).c_str(),
                static_cast<unsigned long long>(address));
    bool neverMoved = true;
    bool allKept = true;
    for (size_t size = firstSize; size <= lastSize; size *= 2) {
        const size_t before = buffer.size;
        growTo(buffer, size, device);
        if (before > 0) {
            const size_t kept = wordsKeptBeforeNewestChunk(buffer, address);
            std::printf("buffer address after growing %s -> %s: 0x%llx (%s)\n", sizeText(before).c_str(),
                        sizeText(size).c_str(), static_cast<unsigned long long>(buffer.base),
                        buffer.base == address ? "unchanged" : "MOVED");
            std::printf("words written before growing to %s, read back at the same address: %zu of %zu\n",
                        sizeText(size).c_str(), kept, before / 4);
            neverMoved = neverMoved && buffer.base == address;
            allKept = allKept && kept == before / 4;
        }
        CHECK_DRIVER(cuMemsetD32(address + before, chunkWord(buffer.chunks.size() - 1), (size - before) / 4));
    }
    const size_t chunkCount = buffer.chunks.size();
    release(buffer);
    std::printf("released: %zu chunks unmapped and released newest first, then the addresses freed\n", chunkCount);
    return neverMoved && allKept;
}

// One table row per growth step, a total row, and with --bench the "bench:" lines.
void printGrowthTable(const std::vector<GrowthStep>& steps, bool bench) {
    std::printf("method: host clock around one step's calls, ending with cuCtxSynchronize; second of two runs\n");
    std::printf("| step | remap | alloc + copy + free |\n| --- | --- | --- |\n");
    double remapTotal = 0.0;
    double copyTotal = 0.0;
    for (const GrowthStep& step : steps) {
        std::printf("| %s -> %s | %.3f ms | %.3f ms |\n", sizeText(step.from).c_str(), sizeText(step.to).c_str(),
                    step.remapMs, step.copyMs);
        remapTotal += step.remapMs;
        copyTotal += step.copyMs;
    }
    std::printf("| total | %.3f ms | %.3f ms |\n", remapTotal, copyTotal);
    if (!bench) return;
    const std::string range = sizeText(steps.front().from) + " -> " + sizeText(steps.back().to);
    std::printf("bench: grow %s by remapping = %.3f ms\n", range.c_str(), remapTotal);
    std::printf("bench: grow %s by alloc + copy + free = %.3f ms\n", range.c_str(), copyTotal);
    std::printf("bench: last step by remapping = %.3f ms\n", steps.back().remapMs);
    std::printf("bench: last step by alloc + copy + free = %.3f ms\n", steps.back().copyMs);
    std::printf("bench: remap vs alloc + copy + free, total = %.1f x faster\n", copyTotal / remapTotal);
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const bool bench = args.has("--bench");
    const int ordinal = args.deviceOrdinal();

    // Step 1: VMM is a device capability (CUDA 10.2 and later; not on every Tegra or vGPU).
    course::printStep(1, "initialise the driver and check for virtual memory management");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    int vmmSupported = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&vmmSupported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device));
    std::printf("device %d name: %s\n", ordinal, name);
    std::printf("virtual memory management supported: %s\n", vmmSupported ? "yes" : "no");
    if (!vmmSupported) {
        std::printf("Result = SKIP (device %d does not support virtual memory management)\n", ordinal);
        return course::kExitNotApplicable;
    }
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    const size_t freeAtStart = freeDeviceMemory();
    std::printf("device free memory at start: %zu bytes\n", freeAtStart);

    // Step 2: every size and offset given to cuMemCreate and cuMemMap is a multiple of
    // the minimum granularity; the recommended one is what the hardware maps best.
    course::printStep(2, "allocation granularity");
    const CUmemAllocationProp properties = deviceMemoryProperties(device);
    size_t minimum = 0;
    size_t recommended = 0;
    CHECK_DRIVER(cuMemGetAllocationGranularity(&minimum, &properties, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK_DRIVER(cuMemGetAllocationGranularity(&recommended, &properties, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    std::printf("granularity minimum: %zu bytes\n", minimum);
    std::printf("granularity recommended: %zu bytes\n", recommended);
    const size_t requested = 5 * kMiB + 1;
    CUmemGenericAllocationHandle refusedHandle = 0;
    const CUresult unrounded = REPORT_DRIVER(cuMemCreate(&refusedHandle, requested, &properties, 0));
    std::printf("cuMemCreate of %zu bytes, not rounded: %s\n", requested, course::driverErrorName(unrounded));
    if (unrounded == CUDA_SUCCESS) CHECK_DRIVER(cuMemRelease(refusedHandle));  // a driver that rounds for us
    const size_t bytes = roundUp(requested, minimum);
    const size_t words = bytes / 4;
    std::printf("rounded up to the minimum granularity: %zu bytes\n", bytes);

    // Step 3: memory, addresses, mapping, access: four calls where cuMemAlloc makes one.
    course::printStep(3, "physical memory, a range of addresses, map, set access");
    const size_t freeBeforeCreate = freeDeviceMemory();
    CUmemGenericAllocationHandle physical = 0;
    CHECK_DRIVER(cuMemCreate(&physical, bytes, &properties, 0));
    const size_t freeAfterCreate = freeDeviceMemory();
    CUdeviceptr rangeA = 0;
    CHECK_DRIVER(cuMemAddressReserve(&rangeA, bytes, 0, 0, 0));
    std::printf("device memory taken by cuMemCreate: %lld bytes\n", difference(freeBeforeCreate, freeAfterCreate));
    std::printf("device memory taken by cuMemAddressReserve: %lld bytes\n",
                difference(freeAfterCreate, freeDeviceMemory()));
    CHECK_DRIVER(cuMemMap(rangeA, bytes, 0, physical, 0));
    const CUmemAccessDesc readWrite = accessFor(device, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_DRIVER(cuMemSetAccess(rangeA, bytes, &readWrite, 1));
    std::printf("range A: 0x%llx (%zu bytes)\n", static_cast<unsigned long long>(rangeA), bytes);
    CHECK_DRIVER(cuMemsetD32(rangeA, kWordA, words));
    const size_t readBackA = wordsEqualTo(rangeA, bytes, kWordA);
    std::printf("written through range A and read back: %zu of %zu words\n", readBackA, words);

    // Step 4: a second range mapped to the same handle: two addresses, one memory.
    course::printStep(4, "two ranges, one physical allocation");
    CUdeviceptr rangeB = 0;
    CHECK_DRIVER(cuMemAddressReserve(&rangeB, bytes, 0, 0, 0));
    CHECK_DRIVER(cuMemMap(rangeB, bytes, 0, physical, 0));
    CHECK_DRIVER(cuMemSetAccess(rangeB, bytes, &readWrite, 1));
    std::printf("range B: 0x%llx (%s address as range A)\n", static_cast<unsigned long long>(rangeB),
                rangeB == rangeA ? "the same" : "a different");
    const size_t aliasSeenInB = wordsEqualTo(rangeB, bytes, kWordA);
    std::printf("read through range B what range A wrote: %zu of %zu words\n", aliasSeenInB, words);
    CHECK_DRIVER(cuMemsetD32(rangeB + bytes / 2, kWordB, words / 2));
    const size_t aliasSeenInA = wordsEqualTo(rangeA + bytes / 2, bytes / 2, kWordB);
    std::printf("read through range A what range B wrote: %zu of %zu words\n", aliasSeenInA, words / 2);

    // Step 5: a mapping without cuMemSetAccess is in the address space but open to no
    // device. The driver refuses a copy from it before any engine touches it; a kernel
    // reading it would fault instead, and a fault ends the context.
    course::printStep(5, "access rights: a range mapped without cuMemSetAccess");
    CUdeviceptr rangeC = 0;
    CHECK_DRIVER(cuMemAddressReserve(&rangeC, bytes, 0, 0, 0));
    CHECK_DRIVER(cuMemMap(rangeC, bytes, 0, physical, 0));
    const CUmemLocation here = deviceMemoryLocation(device);
    unsigned long long flagsBefore = 0;
    CHECK_DRIVER(cuMemGetAccess(&flagsBefore, &here, rangeC));
    std::printf("range C: 0x%llx, access for device %d: %s\n", static_cast<unsigned long long>(rangeC), ordinal,
                accessName(flagsBefore));
    std::vector<std::uint32_t> probe(1024);
    const CUresult noAccess = REPORT_DRIVER(cuMemcpyDtoH(probe.data(), rangeC, probe.size() * 4));
    std::printf("cuMemcpyDtoH from range C without access: %s\n",
                noAccess == CUDA_SUCCESS ? "CUDA_SUCCESS (not refused)" : course::driverErrorName(noAccess));
    CHECK_DRIVER(cuCtxSynchronize());
    std::printf("context still usable after the refused copy: yes\n");
    const CUmemAccessDesc readOnly = accessFor(device, CU_MEM_ACCESS_FLAGS_PROT_READ);
    CHECK_DRIVER(cuMemSetAccess(rangeC, bytes, &readOnly, 1));
    unsigned long long flagsAfter = 0;
    CHECK_DRIVER(cuMemGetAccess(&flagsAfter, &here, rangeC));
    std::printf("access for device %d after cuMemSetAccess: %s\n", ordinal, accessName(flagsAfter));
    const size_t seenInC = wordsEqualTo(rangeC, bytes / 2, kWordA);
    std::printf("read through range C with read access: %zu of %zu words\n", seenInC, words / 2);

    // Step 6: the handle and the mappings are counted apart. cuMemRelease drops the
    // handle, but the memory stays as long as one range still maps it.
    course::printStep(6, "cuMemRelease while mapped, then unmap and free the addresses");
    const size_t freeMapped = freeDeviceMemory();
    CHECK_DRIVER(cuMemRelease(physical));
    std::printf("device memory given back by cuMemRelease while mapped: %lld bytes\n",
                difference(freeDeviceMemory(), freeMapped));
    const size_t afterRelease = wordsEqualTo(rangeA, bytes / 2, kWordA);
    std::printf("read through range A after cuMemRelease: %zu of %zu words\n", afterRelease, words / 2);
    CHECK_DRIVER(cuMemUnmap(rangeC, bytes));
    CHECK_DRIVER(cuMemUnmap(rangeB, bytes));
    CHECK_DRIVER(cuMemUnmap(rangeA, bytes));  // the last mapping: now the memory goes
    std::printf("device memory given back by the last cuMemUnmap: %lld bytes\n",
                difference(freeDeviceMemory(), freeMapped));
    CHECK_DRIVER(cuMemAddressFree(rangeC, bytes));
    CHECK_DRIVER(cuMemAddressFree(rangeB, bytes));
    CHECK_DRIVER(cuMemAddressFree(rangeA, bytes));

    // Step 7: a buffer that grows in place. The address the application holds stays
    // valid: each growth maps new memory after the old, which is neither moved nor copied.
    course::printStep(7, "a growable buffer that keeps its address");
    const size_t firstSize = roundUp(2 * kMiB, recommended);
    const bool grewInPlace = growInPlace(device, firstSize, 16 * firstSize, roundUp(1024 * kMiB, recommended));

    // Step 8: growing by remapping against growing by allocate-copy-free.
    course::printStep(8, "time per growth step: remap vs cuMemAlloc + cuMemcpyDtoD + cuMemFree");
    const std::vector<GrowthStep> steps = timeGrowth(device, firstSize, bench ? 512 * firstSize : 32 * firstSize);
    printGrowthTable(steps, bench);

    // Step 9: everything above was given back; the context goes last.
    course::printStep(9, "release the context and check");
    const size_t freeAtEnd = freeDeviceMemory();
    const bool memoryBack = std::llabs(difference(freeAtEnd, freeAtStart)) <= static_cast<long long>(recommended);
    std::printf("free memory difference (end - start): %lld bytes (allowed: one %zu-byte granule)\n",
                difference(freeAtEnd, freeAtStart), recommended);
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context: released\n");
    const bool pass = unrounded != CUDA_SUCCESS && readBackA == words && aliasSeenInB == words &&
                      aliasSeenInA == words / 2 && noAccess != CUDA_SUCCESS && flagsBefore == 0 &&
                      seenInC == words / 2 && afterRelease == words / 2 && grewInPlace && memoryBack;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
