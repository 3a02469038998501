// Lesson 04, program 2 — one primary context per device, shared by every thread.
//
// Everybody who retains a device's primary context gets the same one: every thread and
// any library using the driver API. The CUDA runtime (cudart, so cuBLAS, TensorRT, ...)
// uses it too when the calling thread has no current context: it retains the primary
// context on first use and makes it current; when a context created with the driver API
// is current, runtime calls operate on it, "with some exceptions" (cuda_runtime_api.h).
// Two threads stand in for two libraries here; then every device's is retained to show
// that each device has a context of its own.
//
//   shared_by_threads [--device N]
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "primary_state.h"

using lesson04::currentContext;
using lesson04::describeCurrent;
using lesson04::showPrimaryState;

namespace {

// What one of step 2's threads saw, and the first driver call that failed there.
// A worker thread must not use CHECK_DRIVER: its std::exit would end the whole process
// from this thread while main and the other thread are still running. The worker records
// the failure, gives back what it took, and returns; main reports it after join().
struct ThreadReport {
    CUcontext currentAtStart = nullptr;
    CUcontext handle = nullptr;
    CUcontext currentWhileUsing = nullptr;
    CUresult result = CUDA_SUCCESS;  // the first failure, or CUDA_SUCCESS
    const char* failedCall = "";     // which call gave it

    // Records a call's result (the first failure only); true when it succeeded.
    bool succeeded(CUresult callResult, const char* call) {
        if (callResult != CUDA_SUCCESS && result == CUDA_SUCCESS) {
            result = callResult;
            failedCall = call;
        }
        return callResult == CUDA_SUCCESS;
    }
};

// One library's view of the device: retain, bind, use, unbind, release.
void useSharedContext(CUdevice device, ThreadReport& report) {
    if (!report.succeeded(cuCtxGetCurrent(&report.currentAtStart), "cuCtxGetCurrent")) return;
    if (!report.succeeded(cuDevicePrimaryCtxRetain(&report.handle, device), "cuDevicePrimaryCtxRetain")) return;
    if (report.succeeded(cuCtxSetCurrent(report.handle), "cuCtxSetCurrent(handle)")) {
        report.succeeded(cuCtxGetCurrent(&report.currentWhileUsing), "cuCtxGetCurrent");
        report.succeeded(cuCtxSynchronize(), "cuCtxSynchronize");
        // Unbind before releasing: a release never pops or unsets anything.
        report.succeeded(cuCtxSetCurrent(nullptr), "cuCtxSetCurrent(NULL)");
    }
    // The reference is given back even when a call above failed.
    report.succeeded(cuDevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease");
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    // Step 1: the main thread holds one reference for the whole program.
    course::printStep(1, "the main thread retains the primary context");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    std::printf("cuDevicePrimaryCtxRetain on the main thread: handle %p\n", static_cast<void*>(primary));
    verdict.check("active after the main thread's retain", showPrimaryState(device, "after retain").active == 1);

    // Step 2: two threads, as two libraries would, each retain it on their own. They
    // start with nothing current, get the main thread's handle, use it, and release.
    course::printStep(2, "the same context from two threads");
    ThreadReport reports[2];
    std::vector<std::thread> threads;
    for (ThreadReport& report : reports) threads.emplace_back(useSharedContext, device, std::ref(report));
    for (std::thread& thread : threads) thread.join();
    for (int i = 0; i < 2; ++i) {
        const ThreadReport& report = reports[i];
        std::printf("thread %d current context at start: %s\n", i + 1, describeCurrent(report.currentAtStart, primary));
        std::printf("thread %d handle: %s (%p)\n", i + 1,
                    report.handle == primary ? "same as the main thread's" : "DIFFERENT",
                    static_cast<void*>(report.handle));
        std::printf("thread %d current context while using it: %s\n", i + 1,
                    describeCurrent(report.currentWhileUsing, primary));
        // Main reports what the worker carried back and decides what it means.
        if (report.result == CUDA_SUCCESS) {
            std::printf("thread %d first failed driver call: none\n", i + 1);
        } else {
            std::printf("thread %d first failed driver call: %s -> %s\n", i + 1, report.failedCall,
                        course::driverErrorName(report.result));
        }
        verdict.check("every driver call on the worker thread succeeded", report.result == CUDA_SUCCESS);
        verdict.check("a new thread starts with nothing current", report.currentAtStart == nullptr);
        verdict.check("the thread's retain returns the main thread's handle", report.handle == primary);
        verdict.check("the context is current on the thread while it uses it", report.currentWhileUsing == primary);
    }
    // The main thread's reference keeps it active.
    verdict.check("the main thread's reference keeps it active",
                  showPrimaryState(device, "after the threads released").active == 1);

    // Step 3: one primary context per device. Retain each device's, check that each has its
    // own (and that the chosen device's is the main thread's), release them all, newest first.
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
    }
    std::vector<CUcontext> sorted = primaries;
    std::sort(sorted.begin(), sorted.end());
    const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
    // One label whatever the device count, so that the output reads the same on every machine.
    std::printf(
        "primary contexts of different devices: %s\n",
        deviceCount == 1 ? "n/a (one device on this machine)" : (distinct ? "all distinct" : "SHARED (unexpected)"));
    // The chosen device's handle must be the main thread's, and no two devices may share
    // one. With one device only the first part can be tested; with more, both are.
    verdict.check("one primary context per device", primaries[static_cast<size_t>(ordinal)] == primary && distinct);
    for (int d = deviceCount - 1; d >= 0; --d) {
        CUdevice each = 0;
        CHECK_DRIVER(cuDeviceGet(&each, d));
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(each));
    }

    // Step 4: the main thread's own reference was the last one.
    course::printStep(4, "release and check");
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("cuDevicePrimaryCtxRelease (the main thread's reference)\n");
    verdict.check("inactive after the main thread's release", showPrimaryState(device, "at the end").active == 0);
    return verdict.finish();
}
