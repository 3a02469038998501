// Lesson 11 — virtual memory management: addresses and physical memory, apart.
//
// cuMemAlloc gives device memory and its address in one call. The virtual memory
// management (VMM) calls split the two: cuMemCreate makes physical memory and returns a
// handle, cuMemAddressReserve reserves a range of addresses, cuMemMap puts the memory
// behind the addresses, and cuMemSetAccess says which device may touch them. The lesson
// maps one allocation at two addresses, provokes the error of reading a range that has
// no access, shows which call gives the memory back (the last cuMemUnmap, not cuMemRelease
// while mapped), grows a buffer that keeps its address, and times that against
// allocate-copy-free. Every "check NAME:" line feeds the Result.
//
//   11-virtual-memory              every step; growth timing 2 MiB -> 64 MiB, 5 timed runs
//   11-virtual-memory --bench      growth timing 2 MiB -> 1 GiB, 11 timed runs, "bench:" lines
//   11-virtual-memory --device N   another GPU
#include <cuda.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "grow_in_place.h"
#include "growable_buffer.h"
#include "growth_timing.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

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

const char* accessName(unsigned long long flags) {
    switch (flags) {
        case CU_MEM_ACCESS_FLAGS_PROT_NONE: return "CU_MEM_ACCESS_FLAGS_PROT_NONE";
        case CU_MEM_ACCESS_FLAGS_PROT_READ: return "CU_MEM_ACCESS_FLAGS_PROT_READ";
        case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: return "CU_MEM_ACCESS_FLAGS_PROT_READWRITE";
        default: return "(unknown CUmemAccess_flags)";
    }
}

// Step 2: cuMemCreate "must" get a multiple of the minimum granularity (cuda.h): a size that is not
// one is refused, one granule is accepted. Each allocation made is released at once; a driver that
// rounds the unrounded size up for us would make one too.
void sizesGivenToCreate(course::Verdict& verdict, const CUmemAllocationProp& properties, size_t unrounded,
                        size_t minimum) {
    CUresult answers[2] = {CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN};  // no answer yet: neither passes
    const size_t sizes[2] = {unrounded, minimum};
    for (int i = 0; i < 2; ++i) {
        CUmemGenericAllocationHandle handle = 0;
        answers[i] = REPORT_DRIVER(cuMemCreate(&handle, sizes[i], &properties, 0));
        if (answers[i] == CUDA_SUCCESS) CHECK_DRIVER(cuMemRelease(handle));
    }
    std::printf("cuMemCreate of %zu bytes, not rounded: %s\n", unrounded, course::driverErrorName(answers[0]));
    std::printf("cuMemCreate of one minimum granule: %s\n", course::driverErrorName(answers[1]));
    verdict.check("unrounded size refused by cuMemCreate", answers[0] != CUDA_SUCCESS);
    verdict.check("one minimum granule accepted by cuMemCreate", answers[1] == CUDA_SUCCESS);
}

// Step 3: cuMemAddressReserve's alignment is the "Alignment of the reserved virtual address range
// requested" (cuda.h), a power of two. Two one-granule ranges reserved with a 1 GiB alignment must
// each start at a multiple of 1 GiB; then their addresses go back.
void alignedReservations(course::Verdict& verdict, size_t granule) {
    constexpr size_t kAlignment = size_t{1} << 30;
    CUdeviceptr ranges[2] = {};
    int aligned = 0;
    for (CUdeviceptr& range : ranges) {
        CHECK_DRIVER(cuMemAddressReserve(&range, granule, kAlignment, 0, 0));
        aligned += range % kAlignment == 0 ? 1 : 0;
    }
    CHECK_DRIVER(cuMemAddressFree(ranges[1], granule));
    CHECK_DRIVER(cuMemAddressFree(ranges[0], granule));
    std::printf("ranges reserved with alignment 1 GiB that start at a multiple of 1 GiB: %d of 2\n", aligned);
    verdict.check("ranges reserved with an alignment start at a multiple of it", aligned == 2);
}

constexpr std::uint32_t kWordA = 0xaaaa0001;  // written through range A
constexpr std::uint32_t kWordB = 0xbbbb0002;  // written through range B

