#include <catch2/catch_test_macros.hpp>

#include <string>
#include <thread>
#include <vector>

#include "common/context_flags.h"
#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "03-context-stack";
constexpr size_t kMiB = 1024 * 1024;
constexpr long long kTolerance = 32 * kMiB;  // the lesson's slack: free memory is device-wide

// cuCtxCreate through the dlopen'ed driver, split by version as common/cuda_compat.h does:
// CUDA 13 resolves the name to cuCtxCreate_v4, which takes a CUctxCreateParams* second.
CUresult createContext(CUcontext* context, unsigned int flags, CUdevice device) {
    auto create = DRIVER_FUNCTION(driver(), cuCtxCreate);
    if (create == nullptr) return CUDA_ERROR_NOT_FOUND;
#if CUDA_VERSION >= 13000
    return create(context, nullptr, flags, device);
#else
    return create(context, flags, device);
#endif
}

// Destroys a context when the test ends, also when a REQUIRE stops it early.
struct OwnedContext {
    CUcontext handle = nullptr;
    OwnedContext() = default;
    OwnedContext(const OwnedContext&) = delete;
    OwnedContext& operator=(const OwnedContext&) = delete;
    ~OwnedContext() {
        if (handle != nullptr) DRIVER_FUNCTION(driver(), cuCtxDestroy)(handle);
    }
};

CUcontext currentContext() {
    CUcontext current = nullptr;
    DRIVER_FUNCTION(driver(), cuCtxGetCurrent)(&current);
    return current;
}

long long freeMemory() {
    size_t freeBytes = 0;
    size_t totalBytes = 0;
    if (DRIVER_FUNCTION(driver(), cuMemGetInfo)(&freeBytes, &totalBytes) != CUDA_SUCCESS) return -1;
    return static_cast<long long>(freeBytes);
}

}  // namespace

// ---------------------------------------------------------------------------
// The lesson's output: six programs, run in this order by make run-03.

const std::vector<std::string> kPrograms = {"push_pop",     "synchronize_scope", "memory_lifetime",
                                            "memory_owner", "thread_stacks",     "context_identity"};

// Each program prints its stack copy after every change, top first; every "current
// context" line is what the driver said, and it must be the copy's top.
void checkStacks(const RunResult& r, const std::vector<std::string>& expected) {
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK_FALSE(contains(r.out, "MISMATCH"));
    CHECK_FALSE(contains(r.out, ": FAIL"));
    // The view checks every stack it prints, and every pop.
    CHECK(valuesOf(r.out, "check current context is the top of the copy").size() == expected.size());
    const auto stacks = valuesOf(r.out, "stack (top first)");
    CHECK(stacks == expected);
    const auto currents = valuesOf(r.out, "current context");
    REQUIRE(currents.size() == stacks.size());
    for (size_t i = 0; i < stacks.size(); ++i) {
        INFO("after stack line " << i + 1 << ": " << stacks[i]);
        const std::string top = stacks[i] == "(empty)" ? "none" : stacks[i].substr(0, stacks[i].find(' '));
        CHECK(currents[i] == top);
    }
}

