// Lesson 03, program 2 — what cuCtxSynchronize waits for.
//
// Optional: read after lesson 06. It holds a stream with cuStreamWaitValue32 on a word of
// pinned host memory, which lessons 05 and 24 teach; make run-03 still runs it second.
//
// cuda.h: it "Blocks until the current context has completed all preceding requested
// tasks" (and, when the current context is the primary context, green contexts too).
// ctxA's stream is held at a gate: cuStreamWaitValue32 makes the stream wait until a word
// in pinned host memory reaches 1, and a memset is queued behind the wait. Only the CPU
// opens the gate, with a plain store: no host function blocks, and nothing in CUDA waits
// on another CUDA call. With ctxB current, cuCtxSynchronize returned while ctxA's work
// was still pending (checked); with ctxA current it waits for it.
//
//   synchronize_scope [--device N]
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>
#include <vector>

#include "../common/check_driver.h"
#include "../common/context_flags.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "stack_view.h"

namespace {

// What the memset writes, so that a read-back can tell written memory from anything else.
constexpr unsigned int kPattern = 0x600DF00Du;
// How long the watchdog lets the gate stay closed. The main thread opens it in step 4;
// this margin only matters when something is wrong.
constexpr auto kWatchdogTimeout = std::chrono::seconds(10);

// The gate: a word of pinned host memory that ctxA's stream waits on. Opening it is a CPU
// store; the GPU reads the word over the bus until it sees the value it waits for.
void setGate(cuuint32_t* word, cuuint32_t value) {
    std::atomic_ref<cuuint32_t>(*word).store(value, std::memory_order_release);
}

// Runs `call`, which may wait for the gate, while a watchdog thread stands by to open the
// gate if `call` has not returned within kWatchdogTimeout, so that a wrong guess about
// what cuCtxSynchronize waits for cannot hang the program. The watchdog makes no CUDA
// call, and it is joined before this returns: no CHECK_DRIVER (std::exit, which runs
// static destructors) can run while it is alive. Sets `openedByWatchdog` if it had to open.
template <typename Call>
CUresult callWithWatchdog(cuuint32_t* gate, bool& openedByWatchdog, Call call) {
    std::promise<void> returned;
    std::atomic<bool> opened{false};
    std::thread watchdog([gate, &opened, done = returned.get_future()] {
        if (done.wait_for(kWatchdogTimeout) == std::future_status::ready) return;
        opened = true;
        setGate(gate, 1);
    });
    const CUresult result = call();
    returned.set_value();
    watchdog.join();
    openedByWatchdog = openedByWatchdog || opened;
    return result;
}

// Copies ctxA's buffer back and says whether every word is `value`. cuMemcpyDtoH goes
// through the NULL stream, with which a CU_STREAM_NON_BLOCKING stream performs "no implicit
// synchronization": the caller first waits for the stream's work on the buffer.
bool bufferHolds(CUdeviceptr buffer, std::vector<unsigned int>& words, unsigned int value) {
    CHECK_DRIVER(cuMemcpyDtoH(words.data(), buffer, words.size() * sizeof(unsigned int)));
    return std::all_of(words.begin(), words.end(), [value](unsigned int w) { return w == value; });
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;
    lesson03::StackView view(verdict);

    // Step 1: two contexts on one device, as in program 1.
    course::printStep(1, "create two contexts");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext ctxA = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxA, CU_CTX_SCHED_AUTO, device));
    view.name(ctxA, "ctxA");
    view.pushed(ctxA, "created ctxA (CU_CTX_SCHED_AUTO)");
    // ctxB blocks while it synchronises (cuda.h: with CU_CTX_SCHED_BLOCKING_SYNC "the CPU
    // thread will block until the GPU context has finished its work"); its flags say so.
    CUcontext ctxB = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxB, CU_CTX_SCHED_BLOCKING_SYNC, device));
    view.name(ctxB, "ctxB");
    view.pushed(ctxB, "created ctxB");
    unsigned int flagsB = 0;
    CHECK_DRIVER(cuCtxGetFlags(&flagsB));  // ctxB is current
    std::printf("ctxB scheduling (cuCtxGetFlags): %s\n", course::schedulingPolicyName(flagsB));
    verdict.check("ctxB reports the scheduling policy it was created with",
                  (flagsB & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC);

    // Step 2: the stream, the buffer and the gate word belong to ctxA, so ctxA must be
    // current while they are made and the work is queued. The buffer is cleared first and
    // read back, so that only the memset behind the gate can put the pattern there.
    course::printStep(2, "queue work in ctxA behind a gate");
    CHECK_DRIVER(cuCtxPushCurrent(ctxA));
    view.pushed(ctxA, "cuCtxPushCurrent(ctxA)");
    constexpr size_t kWords = 16 << 20;  // 64 MiB of 32-bit words
    CUstream streamA = nullptr;
    CHECK_DRIVER(cuStreamCreate(&streamA, CU_STREAM_NON_BLOCKING));
    CUdeviceptr wordsA = 0;
    CHECK_DRIVER(cuMemAlloc(&wordsA, kWords * sizeof(unsigned int)));
    void* gateHost = nullptr;
    CHECK_DRIVER(cuMemHostAlloc(&gateHost, sizeof(cuuint32_t), CU_MEMHOSTALLOC_DEVICEMAP));
    auto* gate = static_cast<cuuint32_t*>(gateHost);
    CUdeviceptr gateDevice = 0;  // the same word, as the GPU addresses it
    CHECK_DRIVER(cuMemHostGetDevicePointer(&gateDevice, gateHost, 0));
    setGate(gate, 0);
    CHECK_DRIVER(cuMemsetD32Async(wordsA, 0, kWords, streamA));
    CHECK_DRIVER(cuCtxSynchronize());  // ctxA is current: the clear is done before it is read back
    std::vector<unsigned int> words(kWords);
    verdict.check("ctxA's buffer holds the clear's zeros before the gate", bufferHolds(wordsA, words, 0));
    CHECK_DRIVER(cuStreamWaitValue32(streamA, gateDevice, 1, CU_STREAM_WAIT_VALUE_GEQ));
    CHECK_DRIVER(cuMemsetD32Async(wordsA, kPattern, kWords, streamA));
    std::printf("ctxA's stream: wait until the gate word is 1, then cuMemsetD32Async of a pattern\n");
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    view.popped(popped);

    // Step 3: ctxB is current and has no work of its own. Back in ctxA, CUDA_ERROR_NOT_READY
    // is cuStreamQuery's answer for "work still pending", not a failure. (Leaving this
    // cuCtxSynchronize out would change nothing the program can see: there is nothing of
    // ctxB's for it to wait for.)
    course::printStep(3, "cuCtxSynchronize in ctxB does not wait for ctxA");
    bool openedByWatchdog = false;
    const CUresult syncInB = callWithWatchdog(gate, openedByWatchdog, [] { return cuCtxSynchronize(); });
    CHECK_DRIVER(syncInB);
    std::printf("cuCtxSynchronize in ctxB: returned\n");
    CHECK_DRIVER(cuCtxPushCurrent(ctxA));
    view.pushed(ctxA, "cuCtxPushCurrent(ctxA)");
    const CUresult whileHeld = cuStreamQuery(streamA);
    if (whileHeld != CUDA_ERROR_NOT_READY) CHECK_DRIVER(whileHeld);  // any other error ends the program
    std::printf("ctxA's stream after cuCtxSynchronize in ctxB: %s\n", course::driverErrorName(whileHeld));
    verdict.check("ctxA's stream still held after cuCtxSynchronize in ctxB", whileHeld == CUDA_ERROR_NOT_READY);

    // Step 4: open the gate; with ctxA current, cuCtxSynchronize waits for the wait and
    // the memset behind it. (ctxA's only work is in streamA, so cuStreamSynchronize(streamA)
    // would look the same here.)
    course::printStep(4, "cuCtxSynchronize in ctxA waits for ctxA's work");
    const CUresult syncInA = callWithWatchdog(gate, openedByWatchdog, [gate] {
        setGate(gate, 1);
        return cuCtxSynchronize();
    });
    CHECK_DRIVER(syncInA);
    const CUresult afterSync = cuStreamQuery(streamA);
    if (afterSync != CUDA_ERROR_NOT_READY) CHECK_DRIVER(afterSync);
    std::printf("ctxA's stream after cuCtxSynchronize in ctxA: %s\n", course::driverErrorName(afterSync));
    verdict.check("ctxA's stream done after cuCtxSynchronize in ctxA", afterSync == CUDA_SUCCESS);
    std::printf("gate opened by: %s\n", openedByWatchdog ? "the watchdog" : "the main thread");
    verdict.check("main thread opened the gate, not the watchdog", !openedByWatchdog);
    // The copy is ordered after the memset only by the cuCtxSynchronize above.
    verdict.check("ctxA's buffer holds the memset's pattern", bufferHolds(wordsA, words, kPattern));

    // Step 5: ctxA's objects are released while ctxA is current, then both contexts go.
    course::printStep(5, "clean up and check");
    CHECK_DRIVER(cuMemFreeHost(gateHost));
    CHECK_DRIVER(cuMemFree(wordsA));
    CHECK_DRIVER(cuStreamDestroy(streamA));
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    view.popped(popped);
    CHECK_DRIVER(cuCtxDestroy(ctxB));
    view.destroyedTop("cuCtxDestroy(ctxB)");
    CHECK_DRIVER(cuCtxDestroy(ctxA));
    view.destroyedTop("cuCtxDestroy(ctxA)");
    return verdict.finish();
}
