// Lesson 03 — the context stack.
//
// A CUcontext is the driver's workspace on one device: every allocation, module,
// stream and event belongs to exactly one. Each CPU thread keeps its own stack of
// contexts; the one on top is "current", and every context-bound call (cuMemAlloc,
// cuCtxSynchronize, ...) acts on it. This lesson narrates that stack step by step.
//
//   03-context-stack [--device N]                    the lesson
//   03-context-stack [--device N] --free-by-destroy  leave a 256 MiB allocation to cuCtxDestroy,
//                                                    to show that destroying frees it
//
// The driver only ever shows the top of a stack (cuCtxGetCurrent). The program keeps
// a copy of what it pushed, prints it after every step, and checks that its top is
// what the driver says is current.
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "../common/context_flags.h"
#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"

namespace {

constexpr size_t kMiB = 1024 * 1024;
// Big enough to stand out in cuMemGetInfo; the driver rounds allocations up to its
// page size and keeps some memory for itself, so comparisons allow this much slack.
constexpr size_t kBigAllocation = 256 * kMiB;
constexpr long long kTolerance = 32 * kMiB;
// What the memsets write, so that a read-back can tell written memory from anything else.
constexpr unsigned int kPattern = 0x600DF00Du;

using StackCopy = std::vector<CUcontext>;  // back() is the top
using ContextNames = std::map<CUcontext, std::string>;

double mebibytes(long long bytes) {
    return static_cast<double>(bytes) / static_cast<double>(kMiB);
}

std::string nameOf(CUcontext context, const ContextNames& names) {
    if (context == nullptr) return "none";
    const auto it = names.find(context);
    return it != names.end() ? it->second : "unknown";
}

// Prints the current context (asked of the driver) and the stack copy, top first, by
// name and by handle. Returns false when the driver's current context is not its top.
bool showStack(const StackCopy& stack, const ContextNames& names) {
    CUcontext current = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    std::string byName;
    std::string byHandle;
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
        char handle[32];
        std::snprintf(handle, sizeof(handle), " %p", static_cast<void*>(*it));
        byName += " " + nameOf(*it, names);
        byHandle += handle;
    }
    std::printf("current context: %s\n", nameOf(current, names).c_str());
    std::printf("stack (top first):%s\n", stack.empty() ? " (empty)" : byName.c_str());
    std::printf("stack handles (top first):%s\n", stack.empty() ? " (empty)" : byHandle.c_str());
    const CUcontext top = stack.empty() ? nullptr : stack.back();
    if (current == top) return true;
    std::printf("MISMATCH: the driver's current context is %s, the top of the copy is %s\n",
                nameOf(current, names).c_str(), nameOf(top, names).c_str());
    return false;
}

size_t freeDeviceMemory() {
    size_t freeBytes = 0;
    size_t totalBytes = 0;
    // Free memory of the whole device (every context and process), asked through the current context.
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &totalBytes));
    return freeBytes;
}