TEST_CASE("Lesson 03 runs its six programs in order", "[cpu][lesson03]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Lesson 03 prints the stack after every step in push and pop order", "[gpu][lesson03]") {
    requireGpu();
    SECTION("push_pop") {
        checkStacks(defaultRun(kLesson, "push_pop"),
                    {
                        "(empty)",                                           // step 1
                        "ctxA", "ctxB ctxA",                                 // step 2: each creation pushes
                        "ctxA", "ctxB ctxA", "ctxA ctxB ctxA", "ctxB ctxA",  // step 4
                        "ctxA",                                              // step 5: destroying ctxB popped it
                        "(empty)",                                           // step 6
                        "ctxC", "ctxC",  // step 7: created to measure with; destroying floating ctxA changes no stack
                        "(empty)",       // step 8
                    });
    }
    SECTION("synchronize_scope") {
        checkStacks(defaultRun(kLesson, "synchronize_scope"), {
                                                                  "ctxA", "ctxB ctxA",             // step 1
                                                                  "ctxA ctxB ctxA", "ctxB ctxA",   // step 2
                                                                  "ctxA ctxB ctxA",                // step 3
                                                                  "ctxB ctxA", "ctxA", "(empty)",  // step 5
                                                              });
    }
    SECTION("memory_lifetime") {
        checkStacks(defaultRun(kLesson, "memory_lifetime"),
                    {
                        "ctxA", "ctxB ctxA",  // step 1
                        "ctxA",               // step 2: popped, not freed
                        "ctxB ctxA", "ctxA",  // step 3: destroying ctxB popped it
                        "(empty)",            // step 4
                    });
    }
    SECTION("memory_owner") {
        const RunResult r = defaultRun(kLesson, "memory_owner");
        requireRan(r);
        checkStacks(r,
                    {
                        "ctxA", "ctxB ctxA",  // step 1
                        "ctxA", "ctxB ctxA",  // step 2: ctxA allocates while ctxB is popped
                        "ctxA",               // step 3: destroying ctxB popped it
                        "(empty)",            // step 4
                    });
    }
    SECTION("thread_stacks") {
        checkStacks(defaultRun(kLesson, "thread_stacks"),
                    {
                        "ctxA", "ctxB ctxA", "ctxA",  // step 1: ctxB popped, floating; ctxA stays current
                        "ctxA",                       // step 3: the worker did not change the main thread's stack
                        "ctxA", "(empty)",            // step 4: destroying floating ctxB changes no stack
                    });
    }
}

TEST_CASE("Lesson 03 measures that destroying the current context leaves the one below current", "[gpu][lesson03]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "push_pop");
    CHECK(r.exitCode == 0);
    CHECK(valueOf(r.out, "current context after destroying ctxB") == "ctxA");
    for (const char* check : {"creating ctxB took more device memory than the slack",
                              "destroying ctxB gave back what creating it took",
                              "destroying the floating ctxA gave device memory back"}) {
        INFO(check);
        CHECK(valueOf(r.out, std::string("check ") + check) == "ok");
    }
}

TEST_CASE("Lesson 03 reads back the flags and device a context was created with", "[gpu][lesson03]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "push_pop");
    CHECK(r.exitCode == 0);
    CHECK(valueOf(r.out, "ctxB scheduling") == "CU_CTX_SCHED_BLOCKING_SYNC");
    CHECK(valueOf(r.out, "ctxB device") == "0");
    CHECK(valueOf(r.out, "check ctxB reports the scheduling policy it was created with") == "ok");
    CHECK(valueOf(r.out, "check ctxB reports the device it was created on") == "ok");
    const auto apiVersion = valueOf(r.out, "ctxA API version");
    REQUIRE(apiVersion);
    CHECK(std::stoi(*apiVersion) >= 3020);
    CHECK(valueOf(r.out, "ctxB API version") == apiVersion);
}

TEST_CASE("Lesson 03 tells contexts apart by Id, sets a flag on a live one and reads its execution affinity",
          "[gpu][lesson03]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "context_identity");
    requireRan(r);  // exit 77: headers or driver older than CUDA 12.4
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "ctxA and ctxB have the same Id") == "no");
    CHECK(valueOf(r.out, "cuCtxGetId(NULL) gives ctxB's Id") == "yes");
    CHECK(valueOf(r.out, "the stream's context has ctxA's Id") == "yes");
    CHECK(valueOf(r.out, "ctxC, made after ctxB's destroy, has a new Id") == "yes");
    CHECK(valueOf(r.out, "ctxB API version") == valueOf(r.out, "current context's API version (NULL handle)"));
    CHECK(contains(valueOf(r.out, "ctxB flags after").value_or(""), "CU_CTX_SYNC_MEMOPS"));
    CHECK_FALSE(contains(valueOf(r.out, "ctxB flags before cuCtxSetFlags").value_or("CU_CTX_SYNC_MEMOPS"),
                         "CU_CTX_SYNC_MEMOPS"));
    for (const char* check :
         {"two contexts have different Ids", "cuCtxGetId(NULL) answers for the current context",
          "a stream's context has its creator's Id", "the API version of ctxB is the current context's",
          "cuCtxSetFlags added CU_CTX_SYNC_MEMOPS and kept the scheduling policy",
          "cuDeviceGetExecAffinitySupport answers 0 or 1", "cuCtxGetExecAffinity answers an SM count within the device's, or that the type is unsupported",
          "a context made after a destroy has a new Id"}) {
        INFO(check);
        CHECK(valueOf(r.out, std::string("check ") + check) == "ok");
    }
}

