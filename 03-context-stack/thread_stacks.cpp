// Lesson 03, program 5 — stacks are per thread.
//
// The main thread keeps ctxA current the whole time. The new thread is checked to start
// with an empty stack: what the main thread pushed is not current there. A context that
// is alive but current on no thread ("floating", ctxB here) can be pushed there, used, and
// popped again; the main thread's current context does not change meanwhile.
//
// A worker thread must not end the process: CHECK_DRIVER calls std::exit, which runs
// static destructors while other threads may still be using them. The worker records the
// first call that failed instead, and the main thread reports it after join.
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
    // The first driver call that failed on the worker, for the main thread to report.
    CUresult failure = CUDA_SUCCESS;
    const char* failedCall = nullptr;
    int failedLine = 0;

    // Records a failure (the first one only) and says whether the call succeeded.
    bool ok(CUresult result, const char* call, int line) {
        if (result != CUDA_SUCCESS && failure == CUDA_SUCCESS) {
            failure = result;
            failedCall = call;
            failedLine = line;
        }
        return result == CUDA_SUCCESS;
    }
};

// The worker's form of CHECK_DRIVER: record the call's text and line, never exit.
#define WORKER_CALL(report, call) (report).ok((call), #call, __LINE__)

// Runs on the worker with ctxB current: fill a small buffer and read it back.
void workInCurrentContext(WorkerReport& report) {
    constexpr size_t kSmallWords = 1024;
    CUdeviceptr small = 0;
    if (!WORKER_CALL(report, cuMemAlloc(&small, kSmallWords * sizeof(unsigned int)))) return;
    std::vector<unsigned int> back(kSmallWords);
    if (WORKER_CALL(report, cuMemsetD32(small, kPattern, kSmallWords)) &&
        WORKER_CALL(report, cuMemcpyDtoH(back.data(), small, kSmallWords * sizeof(unsigned int))))
        report.worked = std::all_of(back.begin(), back.end(), [](unsigned int w) { return w == kPattern; });
    WORKER_CALL(report, cuMemFree(small));
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;
    lesson03::StackView view(verdict);

    // Step 1: create ctxA and ctxB (each pushed here), then pop ctxB: it stays alive,
    // current nowhere, while ctxA stays current on the main thread.
    course::printStep(1, "ctxA current on the main thread, ctxB floating");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext ctxA = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxA, CU_CTX_SCHED_AUTO, device));
    view.name(ctxA, "ctxA");
    view.pushed(ctxA, "created ctxA (CU_CTX_SCHED_AUTO)");
    CUcontext ctxB = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxB, CU_CTX_SCHED_AUTO, device));
    view.name(ctxB, "ctxB");
    view.pushed(ctxB, "created ctxB (CU_CTX_SCHED_AUTO)");
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    view.popped(popped);

    // Step 2: the worker looks at its own stack while ctxA is current here, pushes the
    // floating ctxB, does real work in it, and pops it, whatever failed in between. It
    // only records; the main thread prints after join, which also makes the worker's
    // writes visible here.
    course::printStep(2, "a new thread has a stack of its own");
    WorkerReport report;
    std::thread worker([&report, ctxB] {
        if (!WORKER_CALL(report, cuCtxGetCurrent(&report.atStart))) return;
        if (!WORKER_CALL(report, cuCtxPushCurrent(ctxB))) return;
        if (WORKER_CALL(report, cuCtxGetCurrent(&report.afterPush))) workInCurrentContext(report);
        if (WORKER_CALL(report, cuCtxPopCurrent(&report.popped)))
            WORKER_CALL(report, cuCtxGetCurrent(&report.afterPop));
    });
    worker.join();
    if (report.failure != CUDA_SUCCESS)
        course::reportDriverError(report.failure, report.failedCall, __FILE__, report.failedLine);
    verdict.check("every driver call on the worker succeeded", report.failure == CUDA_SUCCESS);
    std::printf("new thread current context: %s\n", view.nameOf(report.atStart).c_str());
    verdict.check("a new thread starts with no current context", report.atStart == nullptr);
    std::printf("worker current context after cuCtxPushCurrent(ctxB): %s\n", view.nameOf(report.afterPush).c_str());
    verdict.check("worker's current context after the push is ctxB", report.afterPush == ctxB);
    verdict.check("work in ctxB on the worker read back the pattern", report.worked);
    std::printf("worker current context after cuCtxPopCurrent: %s\n", view.nameOf(report.afterPop).c_str());
    verdict.check("worker's pop returned ctxB and left its stack empty",
                  report.popped == ctxB && report.afterPop == nullptr);

    // Step 3: all the while, ctxA stayed current on the main thread.
    course::printStep(3, "the main thread's stack did not change");
    std::printf("main thread, after the worker:\n");
    CUcontext mainCurrent = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&mainCurrent));
    view.show();
    verdict.check("main thread's current context is still ctxA", mainCurrent == ctxA);
    if (mainCurrent != ctxA) {  // step 4 measures through ctxA: release and report the failure
        CHECK_DRIVER(cuCtxDestroy(ctxB));
        CHECK_DRIVER(cuCtxDestroy(ctxA));
        return verdict.finish();
    }

    // Step 4: ctxB is floating, so destroying it changes no stack; what it gives back is
    // measured through ctxA. ctxA is current here, so destroying it pops it.
    course::printStep(4, "clean up and check");
    const size_t freeBeforeDestroyB = lesson03::freeDeviceMemory();  // asked through ctxA
    CHECK_DRIVER(cuCtxDestroy(ctxB));
    std::printf("cuCtxDestroy(ctxB): it was current on no thread\n");
    view.show();
    const long long returnedByB =
        static_cast<long long>(lesson03::freeDeviceMemory()) - static_cast<long long>(freeBeforeDestroyB);
    std::printf("device memory returned by destroying ctxB: %.1f MiB\n", lesson03::mebibytes(returnedByB));
    // Free memory is device-wide, so another process can move it: the slack absorbs small changes.
    verdict.checkFreeMemory("destroying the floating ctxB gave device memory back", returnedByB > lesson03::kTolerance);
    CHECK_DRIVER(cuCtxDestroy(ctxA));
    view.destroyedTop("cuCtxDestroy(ctxA)");
    return verdict.finish();
}
