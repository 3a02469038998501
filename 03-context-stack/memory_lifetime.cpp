// Lesson 03, program 3 — popping a context does not free its memory; cuMemFree does,
// and so does destroying the context.
//
//   memory_lifetime [--device N]                    free the allocation, then destroy
//   memory_lifetime [--device N] --free-by-destroy  leave 256 MiB to cuCtxDestroy, to show
//                                                   that destroying frees it
#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "stack_view.h"

namespace {

// Big enough to stand out in cuMemGetInfo; the driver rounds allocations up to its
// page size and keeps some memory for itself, so comparisons allow this much slack.
constexpr size_t kBigAllocation = 256 * lesson03::kMiB;
constexpr long long kTolerance = 32 * lesson03::kMiB;

void printFree(const char* moment, size_t freeBytes) {
    std::printf("free memory %s: %.1f MiB\n", moment, lesson03::mebibytes(static_cast<long long>(freeBytes)));
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--free-by-destroy"}, {"--device"}, "[--device N] [--free-by-destroy]",
                                args))
        return course::kExitUsage;
    const bool freeByDestroy = args.has("--free-by-destroy");
    const int ordinal = args.deviceOrdinal();
    lesson03::StackView view;

    // Step 1: ctxA stays below as the context through which cuMemGetInfo is asked while
    // ctxB is off the stack (cuMemGetInfo reports the whole device, whichever context asks).
    course::printStep(1, "create two contexts");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext ctxA = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxA, CU_CTX_SCHED_AUTO, device));
    view.name(ctxA, "ctxA");
    bool pass = view.pushed(ctxA, "created ctxA (CU_CTX_SCHED_AUTO)");
    CUcontext ctxB = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxB, CU_CTX_SCHED_AUTO, device));
    view.name(ctxB, "ctxB");
    pass = view.pushed(ctxB, "created ctxB (CU_CTX_SCHED_AUTO)") && pass;

    // Step 2: popping only changes which context is current. The allocation belongs to
    // ctxB and stays on the device while ctxB sits off the stack.
    course::printStep(2, "popping a context does not free its memory");
    printFree("before cuMemAlloc", lesson03::freeDeviceMemory());
    CUdeviceptr big = 0;
    CHECK_DRIVER(cuMemAlloc(&big, kBigAllocation));
    std::printf("cuMemAlloc in ctxB: 256 MiB at 0x%llx\n", static_cast<unsigned long long>(big));
    // Later figures are compared with this one, the allocation's size apart: a tool such as
    // compute-sanitizer may take memory of its own beside each allocation.
    const size_t freeAfterAllocation = lesson03::freeDeviceMemory();
    printFree("after cuMemAlloc", freeAfterAllocation);
    // Has (about) the whole allocation come back since it was made?
    auto allocationReturned = [&](size_t freeNow) {
        return static_cast<long long>(freeNow) - static_cast<long long>(freeAfterAllocation) >=
               static_cast<long long>(kBigAllocation) - kTolerance;
    };
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    pass = view.popped(popped) && pass;
    const size_t freeAfterPop = lesson03::freeDeviceMemory();  // asked through ctxA: same device
    printFree("after pop", freeAfterPop);
    const bool stillAllocated = !allocationReturned(freeAfterPop);
    std::printf("memory after pop: %s\n", stillAllocated ? "still allocated" : "freed (unexpected)");
    pass = pass && stillAllocated;

    // Step 3: correct code frees what it allocated, then destroys the context. With
    // --free-by-destroy the allocation is left to cuCtxDestroy, which frees it too.
    course::printStep(3, "cuMemFree, or destroying the context, frees it");
    CHECK_DRIVER(cuCtxPushCurrent(ctxB));
    pass = view.pushed(ctxB, "cuCtxPushCurrent(ctxB)") && pass;
    if (freeByDestroy) {
        // Left to cuCtxDestroy on purpose: compute-sanitizer's leak check reports this
        // allocation, because relying on destroy to free memory is how leaks hide.
        std::printf("cuMemFree skipped (--free-by-destroy): the 256 MiB are left to cuCtxDestroy\n");
    } else {
        CHECK_DRIVER(cuMemFree(big));
        const size_t freeAfterFree = lesson03::freeDeviceMemory();
        printFree("after cuMemFree", freeAfterFree);
        const bool freed = allocationReturned(freeAfterFree);
        std::printf("memory after cuMemFree: %s\n", freed ? "freed" : "still allocated (unexpected)");
        pass = pass && freed;
    }
    CHECK_DRIVER(cuCtxDestroy(ctxB));
    pass = view.destroyedTop("cuCtxDestroy(ctxB)") && pass;
    if (freeByDestroy) {
        const bool freed = allocationReturned(lesson03::freeDeviceMemory());  // asked through ctxA
        std::printf("memory after destroy: %s\n", freed ? "freed" : "still allocated (unexpected)");
        pass = pass && freed;
    }
    // `big` now dangles: its memory went with ctxB. It must never be passed to cuMemFree.

    course::printStep(4, "clean up and check");
    CHECK_DRIVER(cuCtxDestroy(ctxA));
    pass = view.destroyedTop("cuCtxDestroy(ctxA)") && pass;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
