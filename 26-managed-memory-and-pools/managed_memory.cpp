// Lesson 26, program 1 — managed memory on a discrete GPU, as cuda.h describes it.
//
// cuMemAllocManaged gives one pointer that the CPU and the GPU both use; the Unified Memory
// driver moves its pages to whichever processor touches them. The program reads what the device
// says it can do with such memory, lets the CPU and a kernel share one buffer, prefetches it to the
// GPU and back with cuMemPrefetchAsync, gives advice with cuMemAdvise, and reads every answer back
// with cuMemRangeGetAttribute / cuMemRangeGetAttributes — in the old form (a device ordinal,
// CU_DEVICE_CPU, CU_DEVICE_INVALID) and in the _TYPE/_ID form (in 12.4's cuda.h, not in 11.8's).
// Prefetch and advice go through course::memPrefetchToDevice / memPrefetchToHost /
// memAdviseForDevice and course::memAdviseForHost: in 13.0's cuda.h both plain names take a
// CUmemLocation (cuda.h:99-100). Last, cuDeviceGetHostAtomicCapabilities (in 13.0's cuda.h, not in
// 12.4's): which atomics the link to the host does natively.
//
//   managed_memory               the walkthrough
//   managed_memory --device N    another GPU
#include <cuda.h>

#include <cstdio>
#include <string>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "managed_compat.h"
#include "managed_helpers.h"
#include "managed_queries.h"

