// Lesson 04, program 1 — retain and release the primary context.
//
// Each device has one primary context per process. It is reference counted:
// cuDevicePrimaryCtxRetain adds a reference (and brings the context to life on the
// first one), and cuDevicePrimaryCtxRelease drops one (and tears it down with the last
// one). Neither touches the calling thread's context stack.
//
//   retain_release [--device N]
#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#include "../common/check_driver.h"
#include "../common/context_flags.h"
#include "../common/course_util.h"
#include "primary_state.h"

using lesson04::currentContext;
using lesson04::describeCurrent;
using lesson04::showPrimaryState;

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "initialise and pick the device");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char deviceName[256] = {};
    CHECK_DRIVER(cuDeviceGetName(deviceName, sizeof(deviceName), device));
    std::printf("device %d name: %s\n", ordinal, deviceName);

    // Step 2: cuInit does not create any context. The primary context exists as a slot
    // with flags, but is inactive (no device memory, no state) until someone retains it.
    course::printStep(2, "the primary context before anyone retains it");
    bool pass = showPrimaryState(device, "at start") == 0;
    std::printf("current context at start: %s\n", describeCurrent(currentContext(), nullptr));

    // Step 3: set the flags before the first retain, so that the context is created with
    // them. Once it is active, everyone sharing it already runs with the old ones.
    course::printStep(3, "set the flags before activation");
    CHECK_DRIVER(cuDevicePrimaryCtxSetFlags(device, CU_CTX_SCHED_BLOCKING_SYNC));
    std::printf("cuDevicePrimaryCtxSetFlags(device, CU_CTX_SCHED_BLOCKING_SYNC)\n");
    pass = showPrimaryState(device, "after cuDevicePrimaryCtxSetFlags") == 0 && pass;

    // Step 4: retaining activates the context and returns its handle, but pushes nothing:
    // the calling thread's current context is what it was. cuCtxSetCurrent binds it.
    course::printStep(4, "retaining does not make it current");
    const CUcontext currentBeforeRetain = currentContext();
    std::printf("current context before retain: %s\n", describeCurrent(currentBeforeRetain, nullptr));
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    std::printf("cuDevicePrimaryCtxRetain: handle %p\n", static_cast<void*>(primary));
    pass = showPrimaryState(device, "after retain") == 1 && pass;
    const CUcontext currentAfterRetain = currentContext();
    std::printf("current context after retain: %s\n", describeCurrent(currentAfterRetain, primary));
    pass = pass && currentAfterRetain == currentBeforeRetain;

    // cuCtxSetCurrent replaces the top of this thread's stack (here: the empty slot).
    CHECK_DRIVER(cuCtxSetCurrent(primary));
    const CUcontext currentAfterSet = currentContext();
    std::printf("current context after cuCtxSetCurrent: %s\n", describeCurrent(currentAfterSet, primary));
    unsigned int flagsSeen = 0;
    CHECK_DRIVER(cuCtxGetFlags(&flagsSeen));
    std::printf("cuCtxGetFlags in the primary context: 0x%x (%s)\n", flagsSeen,
                course::describeContextFlags(flagsSeen).c_str());
    // It is an ordinary context from here on: allocate and free in it.
    CUdeviceptr buffer = 0;
    CHECK_DRIVER(cuMemAlloc(&buffer, 1 << 20));
    std::printf("cuMemAlloc in the primary context: 1 MiB at 0x%llx\n", static_cast<unsigned long long>(buffer));
    CHECK_DRIVER(cuMemFree(buffer));
    pass = pass && currentAfterSet == primary && (flagsSeen & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC;

    // Step 5: a second retain returns the same handle and adds a reference; one release
    // takes one away. The context stays active while any reference is left.
    course::printStep(5, "retain counts");
    CUcontext again = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&again, device));
    std::printf("second retain: %s\n", again == primary ? "same handle" : "DIFFERENT handle");
    pass = showPrimaryState(device, "after second retain") == 1 && again == primary && pass;
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("cuDevicePrimaryCtxRelease (one of two references)\n");
    pass = showPrimaryState(device, "after one release") == 1 && pass;

    // Step 6: the last release deactivates it and frees everything made in it. Unbind
    // first: cuDevicePrimaryCtxRelease leaves the thread's current context untouched.
    // The flags go back to their default with the context.
    course::printStep(6, "the last release deactivates it");
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    const CUcontext currentAfterUnset = currentContext();
    std::printf("current context after cuCtxSetCurrent(NULL): %s\n", describeCurrent(currentAfterUnset, primary));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("cuDevicePrimaryCtxRelease (the last reference)\n");
    pass = showPrimaryState(device, "after final release") == 0 && currentAfterUnset == nullptr && pass;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
