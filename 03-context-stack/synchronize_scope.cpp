// Lesson 03, program 2 — cuCtxSynchronize waits for the current context's work only.
//
// ctxA's stream is held at a gate: a host function that waits until the main thread
// opens it, with a memset queued behind it. With ctxB current, cuCtxSynchronize must
// return while ctxA's work is still pending; with ctxA current it must wait for it.
//
//   synchronize_scope [--device N]
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "stack_view.h"

namespace {

// What the memset writes, so that a read-back can tell written memory from anything else.
constexpr unsigned int kPattern = 0x600DF00Du;

// A host function enqueued on ctxA's stream waits here until the main thread opens the
// gate, so nothing behind it in that stream can finish before then. This is a teaching
// device: a real host function never waits on another thread.
struct Gate {
    std::promise<void> open;
    std::future<void> opened = open.get_future();
    std::atomic<bool> openedInTime{false};
};

void CUDA_CB waitAtGate(void* userData) {
    auto* gate = static_cast<Gate*>(userData);
    // The timeout keeps a wrong guess about cuCtxSynchronize from hanging the program.
    gate->openedInTime = gate->opened.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    lesson03::StackView view;

    // Step 1: two contexts on one device, as in program 1.
    course::printStep(1, "create two contexts");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext ctxA = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxA, CU_CTX_SCHED_AUTO, device));
    view.name(ctxA, "ctxA");
    bool pass = view.pushed(ctxA, "created ctxA (CU_CTX_SCHED_AUTO)");
    CUcontext ctxB = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxB, CU_CTX_SCHED_BLOCKING_SYNC, device));
    view.name(ctxB, "ctxB");
    pass = view.pushed(ctxB, "created ctxB (CU_CTX_SCHED_BLOCKING_SYNC)") && pass;

    // Step 2: a stream, a buffer and a held host function belong to ctxA, so ctxA must be
    // current while they are made and the work is queued.
    course::printStep(2, "queue work in ctxA behind a gate");
    CHECK_DRIVER(cuCtxPushCurrent(ctxA));
    pass = view.pushed(ctxA, "cuCtxPushCurrent(ctxA)") && pass;
    constexpr size_t kWords = 1 << 20;  // 4 MiB of 32-bit words
    CUstream streamA = nullptr;
    CHECK_DRIVER(cuStreamCreate(&streamA, CU_STREAM_NON_BLOCKING));
    CUdeviceptr wordsA = 0;
    CHECK_DRIVER(cuMemAlloc(&wordsA, kWords * sizeof(unsigned int)));
    Gate gate;
    CHECK_DRIVER(cuLaunchHostFunc(streamA, waitAtGate, &gate));
    CHECK_DRIVER(cuMemsetD32Async(wordsA, kPattern, kWords, streamA));
    std::printf("ctxA's stream: a host function held at a gate, then cuMemsetD32Async of 4 MiB\n");
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    pass = view.popped(popped) && pass;

    // Step 3: ctxB is current and has no work of its own, so its synchronise returns at
    // once. Back in ctxA, CUDA_ERROR_NOT_READY is cuStreamQuery's answer for "work still
    // pending", not a failure.
    course::printStep(3, "cuCtxSynchronize in ctxB does not wait for ctxA");
    CHECK_DRIVER(cuCtxSynchronize());
    std::printf("cuCtxSynchronize in ctxB: returned while ctxA's stream is held\n");
    CHECK_DRIVER(cuCtxPushCurrent(ctxA));
    pass = view.pushed(ctxA, "cuCtxPushCurrent(ctxA)") && pass;
    const CUresult whileHeld = cuStreamQuery(streamA);
    std::printf("ctxA's stream after cuCtxSynchronize in ctxB: %s\n", course::driverErrorName(whileHeld));

    // Step 4: open the gate; with ctxA current, cuCtxSynchronize waits for the host
    // function and the memset behind it.
    course::printStep(4, "cuCtxSynchronize in ctxA waits for ctxA's work");
    gate.open.set_value();
    CHECK_DRIVER(cuCtxSynchronize());
    const CUresult afterSync = cuStreamQuery(streamA);
    std::printf("ctxA's stream after cuCtxSynchronize in ctxA: %s\n", course::driverErrorName(afterSync));
    std::printf("gate opened by the main thread before its timeout: %s\n", gate.openedInTime ? "yes" : "no");
    std::vector<unsigned int> words(kWords);
    CHECK_DRIVER(cuMemcpyDtoH(words.data(), wordsA, kWords * sizeof(unsigned int)));
    const bool filled = std::all_of(words.begin(), words.end(), [](unsigned int w) { return w == kPattern; });
    std::printf("ctxA's buffer: %s\n", filled ? "filled by the memset" : "NOT filled");
    pass = pass && whileHeld == CUDA_ERROR_NOT_READY && afterSync == CUDA_SUCCESS && gate.openedInTime && filled;

    // Step 5: ctxA's objects are released while ctxA is current, then both contexts go.
    course::printStep(5, "clean up and check");
    CHECK_DRIVER(cuMemFree(wordsA));
    CHECK_DRIVER(cuStreamDestroy(streamA));
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    pass = view.popped(popped) && pass;
    CHECK_DRIVER(cuCtxDestroy(ctxB));
    pass = view.destroyedTop("cuCtxDestroy(ctxB)") && pass;
    CHECK_DRIVER(cuCtxDestroy(ctxA));
    pass = view.destroyedTop("cuCtxDestroy(ctxA)") && pass;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