namespace {

using lesson26::Where;

constexpr size_t kWords = size_t{16} << 20;  // 64 MiB of 32-bit words
constexpr size_t kBytes = kWords * sizeof(unsigned int);
constexpr unsigned int kSeed = 26;

// Step 1: what the device says about managed and pageable memory. Each value is printed with the
// comment cuda.h gives its enumerator, quoted whole; the values belong to the machine.
int printManagedAttributes(CUdevice device) {
    struct Named {
        CUdevice_attribute attribute;
        const char* name;
        const char* meaning;  // the enumerator's comment in cuda.h, verbatim
    };
    // The name printed is the enumerator's own spelling (#attribute): the value read and the name it is
    // printed under come from one token. The values are printed, never judged, and on a GPU where two of
    // them are equal no output would show one read under the other's name.
#define LESSON26_NAMED(attribute, meaning) Named{attribute, #attribute, meaning}
    static constexpr Named kAttributes[] = {
        // cuda.h:811
        LESSON26_NAMED(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, "Device can allocate managed memory on this system"),
        // cuda.h:817
        LESSON26_NAMED(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
                       "Device can coherently access managed memory concurrently with the CPU"),
        // cuda.h:816
        LESSON26_NAMED(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
                       "Device supports coherently accessing pageable memory without calling cudaHostRegister on it"),
        // cuda.h:828
        LESSON26_NAMED(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
                       "Device accesses pageable memory via the host's page tables."),
        // cuda.h:829
        LESSON26_NAMED(CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST,
                       "The host can directly access managed memory on the device without migration."),
    };
#undef LESSON26_NAMED
    for (const Named& named : kAttributes) {
        const int value = course::deviceAttribute(device, named.attribute);
        std::printf("%s: %d (%s: \"%s\")\n", named.name, value, value ? "1 means" : "1 would mean", named.meaning);
    }
    return course::deviceAttribute(device, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
}

// Step 2: the CPU writes the pattern through the pointer, a kernel doubles and increments every word
// in place, and the CPU reads the result through the same pointer after the stream is done.
void shareOnePointer(course::Verdict& verdict, const lesson26::Kernels& kernels, CUdeviceptr managed, CUstream stream) {
    auto* words = reinterpret_cast<unsigned int*>(managed);
    lesson26::writePattern(words, kWords, kSeed);
    CUdeviceptr data = managed;
    unsigned long long n = kWords;
    unsigned int mul = 2;
    unsigned int add = 1;
    void* params[] = {&data, &n, &mul, &add};
    lesson26::launch(kernels.scaleAdd, kWords, params, stream);
    CHECK_DRIVER(cuStreamSynchronize(stream));  // the CPU reads only after the kernel is done
    const size_t wrong = lesson26::wrongWords(words, kWords, kSeed, 2, 1);
    std::printf("words the kernel changed in place, as the CPU reads them: %zu of %zu\n", kWords - wrong, kWords);
    verdict.check("the CPU and a kernel read and write one managed pointer", wrong == 0);
}

// Step 4: prefetch to the GPU, a kernel, prefetch back to the host. LAST_PREFETCH_LOCATION is "the
// last location that the application requested": it "gives no indication as to whether the prefetch
// operation to that location has completed or even begun" (cuda.h:14714-14716). The program reads
// it after a synchronize all the same, so that no check depends on when the driver records it.
void prefetchBothWays(course::Verdict& verdict, const lesson26::Kernels& kernels, CUdeviceptr managed, int ordinal,
                      CUdevice device, CUstream stream, bool forms) {
    CHECK_DRIVER(course::memPrefetchToDevice(managed, kBytes, device, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const Where onGpu = lesson26::readLastPrefetch(managed, kBytes, forms);
    lesson26::printWhere("last prefetch location after the prefetch to the GPU", onGpu);
    verdict.check("after a prefetch to the GPU, the range names the GPU", lesson26::isDevice(onGpu, ordinal));

    CUdeviceptr data = managed;
    unsigned long long n = kWords;
    unsigned int mul = 3;
    unsigned int add = 7;
    void* params[] = {&data, &n, &mul, &add};
    lesson26::launch(kernels.scaleAdd, kWords, params, stream);  // (2p + 1) * 3 + 7 = 6p + 10
    CHECK_DRIVER(course::memPrefetchToHost(managed, kBytes, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const Where onHost = lesson26::readLastPrefetch(managed, kBytes, forms);
    lesson26::printWhere("last prefetch location after the prefetch to the host", onHost);
    verdict.check("after a prefetch to the host, the range names the host", lesson26::isHost(onHost));

    const size_t wrong = lesson26::wrongWords(reinterpret_cast<unsigned int*>(managed), kWords, kSeed, 6, 10);
    std::printf("words equal to (2p + 1) * 3 + 7 after both prefetches: %zu of %zu\n", kWords - wrong, kWords);
    verdict.check("after both prefetches, the CPU reads every word the kernel computed", wrong == 0);
}

// Step 5: advice, read back through cuMemRangeGetAttributes (several attributes in one call). Each
// answer is about "all pages in the memory range" (cuda.h:14690-14691, 14693-14697): advice on half
// of it leaves the whole range without that advice.
void adviseAndReadBack(course::Verdict& verdict, CUdeviceptr managed, int ordinal, CUdevice device, bool forms) {
    using lesson26::readAdvice;
    CHECK_DRIVER(course::memAdviseForDevice(managed, kBytes / 2, CU_MEM_ADVISE_SET_READ_MOSTLY, device));
    const int half = readAdvice(managed, kBytes / 2, forms).readMostly;
    const int whole = readAdvice(managed, kBytes, forms).readMostly;
    std::printf("read-mostly set on the first half: first half reads %d, whole range reads %d\n", half, whole);
    verdict.check("read-mostly on half the range: that half reads 1, the whole range 0", half == 1 && whole == 0);

    CHECK_DRIVER(course::memAdviseForDevice(managed, kBytes, CU_MEM_ADVISE_SET_READ_MOSTLY, device));
    const int set = readAdvice(managed, kBytes, forms).readMostly;
    std::printf("read-mostly after CU_MEM_ADVISE_SET_READ_MOSTLY: %d\n", set);
    verdict.check("SET_READ_MOSTLY reads back 1", set == 1);
    CHECK_DRIVER(course::memAdviseForDevice(managed, kBytes, CU_MEM_ADVISE_UNSET_READ_MOSTLY, device));
    const int unset = readAdvice(managed, kBytes, forms).readMostly;
    std::printf("read-mostly after CU_MEM_ADVISE_UNSET_READ_MOSTLY: %d\n", unset);
    verdict.check("UNSET_READ_MOSTLY reads back 0", unset == 0);

    CHECK_DRIVER(course::memAdviseForDevice(managed, kBytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, device));
    const Where gpu = readAdvice(managed, kBytes, forms).preferred;
    lesson26::printWhere("preferred location after SET_PREFERRED_LOCATION to the GPU", gpu);
    verdict.check("SET_PREFERRED_LOCATION to the GPU reads back the GPU", lesson26::isDevice(gpu, ordinal));
    CHECK_DRIVER(course::memAdviseForHost(managed, kBytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION));
    const Where host = readAdvice(managed, kBytes, forms).preferred;
    lesson26::printWhere("preferred location after SET_PREFERRED_LOCATION to the host", host);
    verdict.check("SET_PREFERRED_LOCATION to the host reads back the host", lesson26::isHost(host));
    // "The location argument is ignored for this advice" (cuda.h:14503).
    CHECK_DRIVER(course::memAdviseForDevice(managed, kBytes, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, device));
    const Where none = readAdvice(managed, kBytes, forms).preferred;
    lesson26::printWhere("preferred location after UNSET_PREFERRED_LOCATION", none);
    verdict.check("UNSET_PREFERRED_LOCATION reads back no preferred location", lesson26::isNowhere(none));

    CHECK_DRIVER(course::memAdviseForDevice(managed, kBytes, CU_MEM_ADVISE_SET_ACCESSED_BY, device));
    const lesson26::Advice accessed = readAdvice(managed, kBytes, forms);
    CHECK_DRIVER(course::memAdviseForDevice(managed, kBytes, CU_MEM_ADVISE_UNSET_ACCESSED_BY, device));
    const lesson26::Advice released = readAdvice(managed, kBytes, forms);
    std::printf("accessed by, after SET_ACCESSED_BY: %s\n", lesson26::accessedByList(accessed).c_str());
    std::printf("accessed by, after UNSET_ACCESSED_BY: %s\n", lesson26::accessedByList(released).c_str());
    verdict.check("ACCESSED_BY lists the GPU after SET and no one after UNSET",
                  lesson26::onlyAccessedBy(accessed, ordinal) && lesson26::onlyAccessedBy(released, CU_DEVICE_INVALID));
}

const char* const kPrefetchAndAdviceChecks[] = {
    "after a prefetch to the GPU, the range names the GPU",
    "after a prefetch to the host, the range names the host",
    "after both prefetches, the CPU reads every word the kernel computed",
    "read-mostly on half the range: that half reads 1, the whole range 0",
    "SET_READ_MOSTLY reads back 1",
    "UNSET_READ_MOSTLY reads back 0",
    "SET_PREFERRED_LOCATION to the GPU reads back the GPU",
    "SET_PREFERRED_LOCATION to the host reads back the host",
    "UNSET_PREFERRED_LOCATION reads back no preferred location",
    "ACCESSED_BY lists the GPU after SET and no one after UNSET",
};

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "initialise, read what the device says about managed memory");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    course::printDeviceName(ordinal, device);
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("built with CUDA headers: %s\n", course::formatCudaVersion(CUDA_VERSION).c_str());
    std::printf("driver supports CUDA: %s\n", course::formatCudaVersion(driverVersion).c_str());
    if (printManagedAttributes(device) == 0) {
        std::printf("Result = SKIP (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY is 0: no managed memory on this system)\n");
        return course::kExitNotApplicable;
    }
    const bool concurrent = course::deviceAttribute(device, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) != 0;
    const std::string formsReason =
        lesson26::versionReason(lesson26::kLocationFormsVersion, driverVersion, "the _TYPE/_ID range attributes");
    const bool forms = formsReason.empty();
    std::printf("range attributes in the _TYPE/_ID form: %s\n", forms ? "read" : ("not read: " + formsReason).c_str());
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    const lesson26::Kernels kernels = lesson26::loadKernels();
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    // Step 2: never more managed memory than the device has free. Oversubscription "is possible" on
    // such GPUs, with pages "evicted from device memory to host memory at any time" (cuda.h:9018-9021):
    // not something to try on a shared machine.
    course::printStep(2, "cuMemAllocManaged: one pointer for the CPU and a kernel");
    size_t freeBytes = 0;
    size_t totalBytes = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &totalBytes));
    if (freeBytes < 2 * kBytes) {
        std::printf("Result = SKIP (%zu MiB free; the program needs twice its 64 MiB)\n", freeBytes >> 20);
        CHECK_DRIVER(cuStreamDestroy(stream));
        CHECK_DRIVER(cuModuleUnload(kernels.module));
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
        return course::kExitNotApplicable;
    }
    CUdeviceptr managed = 0;
    CHECK_DRIVER(cuMemAllocManaged(&managed, kBytes, CU_MEM_ATTACH_GLOBAL));
    std::printf("managed buffer: 0x%llx (%zu bytes)\n", static_cast<unsigned long long>(managed), kBytes);
    course::Verdict verdict;
    shareOnePointer(verdict, kernels, managed, stream);

    // Step 3: "If any page in the memory range was never explicitly prefetched ... CU_DEVICE_INVALID
    // will be returned" (cuda.h:14712-14714); the kernel's accesses in step 2 were no explicit prefetch.
    course::printStep(3, "where was the range last prefetched? nowhere yet");
    const Where never = lesson26::readLastPrefetch(managed, kBytes, forms);
    lesson26::printWhere("last prefetch location before any prefetch", never);
    verdict.check("a range never prefetched names no location", lesson26::isNowhere(never));

    // Steps 4 and 5 name this GPU as a target, which cuda.h allows only for a device with a
    // non-zero CONCURRENT_MANAGED_ACCESS (cuda.h:14369-14371, 14482-14483, 14508).
    course::printStep(4, "cuMemPrefetchAsync to the GPU, a kernel, and back to the host");
    if (concurrent) {
        prefetchBothWays(verdict, kernels, managed, ordinal, device, stream, forms);
        course::printStep(5, "cuMemAdvise, read back with cuMemRangeGetAttributes");
        adviseAndReadBack(verdict, managed, ordinal, device, forms);
    } else {
        const char* reason = "CONCURRENT_MANAGED_ACCESS is 0: prefetches and advice cannot name this GPU";
        std::printf("section prefetch and advice: SKIP (%s)\n", reason);
        course::printStep(5, "cuMemAdvise, read back with cuMemRangeGetAttributes");
        for (const char* name : kPrefetchAndAdviceChecks) lesson26::skipCheck(name, reason);
    }

    course::printStep(6, "cuDeviceGetHostAtomicCapabilities: atomics over the link to the host");
    lesson26::printHostAtomics(verdict, device, driverVersion);

    course::printStep(7, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(managed));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(kernels.module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: managed buffer, stream, module, primary context\n");

    course::printStep(8, "check");
    return verdict.finish();
}
