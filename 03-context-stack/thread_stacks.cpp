// Lesson 03, program 4 — stacks are per thread.
//
// A new thread starts with an empty stack whatever other threads have pushed. A
// context that is alive but current on no thread ("floating") can be pushed there,
// used, and popped again; the main thread's stack does not change meanwhile.
//
//   thread_stacks [--device N]
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "stack_view.h"

namespace {

constexpr unsigned int kPattern = 0x600DF00Du;

// What the worker thread saw, for the main thread to print and check.
struct WorkerReport {
    CUcontext atStart = nullptr;
    CUcontext afterPush = nullptr;
    bool worked = false;
    CUcontext popped = nullptr;
    CUcontext afterPop = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    lesson03::StackView view;

    // Step 1: create ctxA (pushed here) and pop it: it stays alive, current nowhere.
    course::printStep(1, "a floating context");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext ctxA = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxA, CU_CTX_SCHED_AUTO, device));
    view.name(ctxA, "ctxA");
    bool pass = view.pushed(ctxA, "created ctxA (CU_CTX_SCHED_AUTO)");
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    pass = view.popped(popped) && pass;

    // Step 2: the worker pushes the floating ctxA, does real work in it (fill a small
    // buffer and read it back) and pops it. It only records what it sees; the main
    // thread prints after join, which also makes the worker's writes visible here.
    course::printStep(2, "a new thread has a stack of its own");
    WorkerReport report;
    std::thread worker([&report, ctxA] {
        CHECK_DRIVER(cuCtxGetCurrent(&report.atStart));
        CHECK_DRIVER(cuCtxPushCurrent(ctxA));
        CHECK_DRIVER(cuCtxGetCurrent(&report.afterPush));
        constexpr size_t kSmallWords = 1024;
        CUdeviceptr small = 0;
        CHECK_DRIVER(cuMemAlloc(&small, kSmallWords * sizeof(unsigned int)));
        CHECK_DRIVER(cuMemsetD32(small, kPattern, kSmallWords));
        std::vector<unsigned int> back(kSmallWords);
        CHECK_DRIVER(cuMemcpyDtoH(back.data(), small, kSmallWords * sizeof(unsigned int)));
        CHECK_DRIVER(cuMemFree(small));
        report.worked = std::all_of(back.begin(), back.end(), [](unsigned int w) { return w == kPattern; });
        CHECK_DRIVER(cuCtxPopCurrent(&report.popped));
        CHECK_DRIVER(cuCtxGetCurrent(&report.afterPop));
    });
    worker.join();
    std::printf("new thread current context: %s\n", view.nameOf(report.atStart).c_str());
    std::printf("worker current context after cuCtxPushCurrent(ctxA): %s\n", view.nameOf(report.afterPush).c_str());
    std::printf("work in ctxA on the worker thread: %s\n", report.worked ? "ok" : "WRONG");
    std::printf("worker current context after cuCtxPopCurrent: %s\n", view.nameOf(report.afterPop).c_str());
    pass = pass && report.atStart == nullptr && report.afterPush == ctxA && report.worked && report.popped == ctxA &&
           report.afterPop == nullptr;

    // Step 3: the main thread's stack was empty all along; it takes ctxA back and
    // destroys it, which pops it.
    course::printStep(3, "the main thread's stack did not change");
    std::printf("main thread, after the worker:\n");
    pass = view.show() && pass;
    CHECK_DRIVER(cuCtxPushCurrent(ctxA));
    pass = view.pushed(ctxA, "cuCtxPushCurrent(ctxA)") && pass;
    CHECK_DRIVER(cuCtxDestroy(ctxA));
    pass = view.destroyedTop("cuCtxDestroy(ctxA)") && pass;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
