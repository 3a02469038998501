// Lesson 03, program 4 — which context memory belongs to: an address names the context
// that made it, and memory from cuMemCreate belongs to no context at all.
//
// With unified addressing (cuda.h: "automatically enabled in 64-bit processes") a pointer
// value alone is enough for the driver to look up the memory behind it:
// CU_POINTER_ATTRIBUTE_CONTEXT answers "the CUcontext on which a pointer was allocated".
// cuCtxDestroy destroys what cuMemAlloc made in the context, but cuda.h: it "will not
// destroy memory allocations by cuMemCreate(), cuMemAllocAsync() and
// cuMemAllocFromPoolAsync()"; they "are not associated with any CUDA context".
//
//   memory_owner [--device N]
#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "stack_view.h"

namespace {

// Big enough to stand out in cuMemGetInfo, well above the slack of the comparisons.
constexpr size_t kBigAllocation = 256 * lesson03::kMiB;
constexpr size_t kSmallAllocation = 1 * lesson03::kMiB;

long long difference(size_t a, size_t b) {
    return static_cast<long long>(a) - static_cast<long long>(b);
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;
    lesson03::StackView view(verdict);

    // Step 1: the device must have unified addressing (step 2) and virtual memory
    // management (cuMemCreate, step 3). ctxA stays below, to ask cuMemGetInfo after ctxB is
    // gone; the free figure before ctxB exists is the level step 3 compares with.
    course::printStep(1, "create two contexts");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    int unified = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&unified, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, device));
    int vmm = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device));
    std::printf("unified addressing: %s\n", unified ? "yes" : "no");
    std::printf("virtual memory management supported: %s\n", vmm ? "yes" : "no");
    if (!unified || !vmm) {
        std::printf("Result = SKIP (device %d lacks unified addressing or virtual memory management)\n", ordinal);
        return course::kExitNotApplicable;
    }
    CUcontext ctxA = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxA, CU_CTX_SCHED_AUTO, device));
    view.name(ctxA, "ctxA");
    view.pushed(ctxA, "created ctxA (CU_CTX_SCHED_AUTO)");
    const size_t freeBeforeB = lesson03::freeDeviceMemory();
    lesson03::printFree("before creating ctxB", freeBeforeB);
    CUcontext ctxB = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxB, CU_CTX_SCHED_AUTO, device));
    view.name(ctxB, "ctxB");
    view.pushed(ctxB, "created ctxB (CU_CTX_SCHED_AUTO)");

    // Step 2: one allocation in each context. The address alone tells the driver which
    // context made it: cuPointerGetAttribute is asked with ctxA current, for both.
    course::printStep(2, "an address names the context that made it");
    CUdeviceptr inB = 0;
    CHECK_DRIVER(cuMemAlloc(&inB, kSmallAllocation));  // ctxB is current
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    view.popped(popped);
    CUdeviceptr inA = 0;
    CHECK_DRIVER(cuMemAlloc(&inA, kSmallAllocation));  // ctxA is current
    std::printf("cuMemAlloc in ctxA: 0x%llx\n", static_cast<unsigned long long>(inA));
    std::printf("cuMemAlloc in ctxB: 0x%llx\n", static_cast<unsigned long long>(inB));
    CUcontext ownerOfA = nullptr;
    CUcontext ownerOfB = nullptr;
    CHECK_DRIVER(cuPointerGetAttribute(&ownerOfA, CU_POINTER_ATTRIBUTE_CONTEXT, inA));
    CHECK_DRIVER(cuPointerGetAttribute(&ownerOfB, CU_POINTER_ATTRIBUTE_CONTEXT, inB));
    std::printf("CU_POINTER_ATTRIBUTE_CONTEXT of ctxA's allocation: %s\n", view.nameOf(ownerOfA).c_str());
    std::printf("CU_POINTER_ATTRIBUTE_CONTEXT of ctxB's allocation: %s\n", view.nameOf(ownerOfB).c_str());
    verdict.check("each allocation's CU_POINTER_ATTRIBUTE_CONTEXT names the context that made it",
                  ownerOfA == ctxA && ownerOfB == ctxB);
    // Each is freed with its own context current.
    CHECK_DRIVER(cuMemFree(inA));
    CHECK_DRIVER(cuCtxPushCurrent(ctxB));
    view.pushed(ctxB, "cuCtxPushCurrent(ctxB)");
    CHECK_DRIVER(cuMemFree(inB));

    // Step 3: physical memory from cuMemCreate, made while ctxB is current, outlives ctxB.
    // Destroying ctxB gives back ctxB's own memory, so the figure after the destroy is
    // compared with the one from before ctxB existed: the 256 MiB must still be missing.
    course::printStep(3, "memory from cuMemCreate belongs to no context");
    CUmemAllocationProp properties{};                 // zero: no shareable handle, no flags
    properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;  // resident on the device
    properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    properties.location.id = ordinal;  // cuda.h: for a device location, "id is a device ordinal"
    size_t granularity = 0;
    CHECK_DRIVER(cuMemGetAllocationGranularity(&granularity, &properties, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    const size_t bytes = (kBigAllocation + granularity - 1) / granularity * granularity;  // a multiple of it
    CUmemGenericAllocationHandle physical = 0;
    CHECK_DRIVER(cuMemCreate(&physical, bytes, &properties, 0));
    std::printf("cuMemCreate with ctxB current: %.1f MiB\n", lesson03::mebibytes(static_cast<long long>(bytes)));
    CHECK_DRIVER(cuCtxDestroy(ctxB));
    view.destroyedTop("cuCtxDestroy(ctxB)");
    const size_t freeAfterDestroy = lesson03::freeDeviceMemory();  // asked through ctxA
    lesson03::printFree("after cuCtxDestroy(ctxB)", freeAfterDestroy);
    // Free memory is device-wide, so another process can move it: the slack absorbs small
    // changes, on either side, so that the figure missing is the cuMemCreate memory's.
    verdict.checkFreeMemory(
        "cuMemCreate memory still taken after destroying ctxB",
        std::llabs(difference(freeBeforeB, freeAfterDestroy) - static_cast<long long>(bytes)) <= lesson03::kTolerance);
    // Only cuMemRelease gives it back ("need to be destroyed explicitly"), with any context current.
    CHECK_DRIVER(cuMemRelease(physical));
    const size_t freeAfterRelease = lesson03::freeDeviceMemory();
    lesson03::printFree("after cuMemRelease", freeAfterRelease);
    verdict.checkFreeMemory("cuMemRelease gave the cuMemCreate memory back",
                            difference(freeBeforeB, freeAfterRelease) <= lesson03::kTolerance);

    course::printStep(4, "clean up and check");
    CHECK_DRIVER(cuCtxDestroy(ctxA));
    view.destroyedTop("cuCtxDestroy(ctxA)");
    return verdict.finish();
}
