// Lesson 04 — the primary context.
//
// Each device has one primary context per process. Everybody who asks for it gets
// the same one: every thread, the CUDA runtime (cudart, so cuBLAS, TensorRT, ...) and
// any library using the driver API. It is reference counted: cuDevicePrimaryCtxRetain
// adds a reference (and brings the context to life on the first one), and
// cuDevicePrimaryCtxRelease drops one (and tears it down with the last one).
//
//   04-primary-context [--device N]           the lesson
//   04-primary-context [--device N] --bench   more timing runs, and "bench:" lines for make bench
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "../common/context_flags.h"
#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"

namespace {

// Prints the primary context's state as the driver reports it, labelled with the moment
// ("flags after retain: ...", "active after retain: 1"). Returns the active flag.
int showPrimaryState(CUdevice device, const char* moment) {
    unsigned int flags = 0;
    int active = -1;
    CHECK_DRIVER(cuDevicePrimaryCtxGetState(device, &flags, &active));
    std::printf("flags %s: 0x%x (%s)\n", moment, flags, course::describeContextFlags(flags).c_str());
    std::printf("active %s: %d\n", moment, active);
    return active;
}

// "none", "primary", or "another context", for the handle cuCtxGetCurrent gives.
const char* describeCurrent(CUcontext current, CUcontext primary) {
    if (current == nullptr) return "none";
    return current == primary ? "primary" : "another context";
}

CUcontext currentContext() {
    CUcontext current = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    return current;
}

// Runs `once` `runs` times and returns the median wall time of one run in microseconds.
// The median ignores the odd run that the OS or the driver makes slow.
template <class Operation>
double medianMicroseconds(int runs, Operation once) {
    std::vector<double> samples;
    for (int i = 0; i < runs; ++i) {
        const auto start = std::chrono::steady_clock::now();
        once();
        const auto stop = std::chrono::steady_clock::now();
        samples.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
    }
    std::sort(samples.begin(), samples.end());
    const size_t middle = samples.size() / 2;
    return samples.size() % 2 == 1 ? samples[middle] : (samples[middle - 1] + samples[middle]) / 2.0;
}

// What one of step 6's threads saw.
struct ThreadReport {
    CUcontext currentAtStart = nullptr;
    CUcontext handle = nullptr;
    CUcontext currentWhileUsing = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const bool bench = args.has("--bench");
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

    // Step 6: two threads, as two libraries would, each retain it on their own. They
    // start with nothing current, get the main thread's handle, use it, and release.
    course::printStep(6, "the same context from two threads");
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
    pass = showPrimaryState(device, "after the threads released") == 1 && pass;

    // Step 7: the last release deactivates it and frees everything made in it. Unbind
    // first: cuDevicePrimaryCtxRelease leaves the thread's current context untouched.
    course::printStep(7, "the last release deactivates it");
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    std::printf("current context after cuCtxSetCurrent(NULL): %s\n", describeCurrent(currentContext(), primary));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("cuDevicePrimaryCtxRelease (the last reference)\n");
    pass = showPrimaryState(device, "after final release") == 0 && pass;

    // Step 8: what each way of getting a context costs. A cold retain builds the context
    // (as cuCtxCreate does) and the release that drops the last reference tears it down;
    // a warm retain, while someone else keeps it active, only counts.
    course::printStep(8, "what a context costs");
    const int runs = bench ? 50 : 10;
    std::printf("runs per measurement: %d (median)\n", runs);
    const double createDestroy = medianMicroseconds(runs, [device] {
        CUcontext context = nullptr;
        CHECK_DRIVER(course::ctxCreate(&context, CU_CTX_SCHED_AUTO, device));
        CHECK_DRIVER(cuCtxDestroy(context));  // it was pushed by creation; destroy pops it
    });
    const double coldRetain = medianMicroseconds(runs, [device] {
        CUcontext context = nullptr;
        CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    });
    CUcontext keeper = nullptr;  // one reference held across the warm runs
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&keeper, device));
    const double warmRetain = medianMicroseconds(runs, [device] {
        CUcontext context = nullptr;
        CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    });
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("cuCtxCreate + cuCtxDestroy: %.1f us\n", createDestroy);
    std::printf("retain + release, cold (activates and tears down): %.1f us\n", coldRetain);
    std::printf("retain + release, warm (already active): %.1f us\n", warmRetain);
    if (bench) {
        std::printf("bench: cuCtxCreate+cuCtxDestroy = %.1f us\n", createDestroy);
        std::printf("bench: primary retain+release cold = %.1f us\n", coldRetain);
        std::printf("bench: primary retain+release warm = %.2f us\n", warmRetain);
    }
    pass = showPrimaryState(device, "after the timing runs") == 0 && pass;

    // Step 9: one primary context per device. Retain each device's, check that no two
    // share a handle, release them all.
    course::printStep(9, "one primary context per device");
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
    if (deviceCount == 1) {
        std::printf("one device on this machine: nothing else to walk\n");
    } else {
        std::printf("primary contexts of different devices: %s\n", distinct ? "all distinct" : "SHARED (unexpected)");
    }
    pass = pass && distinct;
    for (int d = deviceCount - 1; d >= 0; --d) {
        CUdevice each = 0;
        CHECK_DRIVER(cuDeviceGet(&each, d));
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(each));
    }

    // Step 10: cuDevicePrimaryCtxReset destroys the primary context at once, whoever still
    // holds a reference: their memory, modules and streams are gone and their handles dangle.
    // Only the owner of the whole process (an application's shutdown path) may call it;
    // a library releases. Shown here with only this thread holding a reference.
    course::printStep(10, "reset: dangerous when others still use it");
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    pass = showPrimaryState(device, "before reset") == 1 && pass;
    CHECK_DRIVER(cuDevicePrimaryCtxReset(device));
    std::printf("cuDevicePrimaryCtxReset while this thread still holds a reference\n");
    pass = showPrimaryState(device, "after reset") == 0 && pass;
    // Reset does not drop the reference: the holder still releases it, which the driver
    // documents as safe after a reset.
    const CUresult releaseAfterReset = REPORT_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("cuDevicePrimaryCtxRelease after reset: %s\n", course::driverErrorName(releaseAfterReset));

    course::printStep(11, "check");
    pass = showPrimaryState(device, "at the end") == 0 && pass;
    std::printf("current context at the end: %s\n", describeCurrent(currentContext(), primary));
    pass = pass && currentContext() == nullptr;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