TEST_CASE("Lesson 03 shows the provoked CUDA_ERROR_INVALID_CONTEXT with the check macro's report", "[gpu][lesson03]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "push_pop");
    CHECK(r.exitCode == 0);
    CHECK(valueOf(r.out, "cuCtxSynchronize with an empty stack") == "CUDA_ERROR_INVALID_CONTEXT");
    CHECK(valueOf(r.out, "check cuCtxSynchronize with no current context fails with CUDA_ERROR_INVALID_CONTEXT") ==
          "ok");
    CHECK(contains(r.err, "CUDA driver call failed: cuCtxSynchronize()"));
    CHECK(contains(r.err, "CUDA_ERROR_INVALID_CONTEXT (code 201)"));
    CHECK(contains(r.err, "03-context-stack/push_pop.cpp:"));
    CHECK(contains(r.err, "hint:"));
}

TEST_CASE("Lesson 03's new thread starts with no current context while main has one, and can use a floating one",
          "[gpu][lesson03]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "thread_stacks");
    CHECK(r.exitCode == 0);
    CHECK(valueOf(r.out, "new thread current context") == "none");
    CHECK(valueOf(r.out, "worker current context after cuCtxPushCurrent(ctxB)") == "ctxB");
    CHECK(valueOf(r.out, "worker current context after cuCtxPopCurrent") == "none");
    for (const char* check :
         {"every driver call on the worker succeeded", "a new thread starts with no current context",
          "worker's current context after the push is ctxB", "work in ctxB on the worker read back the pattern",
          "worker's pop returned ctxB and left its stack empty", "main thread's current context is still ctxA",
          "destroying the floating ctxB gave device memory back"}) {
        INFO(check);
        CHECK(valueOf(r.out, std::string("check ") + check) == "ok");
    }
    // The worker's failures are carried back to main, which reports them on stderr: none here.
    CHECK_FALSE(contains(r.err, "CUDA driver call failed"));
}

TEST_CASE("Lesson 03 shows cuCtxSynchronize returning in ctxB while ctxA's work is held, and waiting in ctxA",
          "[gpu][lesson03]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "synchronize_scope");
    CHECK(r.exitCode == 0);
    CHECK(valueOf(r.out, "ctxA's stream after cuCtxSynchronize in ctxB") == "CUDA_ERROR_NOT_READY");
    CHECK(valueOf(r.out, "ctxA's stream after cuCtxSynchronize in ctxA") == "CUDA_SUCCESS");
    CHECK(valueOf(r.out, "ctxB scheduling (cuCtxGetFlags)") == "CU_CTX_SCHED_BLOCKING_SYNC");
    for (const char* check :
         {"ctxB reports the scheduling policy it was created with", "ctxA's buffer holds the clear's zeros before the gate",
          "ctxA's stream still held after cuCtxSynchronize in ctxB",
          "ctxA's stream done after cuCtxSynchronize in ctxA", "main thread opened the gate, not the watchdog",
          "ctxA's buffer holds the memset's pattern"}) {
        INFO(check);
        CHECK(valueOf(r.out, std::string("check ") + check) == "ok");
    }
}

TEST_CASE("Lesson 03 shows memory surviving a pop and freed by cuMemFree", "[gpu][lesson03]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "memory_lifetime");
    CHECK(r.exitCode == 0);
    CHECK(valueOf(r.out, "check cuMemAlloc took more device memory than the slack") == "ok");
    CHECK(valueOf(r.out, "check allocation still counted after popping ctxB") == "ok");
    CHECK(valueOf(r.out, "check cuMemFree gave the allocation back") == "ok");
    // Also on this path: destroying ctxB after cuMemFree gives back ctxB's own memory.
    CHECK(valueOf(r.out, "check free memory back to its level before ctxB after cuCtxDestroy") == "ok");
}

