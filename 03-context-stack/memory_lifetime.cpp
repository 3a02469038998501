// Lesson 03, program 3 — popping a context does not free its memory; cuMemFree does,
// and so does destroying the context.
//
//   memory_lifetime [--device N]                    free the allocation, then destroy
//   memory_lifetime [--device N] --free-by-destroy  leave 256 MiB to cuCtxDestroy, to show
//                                                   that destroying frees it
//
// (cuCtxDestroy frees what cuMemAlloc made in the context. cuda.h: it "will not destroy
// memory allocations by cuMemCreate(), cuMemAllocAsync() and cuMemAllocFromPoolAsync()".)
#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "stack_view.h"

namespace {

// Big enough to stand out in cuMemGetInfo, well above the slack of the comparisons
// (lesson03::kTolerance).
constexpr size_t kBigAllocation = 256 * lesson03::kMiB;

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--free-by-destroy"}, {"--device"}, "[--device N] [--free-by-destroy]",
                                args))
        return course::kExitUsage;
    const bool freeByDestroy = args.has("--free-by-destroy");
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;
    lesson03::StackView view(verdict);

    // Step 1: ctxA stays below as the context through which cuMemGetInfo is asked while
    // ctxB is off the stack (its free figure is device-wide, whichever context asks). The
    // figure before ctxB exists is the level that destroying ctxB must bring back.
    course::printStep(1, "create two contexts");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
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

    // Step 2: popping only changes which context is current. The allocation belongs to
    // ctxB and stays on the device while ctxB sits off the stack.
    course::printStep(2, "popping a context does not free its memory");
    const size_t freeBeforeAllocation = lesson03::freeDeviceMemory();
    lesson03::printFree("before cuMemAlloc", freeBeforeAllocation);
    CUdeviceptr big = 0;
    CHECK_DRIVER(cuMemAlloc(&big, kBigAllocation));
    std::printf("cuMemAlloc in ctxB: %.1f MiB at 0x%llx\n", lesson03::mebibytes(static_cast<long long>(kBigAllocation)),
                static_cast<unsigned long long>(big));
    // The figure after cuMemFree is compared with this one, the allocation's size apart: a tool
    // such as compute-sanitizer may take memory of its own beside each allocation.
    const size_t freeAfterAllocation = lesson03::freeDeviceMemory();
    lesson03::printFree("after cuMemAlloc", freeAfterAllocation);
    // Free memory is device-wide, so another process can move it: the slack absorbs small
    // changes. The allocation must stand out of it, or none of the comparisons below can fail.
    const long long allocationLessSlack = static_cast<long long>(kBigAllocation) - lesson03::kTolerance;
    auto difference = [](size_t a, size_t b) { return static_cast<long long>(a) - static_cast<long long>(b); };
    verdict.checkFreeMemory("cuMemAlloc took more device memory than the slack",
                            difference(freeBeforeAllocation, freeAfterAllocation) > lesson03::kTolerance);
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    view.popped(popped);
    const size_t freeAfterPop = lesson03::freeDeviceMemory();  // asked through ctxA: same device
    lesson03::printFree("after pop", freeAfterPop);
    verdict.checkFreeMemory("allocation still counted after popping ctxB",
                            difference(freeBeforeAllocation, freeAfterPop) >= allocationLessSlack);

    // Step 3: correct code frees what it allocated, then destroys the context. With
    // --free-by-destroy the allocation is left to cuCtxDestroy, which frees it too.
    course::printStep(3, "cuMemFree, or destroying the context, frees it");
    CHECK_DRIVER(cuCtxPushCurrent(ctxB));
    view.pushed(ctxB, "cuCtxPushCurrent(ctxB)");
    if (freeByDestroy) {
        // Left to cuCtxDestroy on purpose: compute-sanitizer's leak check reports this
        // allocation, because relying on destroy to free memory is how leaks hide.
        std::printf("cuMemFree skipped (--free-by-destroy): the allocation is left to cuCtxDestroy\n");
    } else {
        CHECK_DRIVER(cuMemFree(big));
        const size_t freeAfterFree = lesson03::freeDeviceMemory();
        lesson03::printFree("after cuMemFree", freeAfterFree);
        verdict.checkFreeMemory("cuMemFree gave the allocation back",
                                difference(freeAfterFree, freeAfterAllocation) >= allocationLessSlack);
    }
    CHECK_DRIVER(cuCtxDestroy(ctxB));
    view.destroyedTop("cuCtxDestroy(ctxB)");
    // Destroying ctxB also gives back the memory its creation took (push_pop step 2 prints
    // how much), so "free rose by 256 MiB" would hold even if the allocation leaked. Compared
    // instead with the figure from before ctxB existed; on either path this also shows that
    // ctxB itself is gone.
    const size_t freeAfterDestroy = lesson03::freeDeviceMemory();  // asked through ctxA
    lesson03::printFree("after cuCtxDestroy", freeAfterDestroy);
    verdict.checkFreeMemory("free memory back to its level before ctxB after cuCtxDestroy",
                            difference(freeBeforeB, freeAfterDestroy) <= lesson03::kTolerance);
    // `big` now dangles: its memory went with ctxB. It must never be passed to cuMemFree.

    course::printStep(4, "clean up and check");
    CHECK_DRIVER(cuCtxDestroy(ctxA));
    view.destroyedTop("cuCtxDestroy(ctxA)");
    return verdict.finish();
}
