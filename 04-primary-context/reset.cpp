// Lesson 04, program 4 — cuDevicePrimaryCtxReset: dangerous when others still use it.
//
// A reset destroys the primary context at once, whoever still holds a reference: their
// memory, modules and streams are gone and their handles dangle. Only the owner of the
// whole process (an application's shutdown path) may call it; a library releases.
// Shown here with only this thread holding a reference.
//
//   reset [--device N]
#include <cuda.h>

#include <cstdio>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "primary_state.h"

using lesson04::currentContext;
using lesson04::describeCurrent;
using lesson04::showPrimaryState;

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    // Step 1: one reference, held by this thread, with the context current here.
    course::printStep(1, "retain and use the primary context");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    CHECK_DRIVER(cuCtxSetCurrent(primary));
    CUdeviceptr buffer = 0;
    CHECK_DRIVER(cuMemAlloc(&buffer, 1 << 20));
    std::printf("cuMemAlloc in the primary context: 1 MiB at 0x%llx\n", static_cast<unsigned long long>(buffer));
    // Freed before the reset: the reset destroys the context's allocations, so after it
    // `buffer` would dangle. cuda.h names no cuMemFree error for such a pointer: freeing it
    // afterwards is no test of anything, so it is freed while it is still valid.
    CHECK_DRIVER(cuMemFree(buffer));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    verdict.check("active before the reset", showPrimaryState(device, "before reset").active == 1);

    // Step 2: the reset deactivates the context although a reference is still held.
    course::printStep(2, "reset while a reference is held");
    CHECK_DRIVER(cuDevicePrimaryCtxReset(device));
    std::printf("cuDevicePrimaryCtxReset while this thread still holds a reference\n");
    verdict.check("reset deactivates it while a reference is held",
                  showPrimaryState(device, "after reset").active == 0);
    // cuda.h: "Resetting the primary context does not release it", and "it is safe for other
    // modules to call cuDevicePrimaryCtxRelease() even after resetting the device". So the
    // holder still gives its reference back.
    const CUresult releaseAfterReset = REPORT_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("cuDevicePrimaryCtxRelease after reset: %s\n", course::driverErrorName(releaseAfterReset));
    verdict.check("release after the reset succeeds", releaseAfterReset == CUDA_SUCCESS);

    course::printStep(3, "check");
    verdict.check("inactive at the end", showPrimaryState(device, "at the end").active == 0);
    // cuda.h does not say that a reset unbinds the context from threads that have it current.
    // This thread unbound it itself in step 1, before the reset: nothing is current here.
    const CUcontext currentAtEnd = currentContext();
    std::printf("current context at the end: %s\n", describeCurrent(currentAtEnd, primary));
    verdict.check("nothing current at the end", currentAtEnd == nullptr);
    return verdict.finish();
}