TEST_CASE("Lesson 03 with --free-by-destroy shows memory surviving a pop and freed by destroy", "[gpu][lesson03]") {
    requireGpu();
    RunOptions options;
    options.args = {"--free-by-destroy"};
    const RunResult r = runLesson(kLesson, options, "memory_lifetime");
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "check allocation still counted after popping ctxB") == "ok");
    // Compared with free memory before ctxB existed, so ctxB's own reservation cannot hide a leak.
    CHECK(valueOf(r.out, "check free memory back to its level before ctxB after cuCtxDestroy") == "ok");
    CHECK_FALSE(valueOf(r.out, "check cuMemFree gave the allocation back"));
}

TEST_CASE("Lesson 03 shows an address naming its context, and cuMemCreate memory outliving the context",
          "[gpu][lesson03]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "memory_owner");
    requireRan(r);  // exit 77: the device lacks unified addressing or virtual memory management
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "unified addressing") == "yes");
    CHECK(valueOf(r.out, "CU_POINTER_ATTRIBUTE_CONTEXT of ctxA's allocation") == "ctxA");
    CHECK(valueOf(r.out, "CU_POINTER_ATTRIBUTE_CONTEXT of ctxB's allocation") == "ctxB");
    for (const char* check :
         {"each allocation's CU_POINTER_ATTRIBUTE_CONTEXT names the context that made it",
          "cuMemCreate memory still taken after destroying ctxB", "cuMemRelease gave the cuMemCreate memory back"}) {
        INFO(check);
        CHECK(valueOf(r.out, std::string("check ") + check) == "ok");
    }
}

TEST_CASE("Lesson 03 rejects an unknown argument with a usage line and exit 2", "[cpu][lesson03]") {
    // Arguments are parsed before any driver call; the stub only lets the program load.
    const std::vector<std::vector<std::string>> badCommandLines = {{"--bogus"}, {"--device"}, {"--device", "zero"}};
    for (const auto& program : kPrograms) {
        for (const auto& args : badCommandLines) {
            const RunResult r = checkRefusesArguments(kLesson, args, program);
            CHECK(contains(r.err, "--device N"));
            if (program == "memory_lifetime") CHECK(contains(r.err, "--free-by-destroy"));
        }
    }
}

TEST_CASE("Context flags decode into the scheduling policy and the named bits", "[cpu][lesson03]") {
    CHECK(course::describeContextFlags(0) == "CU_CTX_SCHED_AUTO");
    CHECK(course::describeContextFlags(CU_CTX_SCHED_BLOCKING_SYNC) == "CU_CTX_SCHED_BLOCKING_SYNC");
    CHECK(course::describeContextFlags(CU_CTX_SCHED_SPIN | CU_CTX_LMEM_RESIZE_TO_MAX) ==
          "CU_CTX_SCHED_SPIN | CU_CTX_LMEM_RESIZE_TO_MAX (deprecated, now always on)");
    CHECK(course::describeContextFlags(CU_CTX_SCHED_YIELD | CU_CTX_MAP_HOST) ==
          "CU_CTX_SCHED_YIELD | CU_CTX_MAP_HOST (deprecated, no effect)");
    CHECK(course::describeContextFlags(0x100) == "CU_CTX_SCHED_AUTO | 0x100");
    CHECK(std::string(course::schedulingPolicyName(CU_CTX_SCHED_MASK)) == "(invalid scheduling bits)");
    // CU_CTX_BLOCKING_SYNC is the deprecated spelling of the same bit.
    CHECK(std::string(course::schedulingPolicyName(CU_CTX_BLOCKING_SYNC)) == "CU_CTX_SCHED_BLOCKING_SYNC");
}

// ---------------------------------------------------------------------------
// The same driver behaviour, checked directly.

