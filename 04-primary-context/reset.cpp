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
#include <cstdlib>

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
    // Freed before the reset: after it, `buffer` would dangle and cuMemFree would fail.
    CHECK_DRIVER(cuMemFree(buffer));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    bool pass = showPrimaryState(device, "before reset") == 1;

    // Step 2: the reset deactivates the context although a reference is still held.
    course::printStep(2, "reset while a reference is held");
    CHECK_DRIVER(cuDevicePrimaryCtxReset(device));
    std::printf("cuDevicePrimaryCtxReset while this thread still holds a reference\n");
    pass = showPrimaryState(device, "after reset") == 0 && pass;
    // Reset does not drop the reference: the holder still releases it, which the driver
    // documents as safe after a reset.
    const CUresult releaseAfterReset = REPORT_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("cuDevicePrimaryCtxRelease after reset: %s\n", course::driverErrorName(releaseAfterReset));

    course::printStep(3, "check");
    pass = showPrimaryState(device, "at the end") == 0 && pass;
    const CUcontext currentAtEnd = currentContext();
    std::printf("current context at the end: %s\n", describeCurrent(currentAtEnd, primary));
    pass = pass && currentAtEnd == nullptr && releaseAfterReset == CUDA_SUCCESS;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
