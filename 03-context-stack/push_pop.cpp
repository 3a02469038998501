// Lesson 03, program 1 — the stack: creating pushes, push and pop, destroying pops.
//
// A CUcontext is the driver's workspace on one device: modules, streams, events and
// memory from cuMemAlloc belong to the context that made them, and cuCtxDestroy frees
// them with it. Not everything does: cuda.h, cuCtxDestroy, "will not destroy memory
// allocations by cuMemCreate(), cuMemAllocAsync() and cuMemAllocFromPoolAsync()".
// Each CPU thread keeps its own stack of contexts; the one on top is "current", and
// every context-bound call (cuMemAlloc, cuCtxSynchronize, ...) acts on it. This program
// walks one thread's stack from empty to empty and checks after every step that its
// copy's top is what the driver says.
//
//   push_pop [--device N]
#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#include "../common/check_driver.h"
#include "../common/context_flags.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "stack_view.h"

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;
    lesson03::StackView view(verdict);

    // Step 1: nothing is current until a context is created, pushed or set
    // (cuCtxGetCurrent: "If no context is bound to the calling CPU thread then *pctx is set to NULL").
    course::printStep(1, "initialise; the stack starts empty");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char deviceName[256] = {};
    CHECK_DRIVER(cuDeviceGetName(deviceName, sizeof(deviceName), device));
    std::printf("device %d name: %s\n", ordinal, deviceName);
    view.show();

    // Step 2: cuCtxCreate makes a context AND pushes it on the calling thread's stack.
    // ctxB asks for blocking synchronisation so that step 3 has a flag to read back.
    // ctxA is created with the CUDA 13 call itself: its second argument takes creation
    // parameters, here none (no execution affinity, no CIG). Under the plain name this form
    // came with CUDA 13.0 (12.5 to 12.x declare it as cuCtxCreate_v4, and cuCtxCreate there has
    // no such argument); course::ctxCreate (common/cuda_compat.h) hides the difference, and the
    // rest of the course calls it.
    course::printStep(2, "create two contexts: each creation pushes");
    CUcontext ctxA = nullptr;
#if CUDA_VERSION >= 13000
    CUctxCreateParams noParams = {};
    CHECK_DRIVER(cuCtxCreate(&ctxA, &noParams, CU_CTX_SCHED_AUTO, device));
#else
    CHECK_DRIVER(course::ctxCreate(&ctxA, CU_CTX_SCHED_AUTO, device));