TEST_CASE("The driver keeps contexts on a per-thread stack: push and pop are last in, first out", "[gpu][lesson03]") {
    requireGpu();
    const course::DynamicDriver& drv = driver();
    auto deviceGet = DRIVER_FUNCTION(drv, cuDeviceGet);
    auto push = DRIVER_FUNCTION(drv, cuCtxPushCurrent);
    auto pop = DRIVER_FUNCTION(drv, cuCtxPopCurrent);
    auto destroy = DRIVER_FUNCTION(drv, cuCtxDestroy);
    REQUIRE(deviceGet);
    REQUIRE(push);
    REQUIRE(pop);
    REQUIRE(destroy);
    CUdevice device = 0;
    REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);
    const CUcontext before = currentContext();  // whatever this test thread had, stays below

    OwnedContext a;
    OwnedContext b;
    REQUIRE(createContext(&a.handle, 0, device) == CUDA_SUCCESS);
    CHECK(currentContext() == a.handle);
    REQUIRE(createContext(&b.handle, 0, device) == CUDA_SUCCESS);
    CHECK(currentContext() == b.handle);

    CUcontext popped = nullptr;
    REQUIRE(pop(&popped) == CUDA_SUCCESS);
    CHECK(popped == b.handle);
    CHECK(currentContext() == a.handle);
    REQUIRE(push(b.handle) == CUDA_SUCCESS);
    REQUIRE(push(a.handle) == CUDA_SUCCESS);  // a context may be on the stack twice
    CHECK(currentContext() == a.handle);
    REQUIRE(pop(&popped) == CUDA_SUCCESS);
    CHECK(popped == a.handle);
    CHECK(currentContext() == b.handle);

    // Destroying the current context pops it, uncovering the one below.
    REQUIRE(destroy(b.handle) == CUDA_SUCCESS);
    b.handle = nullptr;
    CHECK(currentContext() == a.handle);
    REQUIRE(pop(&popped) == CUDA_SUCCESS);
    CHECK(popped == a.handle);
    CHECK(currentContext() == before);
}

TEST_CASE("On a thread with no current context a context-bound call fails with CUDA_ERROR_INVALID_CONTEXT",
          "[gpu][lesson03]") {
    requireGpu();
    const course::DynamicDriver& drv = driver();
    auto synchronize = DRIVER_FUNCTION(drv, cuCtxSynchronize);
    auto memAlloc = DRIVER_FUNCTION(drv, cuMemAlloc);
    REQUIRE(synchronize);
    REQUIRE(memAlloc);
    // A new thread: nothing this test process did on other threads is current here.
    CUcontext atStart = reinterpret_cast<CUcontext>(1);
    CUresult synchronizeResult = CUDA_SUCCESS;
    CUresult allocResult = CUDA_SUCCESS;
    std::thread([&] {
        atStart = currentContext();
        synchronizeResult = synchronize();
        CUdeviceptr pointer = 0;
        allocResult = memAlloc(&pointer, 1024);
    }).join();
    CHECK(atStart == nullptr);
    CHECK(synchronizeResult == CUDA_ERROR_INVALID_CONTEXT);
    CHECK(allocResult == CUDA_ERROR_INVALID_CONTEXT);
}

TEST_CASE("Memory allocated in a context survives a pop and is freed when the context is destroyed",
          "[gpu][lesson03]") {
    requireGpu();
    const MachineToMyself alone;  // free device memory is the whole machine's figure
    const course::DynamicDriver& drv = driver();
    auto deviceGet = DRIVER_FUNCTION(drv, cuDeviceGet);
    auto memAlloc = DRIVER_FUNCTION(drv, cuMemAlloc);
    auto push = DRIVER_FUNCTION(drv, cuCtxPushCurrent);
    auto pop = DRIVER_FUNCTION(drv, cuCtxPopCurrent);
    auto destroy = DRIVER_FUNCTION(drv, cuCtxDestroy);
    REQUIRE(deviceGet);
    REQUIRE(memAlloc);
    CUdevice device = 0;
    REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);

    OwnedContext a;  // current while b is popped, to ask cuMemGetInfo
    OwnedContext b;
    REQUIRE(createContext(&a.handle, 0, device) == CUDA_SUCCESS);
    // Before b exists: destroying b gives back its own reservation too, which would hide a
    // leaked allocation if the figure were taken after b was created.
    const long long freeBeforeB = freeMemory();
    REQUIRE(createContext(&b.handle, 0, device) == CUDA_SUCCESS);
    const long long freeBefore = freeMemory();
    CUdeviceptr allocation = 0;
    constexpr size_t kBytes = 256 * kMiB;
    REQUIRE(memAlloc(&allocation, kBytes) == CUDA_SUCCESS);
    CUcontext popped = nullptr;
    REQUIRE(pop(&popped) == CUDA_SUCCESS);
    const long long freeAfterPop = freeMemory();
    CHECK(freeBefore - freeAfterPop >= static_cast<long long>(kBytes) - kTolerance);

    REQUIRE(push(b.handle) == CUDA_SUCCESS);
    REQUIRE(destroy(b.handle) == CUDA_SUCCESS);  // frees the allocation with the context
    b.handle = nullptr;
    const long long freeAfterDestroy = freeMemory();
    CHECK(freeAfterDestroy + kTolerance >= freeBeforeB);
    REQUIRE(pop(&popped) == CUDA_SUCCESS);
    CHECK(popped == a.handle);
}

