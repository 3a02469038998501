// Lesson 04, program 2 — one primary context per device, shared by every thread.
//
// Everybody who asks for a device's primary context gets the same one: every thread,
// the CUDA runtime (cudart, so cuBLAS, TensorRT, ...) and any library using the driver
// API. Two threads stand in for two libraries here; then every device's is retained
// to show that each device has a context of its own.
//
//   shared_by_threads [--device N]
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "primary_state.h"

using lesson04::currentContext;
using lesson04::describeCurrent;
using lesson04::showPrimaryState;

namespace {

// What one of step 2's threads saw.
struct ThreadReport {
    CUcontext currentAtStart = nullptr;
    CUcontext handle = nullptr;
    CUcontext currentWhileUsing = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    // Step 1: the main thread holds one reference for the whole program.
    course::printStep(1, "the main thread retains the primary context");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    std::printf("cuDevicePrimaryCtxRetain on the main thread: handle %p\n", static_cast<void*>(primary));
    bool pass = showPrimaryState(device, "after retain") == 1;

    // Step 2: two threads, as two libraries would, each retain it on their own. They
    // start with nothing current, get the main thread's handle, use it, and release.
    course::printStep(2, "the same context from two threads");
    ThreadReport reports[2];
    std::vector<std::thread> threads;
    for (ThreadReport& report : reports) {
        threads.emplace_back([&report, device] {
            report.currentAtStart = currentContext();
            CHECK_DRIVER(cuDevicePrimaryCtxRetain(&report.handle, device));
            CHECK_DRIVER(cuCtxSetCurrent(report.handle));
            report.currentWhileUsing = currentContext();
            CHECK_DRIVER(cuCtxSynchronize());
            // Unbind before releasing: a release never pops or unsets anything.
            CHECK_DRIVER(cuCtxSetCurrent(nullptr));
            CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
        });
    }
    for (std::thread& thread : threads) thread.join();
    for (int i = 0; i < 2; ++i) {
        const ThreadReport& report = reports[i];
        std::printf("thread %d current context at start: %s\n", i + 1, describeCurrent(report.currentAtStart, primary));
        std::printf("thread %d handle: %s (%p)\n", i + 1,
                    report.handle == primary ? "same as the main thread's" : "DIFFERENT",
                    static_cast<void*>(report.handle));
        std::printf("thread %d current context while using it: %s\n", i + 1,
                    describeCurrent(report.currentWhileUsing, primary));
        pass =
            pass && report.currentAtStart == nullptr && report.handle == primary && report.currentWhileUsing == primary;
    }
    // The main thread's reference keeps it active.
    pass = showPrimaryState(device, "after the threads released") == 1 && pass;

    // Step 3: one primary context per device. Retain each device's, check that no two
    // share a handle, release them all, newest first.
    course::printStep(3, "one primary context per device");
    int deviceCount = 0;
    CHECK_DRIVER(cuDeviceGetCount(&deviceCount));
    std::printf("device count: %d\n", deviceCount);
    std::vector<CUcontext> primaries(static_cast<size_t>(deviceCount), nullptr);
    for (int d = 0; d < deviceCount; ++d) {
        CUdevice each = 0;
        CHECK_DRIVER(cuDeviceGet(&each, d));
        CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primaries[static_cast<size_t>(d)], each));
        unsigned int flags = 0;
        int active = -1;
        CHECK_DRIVER(cuDevicePrimaryCtxGetState(each, &flags, &active));
        std::printf("device %d primary context: %p, active while retained: %d\n", d,
                    static_cast<void*>(primaries[static_cast<size_t>(d)]), active);
        pass = pass && active == 1;
    }
    std::vector<CUcontext> sorted = primaries;
    std::sort(sorted.begin(), sorted.end());
    const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
    // One label whatever the device count, so that the output reads the same on every machine.
    std::printf("primary contexts of different devices: %s\n",
                deviceCount == 1 ? "n/a (one device on this machine)"
                                 : (distinct ? "all distinct" : "SHARED (unexpected)"));
    pass = pass && distinct;
    for (int d = deviceCount - 1; d >= 0; --d) {
        CUdevice each = 0;
        CHECK_DRIVER(cuDeviceGet(&each, d));
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(each));
    }

    // Step 4: the main thread's own reference was the last one.
    course::printStep(4, "release and check");
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("cuDevicePrimaryCtxRelease (the main thread's reference)\n");
    pass = showPrimaryState(device, "at the end") == 0 && pass;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