#endif
    view.name(ctxA, "ctxA");
    view.pushed(ctxA, "created ctxA (CU_CTX_SCHED_AUTO)");

    const size_t freeBeforeB = lesson03::freeDeviceMemory();  // asked through ctxA
    CUcontext ctxB = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxB, CU_CTX_SCHED_BLOCKING_SYNC, device));
    view.name(ctxB, "ctxB");
    view.pushed(ctxB, "created ctxB (CU_CTX_SCHED_BLOCKING_SYNC)");
    // How much device memory creating a context takes before anything is allocated in it
    // depends on the GPU and the driver: measured, and required to stand out of the slack,
    // so that step 5 can compare what the destroy gives back with it.
    const long long takenByB =
        static_cast<long long>(freeBeforeB) - static_cast<long long>(lesson03::freeDeviceMemory());
    std::printf("device memory taken by creating ctxB: %.1f MiB\n", lesson03::mebibytes(takenByB));
    verdict.checkFreeMemory("creating ctxB took more device memory than the slack", takenByB > lesson03::kTolerance);

    // Step 3: what a context records about itself. cuCtxGetFlags and cuCtxGetDevice
    // answer for the current context (ctxB); cuCtxGetApiVersion takes a handle.
    course::printStep(3, "what a context knows about itself");
    unsigned int apiVersionA = 0;
    unsigned int apiVersionB = 0;
    CHECK_DRIVER(cuCtxGetApiVersion(ctxA, &apiVersionA));
    CHECK_DRIVER(cuCtxGetApiVersion(ctxB, &apiVersionB));
    unsigned int flagsB = 0;
    CHECK_DRIVER(cuCtxGetFlags(&flagsB));
    CUdevice deviceB = -1;
    CHECK_DRIVER(cuCtxGetDevice(&deviceB));
    // The API version names "the capabilities of the context (e.g. 3010 or 3020)", not the
    // driver's version (cuda.h). Both contexts print the same value, so these two lines
    // cannot show which handle was asked.
    std::printf("ctxA API version: %u\n", apiVersionA);
    std::printf("ctxB API version: %u\n", apiVersionB);
    std::printf("ctxB flags: 0x%x (%s)\n", flagsB, course::describeContextFlags(flagsB).c_str());
    std::printf("ctxB scheduling: %s\n", course::schedulingPolicyName(flagsB));
    std::printf("ctxB device: %d\n", static_cast<int>(deviceB));
    verdict.check("ctxB reports the scheduling policy it was created with",
                  (flagsB & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC);
    verdict.check("ctxB reports the device it was created on", deviceB == device);

    // Step 4: pop hands back the top and uncovers the one below; push puts a context on top.
    // Pushing ctxA while it is already further down is accepted here (CHECK_DRIVER).
    course::printStep(4, "push and pop");
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    view.popped(popped);
    CHECK_DRIVER(cuCtxPushCurrent(ctxB));
    view.pushed(ctxB, "cuCtxPushCurrent(ctxB)");
    CHECK_DRIVER(cuCtxPushCurrent(ctxA));
    view.pushed(ctxA, "cuCtxPushCurrent(ctxA): ctxA is on the stack twice");
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    view.popped(popped);

    // Step 5: cuCtxDestroy frees what the context holds (here only the memory its creation
    // took) and, when the context is current here, pops it. Which context is current
    // afterwards is asked, not assumed. Popping ctxB instead would give nothing back.
    course::printStep(5, "destroying the current context pops it");
    const size_t freeBeforeDestroy = lesson03::freeDeviceMemory();
    CHECK_DRIVER(cuCtxDestroy(ctxB));
    CUcontext afterDestroy = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&afterDestroy));
    view.destroyedTop("cuCtxDestroy(ctxB)");
    std::printf("current context after destroying ctxB: %s\n", view.nameOf(afterDestroy).c_str());
    unsigned int flagsA = 0;  // asked of the current context, ctxA now
    CHECK_DRIVER(cuCtxGetFlags(&flagsA));
    std::printf("ctxA scheduling: %s\n", course::schedulingPolicyName(flagsA));
    verdict.check("ctxA reports the scheduling policy it was created with",
                  (flagsA & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_AUTO);
    const long long returnedByB =
        static_cast<long long>(lesson03::freeDeviceMemory()) - static_cast<long long>(freeBeforeDestroy);
    std::printf("device memory returned by destroying ctxB: %.1f MiB\n", lesson03::mebibytes(returnedByB));
    // Free memory is device-wide, so another process can move it: the slack absorbs small
    // changes, on either side.
    verdict.checkFreeMemory("destroying ctxB gave back what creating it took",
                            std::llabs(returnedByB - takenByB) <= lesson03::kTolerance);

    // Step 6: with the stack empty no context is current. cuda.h: CUDA_ERROR_INVALID_CONTEXT
    // "most frequently indicates that there is no context bound to the current thread"; the
    // check shows which error this driver gives. ctxA is alive but current nowhere: "floating".
    course::printStep(6, "popping the last context");
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    view.popped(popped);
    const CUresult noContext = REPORT_DRIVER(cuCtxSynchronize());
    std::printf("cuCtxSynchronize with an empty stack: %s\n", course::driverErrorName(noContext));
    verdict.check("cuCtxSynchronize with no current context fails with CUDA_ERROR_INVALID_CONTEXT",
                  noContext == CUDA_ERROR_INVALID_CONTEXT);

    // Step 7: a floating context is destroyed by handle; no stack changes. cuMemGetInfo needs
    // a current context, so ctxC is created to measure what destroying ctxA gives back.
    course::printStep(7, "destroying a floating context");
    CUcontext ctxC = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxC, CU_CTX_SCHED_AUTO, device));
    view.name(ctxC, "ctxC");
    view.pushed(ctxC, "created ctxC (CU_CTX_SCHED_AUTO), to measure with");
    const size_t freeBeforeDestroyA = lesson03::freeDeviceMemory();  // asked through ctxC
    CHECK_DRIVER(cuCtxDestroy(ctxA));
    std::printf("cuCtxDestroy(ctxA): it was current on no thread\n");
    view.show();
    const long long returnedByA =
        static_cast<long long>(lesson03::freeDeviceMemory()) - static_cast<long long>(freeBeforeDestroyA);
    std::printf("device memory returned by destroying ctxA: %.1f MiB\n", lesson03::mebibytes(returnedByA));
    verdict.checkFreeMemory("destroying the floating ctxA gave device memory back", returnedByA > lesson03::kTolerance);

    course::printStep(8, "clean up and check");
    CHECK_DRIVER(cuCtxDestroy(ctxC));
    view.destroyedTop("cuCtxDestroy(ctxC)");
    return verdict.finish();
}