TEST_CASE("A context popped on one thread can be pushed and used on another", "[gpu][lesson03]") {
    requireGpu();
    const course::DynamicDriver& drv = driver();
    auto deviceGet = DRIVER_FUNCTION(drv, cuDeviceGet);
    auto push = DRIVER_FUNCTION(drv, cuCtxPushCurrent);
    auto pop = DRIVER_FUNCTION(drv, cuCtxPopCurrent);
    auto memAlloc = DRIVER_FUNCTION(drv, cuMemAlloc);
    auto memFree = DRIVER_FUNCTION(drv, cuMemFree);
    auto memset = DRIVER_FUNCTION(drv, cuMemsetD32);
    auto copyBack = DRIVER_FUNCTION(drv, cuMemcpyDtoH);
    REQUIRE(deviceGet);
    REQUIRE(memset);
    REQUIRE(copyBack);
    CUdevice device = 0;
    REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);

    OwnedContext floating;
    REQUIRE(createContext(&floating.handle, 0, device) == CUDA_SUCCESS);
    CUcontext popped = nullptr;
    REQUIRE(pop(&popped) == CUDA_SUCCESS);  // now current on no thread

    // Catch2 assertions stay on this thread; the worker only records what it saw.
    CUcontext workerAtStart = reinterpret_cast<CUcontext>(1);
    CUcontext workerAfterPush = nullptr;
    CUcontext workerAfterPop = reinterpret_cast<CUcontext>(1);
    CUresult pushResult = CUDA_ERROR_UNKNOWN;
    CUresult workResult = CUDA_ERROR_UNKNOWN;
    unsigned int readBack = 0;
    std::thread([&] {
        workerAtStart = currentContext();
        pushResult = push(floating.handle);
        if (pushResult != CUDA_SUCCESS) return;
        workerAfterPush = currentContext();
        CUdeviceptr word = 0;
        workResult = memAlloc(&word, sizeof(unsigned int));
        if (workResult == CUDA_SUCCESS) {
            workResult = memset(word, 0xC0FFEEu, 1);
            if (workResult == CUDA_SUCCESS) workResult = copyBack(&readBack, word, sizeof(readBack));
            memFree(word);
        }
        CUcontext workerPopped = nullptr;
        pop(&workerPopped);
        workerAfterPop = currentContext();
    }).join();

    CHECK(workerAtStart == nullptr);
    CHECK(pushResult == CUDA_SUCCESS);
    CHECK(workerAfterPush == floating.handle);
    CHECK(workResult == CUDA_SUCCESS);
    CHECK(readBack == 0xC0FFEEu);
    CHECK(workerAfterPop == nullptr);
}

TEST_CASE("cuCtxGetFlags reports the scheduling policy a context was created with", "[gpu][lesson03]") {
    requireGpu();
    const course::DynamicDriver& drv = driver();
    auto deviceGet = DRIVER_FUNCTION(drv, cuDeviceGet);
    auto getFlags = DRIVER_FUNCTION(drv, cuCtxGetFlags);
    auto pop = DRIVER_FUNCTION(drv, cuCtxPopCurrent);
    REQUIRE(deviceGet);
    REQUIRE(getFlags);
    CUdevice device = 0;
    REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);
    for (const unsigned int policy : {CU_CTX_SCHED_SPIN, CU_CTX_SCHED_YIELD, CU_CTX_SCHED_BLOCKING_SYNC}) {
        INFO(course::schedulingPolicyName(policy));
        OwnedContext context;
        REQUIRE(createContext(&context.handle, policy, device) == CUDA_SUCCESS);
        unsigned int flags = 0;
        CHECK(getFlags(&flags) == CUDA_SUCCESS);
        CHECK((flags & CU_CTX_SCHED_MASK) == policy);
        CUcontext popped = nullptr;
        CHECK(pop(&popped) == CUDA_SUCCESS);
    }
}