// Step 5's gate. A host function enqueued on ctxA's stream waits here until the main
// thread opens it, so nothing behind it in that stream can finish before then. This is
// a teaching device: a real host function never waits on another thread.
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
    if (!course::parseArguments(argc, argv, {"--free-by-destroy"}, {"--device"}, "[--device N] [--free-by-destroy]",
                                args))
        return course::kExitUsage;
    const bool freeByDestroy = args.has("--free-by-destroy");
    const int ordinal = args.deviceOrdinal();

    // Step 1: a fresh thread has an empty stack: nothing is current until a context is
    // created, pushed or set.
    course::printStep(1, "initialise; the stack starts empty");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char deviceName[256] = {};
    CHECK_DRIVER(cuDeviceGetName(deviceName, sizeof(deviceName), device));
    std::printf("device %d name: %s\n", ordinal, deviceName);
    StackCopy stack;
    ContextNames names;
    bool pass = showStack(stack, names);

    // Step 2: cuCtxCreate makes a context AND pushes it on the calling thread's stack.
    // ctxB asks for blocking synchronisation so that step 3 has a flag to read back.
    course::printStep(2, "create two contexts: each creation pushes");
    CUcontext ctxA = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxA, CU_CTX_SCHED_AUTO, device));
    names[ctxA] = "ctxA";
    stack.push_back(ctxA);
    std::printf("created ctxA (CU_CTX_SCHED_AUTO)\n");
    pass = showStack(stack, names) && pass;

    const size_t freeBeforeB = freeDeviceMemory();
    CUcontext ctxB = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxB, CU_CTX_SCHED_BLOCKING_SYNC, device));
    names[ctxB] = "ctxB";
    stack.push_back(ctxB);
    std::printf("created ctxB (CU_CTX_SCHED_BLOCKING_SYNC)\n");
    pass = showStack(stack, names) && pass;
    // A context is not free: the driver reserves device memory for it before any allocation.
    std::printf("device memory taken by creating ctxB: %.1f MiB\n",
                mebibytes(static_cast<long long>(freeBeforeB) - static_cast<long long>(freeDeviceMemory())));

    // Step 3: what a context records about itself. cuCtxGetFlags and cuCtxGetDevice
    // answer for the current context (ctxB); cuCtxGetApiVersion takes a handle.
    course::printStep(3, "what a context knows about itself");
    unsigned int apiVersionA = 0;
    unsigned int apiVersionB = 0;
    CHECK_DRIVER(cuCtxGetApiVersion(ctxA, &apiVersionA));
    CHECK_DRIVER(cuCtxGetApiVersion(ctxB, &apiVersionB));
    unsigned int flagsB = 0;
    CHECK_DRIVER(cuCtxGetFlags(&flagsB));
    CUdevice deviceB = -1;
    CHECK_DRIVER(cuCtxGetDevice(&deviceB));
    // The API version names the context ABI (3020 since CUDA 3.2), not the driver's version.
    std::printf("ctxA API version: %u\n", apiVersionA);
    std::printf("ctxB API version: %u\n", apiVersionB);
    std::printf("ctxB flags: 0x%x (%s)\n", flagsB, course::describeContextFlags(flagsB).c_str());
    std::printf("ctxB scheduling: %s\n", course::schedulingPolicyName(flagsB));
    std::printf("ctxB device: %d\n", static_cast<int>(deviceB));
    pass = pass && (flagsB & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC && deviceB == device;

    // Step 4: pop hands back the top and uncovers the one below; push puts any live
    // context on top, even one already further down.
    course::printStep(4, "push and pop");
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    stack.pop_back();
    std::printf("cuCtxPopCurrent: popped %s\n", nameOf(popped, names).c_str());
    pass = showStack(stack, names) && popped == ctxB && pass;

    CHECK_DRIVER(cuCtxPushCurrent(ctxB));
    stack.push_back(ctxB);
    std::printf("cuCtxPushCurrent(ctxB)\n");
    pass = showStack(stack, names) && pass;

    CHECK_DRIVER(cuCtxPushCurrent(ctxA));
    stack.push_back(ctxA);
    std::printf("cuCtxPushCurrent(ctxA): ctxA is on the stack twice\n");
    pass = showStack(stack, names) && pass;

    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    stack.pop_back();
    std::printf("cuCtxPopCurrent: popped %s\n", nameOf(popped, names).c_str());
    pass = showStack(stack, names) && popped == ctxA && pass;

    // Step 5: cuCtxSynchronize waits for every stream of the CURRENT context, and for
    // nothing else. ctxA's stream is held at a gate; ctxB's synchronise must not wait for it.
    course::printStep(5, "cuCtxSynchronize waits for the current context's work only");
    CHECK_DRIVER(cuCtxPushCurrent(ctxA));
    stack.push_back(ctxA);
    std::printf("cuCtxPushCurrent(ctxA)\n");
    pass = showStack(stack, names) && pass;

    constexpr size_t kWords = 1 << 20;  // 4 MiB of 32-bit words
    CUstream streamA = nullptr;
    CHECK_DRIVER(cuStreamCreate(&streamA, CU_STREAM_NON_BLOCKING));
    CUdeviceptr wordsA = 0;
    CHECK_DRIVER(cuMemAlloc(&wordsA, kWords * sizeof(unsigned int)));
    Gate gate;
    CHECK_DRIVER(cuLaunchHostFunc(streamA, waitAtGate, &gate));
    CHECK_DRIVER(cuMemsetD32Async(wordsA, kPattern, kWords, streamA));
    std::printf("ctxA's stream: a host function held at a gate, then cuMemsetD32Async of 4 MiB\n");

    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    stack.pop_back();
    std::printf("cuCtxPopCurrent: popped %s\n", nameOf(popped, names).c_str());
    pass = showStack(stack, names) && pass;
    CHECK_DRIVER(cuCtxSynchronize());  // ctxB is current and has no work
    std::printf("cuCtxSynchronize in ctxB: returned while ctxA's stream is held\n");

    CHECK_DRIVER(cuCtxPushCurrent(ctxA));
    stack.push_back(ctxA);
    std::printf("cuCtxPushCurrent(ctxA)\n");
    pass = showStack(stack, names) && pass;
    // CUDA_ERROR_NOT_READY is cuStreamQuery's answer for "work still pending", not a failure.
    const CUresult whileHeld = cuStreamQuery(streamA);
    std::printf("ctxA's stream after cuCtxSynchronize in ctxB: %s\n", course::driverErrorName(whileHeld));
    gate.open.set_value();
    CHECK_DRIVER(cuCtxSynchronize());  // ctxA is current: waits for the gate and the memset
    const CUresult afterSync = cuStreamQuery(streamA);
    std::printf("ctxA's stream after cuCtxSynchronize in ctxA: %s\n", course::driverErrorName(afterSync));
    std::printf("gate opened by the main thread before its timeout: %s\n", gate.openedInTime ? "yes" : "no");
    std::vector<unsigned int> words(kWords);
    CHECK_DRIVER(cuMemcpyDtoH(words.data(), wordsA, kWords * sizeof(unsigned int)));
    const bool filled = std::all_of(words.begin(), words.end(), [](unsigned int w) { return w == kPattern; });
    std::printf("ctxA's buffer: %s\n", filled ? "filled by the memset" : "NOT filled");
    pass = pass && whileHeld == CUDA_ERROR_NOT_READY && afterSync == CUDA_SUCCESS && gate.openedInTime && filled;
    CHECK_DRIVER(cuMemFree(wordsA));
    CHECK_DRIVER(cuStreamDestroy(streamA));

    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    stack.pop_back();
    std::printf("cuCtxPopCurrent: popped %s\n", nameOf(popped, names).c_str());
    pass = showStack(stack, names) && pass;

    // Step 6: popping only changes which context is current. The allocation belongs to
    // ctxB and stays on the device while ctxB sits off the stack.
    course::printStep(6, "popping a context does not free its memory");
    const size_t freeBeforeAllocation = freeDeviceMemory();
    CUdeviceptr big = 0;
    CHECK_DRIVER(cuMemAlloc(&big, kBigAllocation));
    std::printf("cuMemAlloc in ctxB: 256 MiB at 0x%llx\n", static_cast<unsigned long long>(big));
    std::printf("free memory before cuMemAlloc: %.1f MiB\n", mebibytes(static_cast<long long>(freeBeforeAllocation)));
    // Later figures are compared with this one, the allocation's size apart: a tool such as
    // compute-sanitizer may take memory of its own beside each allocation.
    const long long freeAfterAllocation = static_cast<long long>(freeDeviceMemory());
    std::printf("free memory after cuMemAlloc: %.1f MiB\n", mebibytes(freeAfterAllocation));
    // Has (about) the whole allocation come back since it was made?
    auto allocationReturned = [&](size_t freeNow) {
        return static_cast<long long>(freeNow) - freeAfterAllocation >=
               static_cast<long long>(kBigAllocation) - kTolerance;
    };

    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    stack.pop_back();
    std::printf("cuCtxPopCurrent: popped %s\n", nameOf(popped, names).c_str());
    pass = showStack(stack, names) && pass;
    const size_t freeAfterPop = freeDeviceMemory();  // asked through ctxA: same device
    std::printf("free memory after pop: %.1f MiB\n", mebibytes(static_cast<long long>(freeAfterPop)));
    const bool stillAllocated = !allocationReturned(freeAfterPop);
    std::printf("memory after pop: %s\n", stillAllocated ? "still allocated" : "freed (unexpected)");
    pass = pass && stillAllocated;

    CHECK_DRIVER(cuCtxPushCurrent(ctxB));
    stack.push_back(ctxB);
    std::printf("cuCtxPushCurrent(ctxB)\n");
    pass = showStack(stack, names) && pass;

    // Step 7: cuCtxDestroy frees everything the context owns and, when the context is
    // current here, pops it. Which context is current afterwards is measured, not assumed.
    course::printStep(7, "destroying the current context");
    if (freeByDestroy) {
        // Left to cuCtxDestroy on purpose: compute-sanitizer's leak check reports this
        // allocation, because relying on destroy to free memory is how leaks hide.
        std::printf("cuMemFree skipped (--free-by-destroy): the 256 MiB are left to cuCtxDestroy\n");
    } else {
        CHECK_DRIVER(cuMemFree(big));
        const size_t freeAfterFree = freeDeviceMemory();
        std::printf("free memory after cuMemFree: %.1f MiB\n", mebibytes(static_cast<long long>(freeAfterFree)));
        const bool freed = allocationReturned(freeAfterFree);
        std::printf("memory after cuMemFree: %s\n", freed ? "freed" : "still allocated (unexpected)");
        pass = pass && freed;
    }
    const size_t freeBeforeDestroy = freeDeviceMemory();
    CHECK_DRIVER(cuCtxDestroy(ctxB));
    CUcontext afterDestroy = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&afterDestroy));
    std::printf("cuCtxDestroy(ctxB)\n");
    std::printf("current context after destroying ctxB: %s\n", nameOf(afterDestroy, names).c_str());
    stack.pop_back();  // the documented behaviour; showStack compares it with the driver
    pass = showStack(stack, names) && pass;
    const size_t freeAfterDestroy = freeDeviceMemory();  // asked through ctxA
    std::printf("device memory returned by destroying ctxB: %.1f MiB\n",
                mebibytes(static_cast<long long>(freeAfterDestroy) - static_cast<long long>(freeBeforeDestroy)));
    if (freeByDestroy) {
        const bool freed = allocationReturned(freeAfterDestroy);
        std::printf("memory after destroy: %s\n", freed ? "freed" : "still allocated (unexpected)");
        pass = pass && freed;
    }
    // `big` now dangles: its memory went with ctxB. It must never be passed to cuMemFree.

    // Step 8: with the stack empty no context is current, and every call that needs one
    // fails with CUDA_ERROR_INVALID_CONTEXT. ctxA is alive but current nowhere: "floating".
    course::printStep(8, "popping the last context");
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    stack.pop_back();
    std::printf("cuCtxPopCurrent: popped %s\n", nameOf(popped, names).c_str());
    pass = showStack(stack, names) && popped == ctxA && pass;
    const CUresult noContext = REPORT_DRIVER(cuCtxSynchronize());
    std::printf("cuCtxSynchronize with an empty stack: %s\n", course::driverErrorName(noContext));
    pass = pass && noContext == CUDA_ERROR_INVALID_CONTEXT;

    // Step 9: each thread has its own stack. A new thread starts with none current; the
    // floating ctxA can be pushed there, used, and popped again.
    course::printStep(9, "stacks are per thread");
    bool workerSawItAll = false;
    std::thread worker([&] {
        CUcontext atStart = nullptr;
        CHECK_DRIVER(cuCtxGetCurrent(&atStart));
        std::printf("new thread current context: %s\n", nameOf(atStart, names).c_str());
        CHECK_DRIVER(cuCtxPushCurrent(ctxA));
        CUcontext afterPush = nullptr;
        CHECK_DRIVER(cuCtxGetCurrent(&afterPush));
        std::printf("worker current context after cuCtxPushCurrent(ctxA): %s\n", nameOf(afterPush, names).c_str());
        // Real work in ctxA from this thread: fill a small buffer and read it back.
        constexpr size_t kSmallWords = 1024;
        CUdeviceptr small = 0;
        CHECK_DRIVER(cuMemAlloc(&small, kSmallWords * sizeof(unsigned int)));
        CHECK_DRIVER(cuMemsetD32(small, kPattern, kSmallWords));
        std::vector<unsigned int> back(kSmallWords);
        CHECK_DRIVER(cuMemcpyDtoH(back.data(), small, kSmallWords * sizeof(unsigned int)));
        CHECK_DRIVER(cuMemFree(small));
        const bool worked = std::all_of(back.begin(), back.end(), [](unsigned int w) { return w == kPattern; });
        std::printf("work in ctxA on the worker thread: %s\n", worked ? "ok" : "WRONG");
        CUcontext workerPopped = nullptr;
        CHECK_DRIVER(cuCtxPopCurrent(&workerPopped));
        CUcontext afterPop = nullptr;
        CHECK_DRIVER(cuCtxGetCurrent(&afterPop));
        std::printf("worker current context after cuCtxPopCurrent: %s\n", nameOf(afterPop, names).c_str());
        workerSawItAll =
            atStart == nullptr && afterPush == ctxA && worked && workerPopped == ctxA && afterPop == nullptr;
    });
    worker.join();  // join also makes the worker's writes visible here
    std::printf("main thread, after the worker:\n");
    pass = showStack(stack, names) && workerSawItAll && pass;

    CHECK_DRIVER(cuCtxPushCurrent(ctxA));
    stack.push_back(ctxA);
    std::printf("cuCtxPushCurrent(ctxA)\n");
    pass = showStack(stack, names) && pass;

    // Step 10: destroy the last context; it was current, so the stack is empty again.
    course::printStep(10, "clean up and check");
    CHECK_DRIVER(cuCtxDestroy(ctxA));
    stack.pop_back();
    std::printf("cuCtxDestroy(ctxA)\n");
    pass = showStack(stack, names) && pass;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