// Step 6: cuMemRelease while ranges A, B, C (`ranges`, in that order) still map the handle, a
// read through A, then the unmaps C, B, A, with free memory read after every call; then the
// addresses go back.
void releaseWhileMapped(course::Verdict& verdict, CUmemGenericAllocationHandle physical,
                        const std::array<CUdeviceptr, 3>& ranges, size_t bytes) {
    size_t freeBefore = freeDeviceMemory();
    auto givenBackBy = [&](const char* call) {  // prints and returns what `call` gave back
        const size_t freeNow = freeDeviceMemory();
        const long long given = difference(freeNow, freeBefore);
        std::printf("device memory given back by %s: %lld bytes\n", call, given);
        freeBefore = freeNow;
        return given;
    };
    const auto [rangeA, rangeB, rangeC] = ranges;
    CHECK_DRIVER(cuMemRelease(physical));
    const long long byRelease = givenBackBy("cuMemRelease (ranges A, B, C still mapped)");
    const size_t afterRelease = wordsEqualTo(rangeA, bytes / 2, kWordA);
    std::printf("read through range A after cuMemRelease: %zu of %zu words\n", afterRelease, bytes / 8);
    verdict.check("data still readable after cuMemRelease while mapped", afterRelease == bytes / 8);
    CHECK_DRIVER(cuMemUnmap(rangeC, bytes));
    const long long byUnmapC = givenBackBy("cuMemUnmap of range C (A and B still mapped)");
    CHECK_DRIVER(cuMemUnmap(rangeB, bytes));
    const long long byUnmapB = givenBackBy("cuMemUnmap of range B (A still mapped)");
    CHECK_DRIVER(cuMemUnmap(rangeA, bytes));  // the last mapping: now the memory can go
    const long long byUnmapA = givenBackBy("cuMemUnmap of range A (the last mapping)");
    const auto whole = static_cast<long long>(bytes);
    verdict.checkFreeMemory("memory kept while a mapping remains", byRelease < whole && byUnmapC < whole && byUnmapB < whole);
    verdict.checkFreeMemory("memory given back by the last cuMemUnmap", byUnmapA >= whole);
    CHECK_DRIVER(cuMemAddressFree(rangeC, bytes));
    CHECK_DRIVER(cuMemAddressFree(rangeB, bytes));
    CHECK_DRIVER(cuMemAddressFree(rangeA, bytes));
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const bool bench = args.has("--bench");
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

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

    // Step 2: sizes given to cuMemCreate and cuMemMap are multiples of the minimum
    // granularity; the recommended one is "for best performance" (cuda.h), nothing more.
    course::printStep(2, "allocation granularity");
    const CUmemAllocationProp properties = deviceMemoryProperties(device);
    size_t minimum = 0;
    size_t recommended = 0;
    CHECK_DRIVER(cuMemGetAllocationGranularity(&minimum, &properties, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK_DRIVER(cuMemGetAllocationGranularity(&recommended, &properties, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    std::printf("granularity minimum: %zu bytes\n", minimum);
    std::printf("granularity recommended: %zu bytes\n", recommended);
    const size_t requested = 5 * kMiB + 1;
    sizesGivenToCreate(verdict, properties, requested, minimum);
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
    alignedReservations(verdict, minimum);
    CHECK_DRIVER(cuMemMap(rangeA, bytes, 0, physical, 0));
    const CUmemAccessDesc readWrite = accessFor(device, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_DRIVER(cuMemSetAccess(rangeA, bytes, &readWrite, 1));
    std::printf("range A: 0x%llx (%zu bytes)\n", static_cast<unsigned long long>(rangeA), bytes);
    CHECK_DRIVER(cuMemsetD32(rangeA, kWordA, words));
    const size_t readBackA = wordsEqualTo(rangeA, bytes, kWordA);
    std::printf("written through range A and read back: %zu of %zu words\n", readBackA, words);
    verdict.check("data written through range A read back", readBackA == words);

    // Step 4: a second range mapped to the same handle: two addresses, one memory. The
    // offset into the handle "currently must be zero" (cuda.h): a mapping of its second
    // granule alone is refused.
    course::printStep(4, "two ranges, one physical allocation");
    CUdeviceptr rangeB = 0;
    CHECK_DRIVER(cuMemAddressReserve(&rangeB, bytes, 0, 0, 0));
    const CUresult offsetMap = REPORT_DRIVER(cuMemMap(rangeB, minimum, minimum, physical, 0));
    std::printf("cuMemMap at offset %zu into the handle: %s\n", minimum, course::driverErrorName(offsetMap));
    if (offsetMap == CUDA_SUCCESS) CHECK_DRIVER(cuMemUnmap(rangeB, minimum));  // a driver that allows it
    verdict.check("non-zero offset refused by cuMemMap", offsetMap != CUDA_SUCCESS);
    CHECK_DRIVER(cuMemMap(rangeB, bytes, 0, physical, 0));
    CHECK_DRIVER(cuMemSetAccess(rangeB, bytes, &readWrite, 1));
    std::printf("range B: 0x%llx (%s address as range A)\n", static_cast<unsigned long long>(rangeB),
                rangeB == rangeA ? "the same" : "a different");
    const size_t aliasSeenInB = wordsEqualTo(rangeB, bytes, kWordA);
    std::printf("read through range B what range A wrote: %zu of %zu words\n", aliasSeenInB, words);
    CHECK_DRIVER(cuMemsetD32(rangeB + bytes / 2, kWordB, words / 2));
    const size_t aliasSeenInA = wordsEqualTo(rangeA + bytes / 2, bytes / 2, kWordB);
    std::printf("read through range A what range B wrote: %zu of %zu words\n", aliasSeenInA, words / 2);
    verdict.check("range B reads what range A wrote", aliasSeenInB == words);
    verdict.check("range A reads what range B wrote", aliasSeenInA == words / 2);

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
    verdict.check("range mapped without cuMemSetAccess has no access", flagsBefore == CU_MEM_ACCESS_FLAGS_PROT_NONE);
    std::vector<std::uint32_t> probe(1024);
    const CUresult noAccess = REPORT_DRIVER(cuMemcpyDtoH(probe.data(), rangeC, probe.size() * 4));
    std::printf("cuMemcpyDtoH from range C without access: %s\n",
                noAccess == CUDA_SUCCESS ? "CUDA_SUCCESS (not refused)" : course::driverErrorName(noAccess));
    verdict.check("copy from a range without access refused", noAccess != CUDA_SUCCESS);
    CHECK_DRIVER(cuCtxSynchronize());
    std::printf("context still usable after the refused copy: yes\n");
    const CUmemAccessDesc readOnly = accessFor(device, CU_MEM_ACCESS_FLAGS_PROT_READ);
    CHECK_DRIVER(cuMemSetAccess(rangeC, bytes, &readOnly, 1));
    unsigned long long flagsAfter = 0;
    CHECK_DRIVER(cuMemGetAccess(&flagsAfter, &here, rangeC));
    std::printf("access for device %d after cuMemSetAccess: %s\n", ordinal, accessName(flagsAfter));
    const size_t seenInC = wordsEqualTo(rangeC, bytes / 2, kWordA);
    std::printf("read through range C with read access: %zu of %zu words\n", seenInC, words / 2);
    verdict.check("range C readable once read access is set",
                  flagsAfter == CU_MEM_ACCESS_FLAGS_PROT_READ && seenInC == words / 2);

    // Step 6: the handle and each mapping hold the memory; cuda.h: it "will be freed when all
    // outstanding mappings to the memory are unmapped and when all outstanding references to
    // the handle ... are also released". Free memory is read after every call, to show which
    // one gives it back.
    course::printStep(6, "cuMemRelease while mapped, then unmap and free the addresses");
    releaseWhileMapped(verdict, physical, {rangeA, rangeB, rangeC}, bytes);

    // Step 7: a buffer that grows in place. The address the application holds stays
    // valid: each growth maps new memory after the old, which is neither moved nor copied.
    // Chunk sizes are multiples of both granularities (cuda.h does not say that one is a
    // multiple of the other; on the H100 both are 2 MiB).
    course::printStep(7, "a growable buffer that keeps its address");
    const size_t unit = std::lcm(minimum, recommended);
    const size_t firstSize = roundUp(2 * kMiB, unit);
    growInPlace(verdict, device, firstSize, 16 * firstSize, roundUp(1024 * kMiB, unit));

    // Step 8: growing by remapping against growing by allocate-copy-free (growth_timing.cpp).
    course::printStep(8, "time per growth step: remap vs cuMemAlloc + cuMemcpyDtoD + cuMemFree");
    const std::vector<GrowthStep> steps =
        timeGrowth(device, firstSize, bench ? 512 * firstSize : 32 * firstSize, bench ? 11 : 5);
    printGrowthTable(steps, bench);

    // Step 9: everything above was given back; the context goes last.
    course::printStep(9, "release the context and check");
    const long long leftOver = difference(freeDeviceMemory(), freeAtStart);
    std::printf("free memory difference (end - start): %lld bytes (allowed: one %zu-byte granule)\n", leftOver,
                recommended);
    verdict.checkFreeMemory("free memory back at its start", std::llabs(leftOver) <= static_cast<long long>(recommended));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context: released\n");
    return verdict.finish();
}
