#include <catch2/catch_test_macros.hpp>

#include <string>
#include <thread>
#include <vector>

#include "tests/harness.h"

using namespace harness;

namespace {
const std::string kLesson = "07-runtime-interop";
const std::string kContext = "current_context";
const std::string kStream = "shared_stream";
const std::string kReset = "device_reset";
const std::string kIdentity = "device_identity";

}  // namespace

TEST_CASE("Lesson 07's runtime calls run in the context the driver made current", "[gpu][lesson07]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, kContext);
    REQUIRE(r.exitCode == 0);
    REQUIRE(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "cudaGetDevice") == "0");
    CHECK(valueOf(r.out, "cudaMalloc memory belongs to") == "driver context");
    CHECK(valueOf(r.out, "current context after runtime calls") == "driver context (unchanged)");
    CHECK(valueOf(r.out, "primary context active after runtime calls") == "no");
    const RunResult s = defaultRun(kLesson, kStream);
    REQUIRE(s.exitCode == 0);
    REQUIRE(contains(s.out, "Result = PASS"));
    CHECK(valueOf(s.out, "current context after cublasCreate") == "driver context (unchanged)");
    CHECK(valueOf(s.out, "cublasGetStream") == "the CUstream");
}

TEST_CASE("Lesson 07's runtime uses the primary context on a thread with no current context", "[gpu][lesson07]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, kContext);
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "worker thread, current context at start") == "none");
    CHECK(valueOf(r.out, "worker thread, current context after cudaMalloc") ==
          "primary context (same handle as cuDevicePrimaryCtxRetain)");
    CHECK(valueOf(r.out, "worker thread, same as the main thread's driver context") == "no");
    // Read on the worker before it retains anything: only its cudaMalloc can have started it.
    CHECK(valueOf(r.out, "primary context active after the worker's cudaMalloc, before any retain") == "yes");
    CHECK(checkOk(r.out, "the worker's runtime call initialised the primary context"));
    CHECK(valueOf(r.out, "main thread, current context") == "driver context (unchanged)");
    // The worker reports its calls to main instead of exiting; main turns that into a check.
    CHECK(contains(r.out, "check worker thread's calls succeed: ok"));
    CHECK_FALSE(contains(r.out, "worker thread: "));
}

TEST_CASE("Lesson 07 moves memory both ways and shares one stream and its events", "[gpu][lesson07]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, kStream);
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "CUstream is cudaStream_t") == "yes (same type)");
    CHECK(valueOf(r.out, "CUevent is cudaEvent_t") == "yes (same type)");
    // The kernels were launched by the runtime on the driver's stream, between driver copies.
    // The events around each launch were
    // recorded by the driver and timed by the runtime: the warm launch's interval lies inside
    // the span from the first launch's end, whatever the times are.
    CHECK(valueOf(r.out, "<<<>>> kernel on cuMemAlloc memory") == "4000 of 4000 correct");
    const auto first = valueOf(r.out, "first launch, events[0] to events[1]");
    const auto warm = valueOf(r.out, "warm launch, events[2] to events[3]");
    const auto since = valueOf(r.out, "first launch's end to warm launch's end, events[1] to events[3]");
    REQUIRE((first && warm && since));
    CHECK(std::stod(*first) > 0.0);
    CHECK(std::stod(*warm) <= std::stod(*since));
    CHECK(checkOk(r.out, "warm launch timed after the first launch ended"));
    CHECK(valueOf(r.out, "cublasSaxpy on cuMemAlloc memory") == "4000 of 4000 correct");
    CHECK(valueOf(r.out, "current context after cuCtxDestroy") == "none");
    const RunResult c = defaultRun(kLesson, kContext);
    REQUIRE(c.exitCode == 0);
    CHECK(valueOf(c.out, "cuMemcpyDtoH from cudaMalloc memory") == "4096 of 4096 correct");
    CHECK(valueOf(c.out, "current context after cuCtxDestroy") == "none");
}

TEST_CASE("Lesson 07 shows cudaDeviceReset leaving a cuCtxCreate context, its memory and settings alone",
          "[gpu][lesson07]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, kReset);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "current context after the reset") == "driver context (unchanged)");
    CHECK(valueOf(r.out, "cuMemAlloc buffer still belongs to the driver context") == "yes");
    const auto fifo = valueOf(r.out, "printf FIFO after the reset");
    REQUIRE(fifo);
    CHECK(contains(*fifo, "(still the configured value)"));
    CHECK(valueOf(r.out, "<<<>>> launch before the reset") == "4000 of 4000 correct");
    CHECK(valueOf(r.out, "primary context active after the reset") == "no");
    CHECK(valueOf(r.out, "<<<>>> launch after the reset, on the same buffer") == "4000 of 4000 correct");
    CHECK(valueOf(r.out, "cuCtxCreate context untouched by cudaDeviceReset") == "yes");
}

TEST_CASE("Lesson 07 shows cudaDeviceReset wiping state of a primary context the driver code retained",
          "[gpu][lesson07]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, kReset);
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "current context after cuDevicePrimaryCtxRetain") ==
          "none (retaining does not make it current)");
    CHECK(valueOf(r.out, "cudaSetDevice + cudaDeviceReset") == "done");
    // Read while the old reference is still held, so no last release can have reset it.
    const auto lost = valuesOf(r.out, "driver code, retained again while holding the old reference");
    REQUIRE(lost.size() == 2);
    CHECK(contains(lost[0], "back to the default: the setting was lost"));
    // What the driver returned in between is measured and printed, not assumed; both resets
    // give the same answers, and every reference is released at the end.
    const auto limitAfter = valuesOf(r.out, "driver code, cuCtxGetLimit after the reset");
    REQUIRE(limitAfter.size() == 2);
    CHECK(limitAfter[0] == limitAfter[1]);
    CHECK(limitAfter[0] != "CUDA_SUCCESS");
    CHECK(valuesOf(r.out, "primary context active at the end") == std::vector<std::string>{"no", "no"});
    // The driver's own reset of the primary context, run the same way, is seen the same way.
    CHECK(valueOf(r.out, "cuDevicePrimaryCtxReset") == "done");
    CHECK(contains(lost[1], "back to the default: the setting was lost"));
    CHECK(valueOf(r.out, "cudaDeviceReset and cuDevicePrimaryCtxReset, same observations") == "yes");
}

TEST_CASE("Lesson 07 runs cudaDeviceReset with a created context current and the primary context active, "
          "and prints what became of the primary context",
          "[gpu][lesson07]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, kReset);
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "cudaDeviceReset with the created context current") == "done");
    CHECK(valueOf(r.out, "current context after this reset") == "the created context (unchanged)");
    const auto before = valueOf(r.out, "primary context before the reset");
    REQUIRE(before);
    CHECK(contains(*before, "active yes"));
    CHECK(contains(*before, "CU_CTX_SCHED_BLOCKING_SYNC"));
    // Either outcome is a result; the program must print one, and its state must agree with it.
    const auto survives =
        valueOf(r.out, "primary context memory survives cudaDeviceReset with a created context current");
    REQUIRE(survives);
    CHECK((*survives == "yes" || *survives == "no"));
    const auto after = valueOf(r.out, "primary context after the reset");
    REQUIRE(after);
    CHECK(contains(*after, *survives == "yes" ? "active yes" : "active no"));
    for (const char* check :
         {"primary context active before the reset", "primary context's flags word is the one the library set",
          "created context still current and synchronising after the reset",
          "primary context's active flag agrees with its memory after the reset"}) {
        INFO(check);
        CHECK(valueOf(r.out, std::string("check ") + check) == "ok");
    }
}

// The same behaviours, checked directly through the driver, without the lesson.

TEST_CASE("The primary context has one handle per device, and retaining it does not make it current",
          "[gpu][lesson07]") {
    requireGpu();
    const course::DynamicDriver& drv = driver();
    auto deviceGet = DRIVER_FUNCTION(drv, cuDeviceGet);
    auto retain = DRIVER_FUNCTION(drv, cuDevicePrimaryCtxRetain);
    auto release = DRIVER_FUNCTION(drv, cuDevicePrimaryCtxRelease);
    auto getCurrent = DRIVER_FUNCTION(drv, cuCtxGetCurrent);
    REQUIRE((deviceGet && retain && release && getCurrent));

    // A fresh thread: nothing in this test process can have left a context current on it.
    CUcontext first = nullptr;
    CUcontext second = nullptr;
    CUcontext currentAfterRetain = reinterpret_cast<CUcontext>(1);
    CUresult results[6] = {};
    std::thread([&] {
        CUdevice device = 0;
        results[0] = deviceGet(&device, 0);
        results[1] = retain(&first, device);
        results[2] = retain(&second, device);
        results[3] = getCurrent(&currentAfterRetain);
        results[4] = release(device);
        results[5] = release(device);
    }).join();
    for (const CUresult result : results) CHECK(result == CUDA_SUCCESS);
    CHECK(first != nullptr);
    CHECK(first == second);
    CHECK(currentAfterRetain == nullptr);
}

TEST_CASE("An allocation reports the context it was made in", "[gpu][lesson07]") {
    requireGpu();
    const course::DynamicDriver& drv = driver();
    auto deviceGet = DRIVER_FUNCTION(drv, cuDeviceGet);
    auto retain = DRIVER_FUNCTION(drv, cuDevicePrimaryCtxRetain);
    auto release = DRIVER_FUNCTION(drv, cuDevicePrimaryCtxRelease);
    auto push = DRIVER_FUNCTION(drv, cuCtxPushCurrent);
    auto pop = DRIVER_FUNCTION(drv, cuCtxPopCurrent);
    auto memAlloc = DRIVER_FUNCTION(drv, cuMemAlloc);
    auto memFree = DRIVER_FUNCTION(drv, cuMemFree);
    auto pointerGetAttribute = DRIVER_FUNCTION(drv, cuPointerGetAttribute);
    REQUIRE((deviceGet && retain && release && push && pop && memAlloc && memFree && pointerGetAttribute));

    CUdevice device = 0;
    REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);
    CUcontext primary = nullptr;
    REQUIRE(retain(&primary, device) == CUDA_SUCCESS);
    REQUIRE(push(primary) == CUDA_SUCCESS);
    CUdeviceptr buffer = 0;
    const CUresult allocated = memAlloc(&buffer, 4096);
    CUcontext owner = nullptr;
    const CUresult queried =
        allocated == CUDA_SUCCESS ? pointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, buffer) : allocated;
    const CUresult freed = allocated == CUDA_SUCCESS ? memFree(buffer) : allocated;
    CUcontext popped = nullptr;
    CHECK(pop(&popped) == CUDA_SUCCESS);
    CHECK(release(device) == CUDA_SUCCESS);

    CHECK(allocated == CUDA_SUCCESS);
    CHECK(queried == CUDA_SUCCESS);
    CHECK(freed == CUDA_SUCCESS);
    CHECK(owner == primary);
    CHECK(popped == primary);
}

TEST_CASE("Resetting the primary context wipes its settings although it is still retained", "[gpu][lesson07]") {
    // The test process has no runtime, so it uses the driver's reset; lesson 07's
    // device_reset program shows cudaDeviceReset and this call seen the same way.
    requireGpu();
    const course::DynamicDriver& drv = driver();
    auto deviceGet = DRIVER_FUNCTION(drv, cuDeviceGet);
    auto retain = DRIVER_FUNCTION(drv, cuDevicePrimaryCtxRetain);
    auto release = DRIVER_FUNCTION(drv, cuDevicePrimaryCtxRelease);
    auto reset = DRIVER_FUNCTION(drv, cuDevicePrimaryCtxReset);
    auto getState = DRIVER_FUNCTION(drv, cuDevicePrimaryCtxGetState);
    auto push = DRIVER_FUNCTION(drv, cuCtxPushCurrent);
    auto pop = DRIVER_FUNCTION(drv, cuCtxPopCurrent);
    auto setLimit = DRIVER_FUNCTION(drv, cuCtxSetLimit);
    auto getLimit = DRIVER_FUNCTION(drv, cuCtxGetLimit);
    REQUIRE((deviceGet && retain && release && reset && getState && push && pop && setLimit && getLimit));

    CUdevice device = 0;
    REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);
    CUcontext primary = nullptr;
    REQUIRE(retain(&primary, device) == CUDA_SUCCESS);
    REQUIRE(push(primary) == CUDA_SUCCESS);
    size_t defaultFifo = 0;
    CHECK(getLimit(&defaultFifo, CU_LIMIT_PRINTF_FIFO_SIZE) == CUDA_SUCCESS);
    CHECK(setLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 2 * defaultFifo) == CUDA_SUCCESS);
    size_t configuredFifo = 0;  // the driver may adjust the requested value: read it back
    CHECK(getLimit(&configuredFifo, CU_LIMIT_PRINTF_FIFO_SIZE) == CUDA_SUCCESS);
    CHECK(configuredFifo != defaultFifo);
    CUcontext popped = nullptr;
    CHECK(pop(&popped) == CUDA_SUCCESS);

    CHECK(reset(device) == CUDA_SUCCESS);
    unsigned int flags = 0;
    int active = 1;
    CHECK(getState(device, &flags, &active) == CUDA_SUCCESS);
    CHECK(active == 0);

    // The old reference is still held: retain again before releasing it, so that no last
    // release can have reset the context, and read the setting; then release both.
    CUcontext again = nullptr;
    REQUIRE(retain(&again, device) == CUDA_SUCCESS);
    REQUIRE(push(again) == CUDA_SUCCESS);
    size_t fifoAfterReset = 0;
    CHECK(getLimit(&fifoAfterReset, CU_LIMIT_PRINTF_FIFO_SIZE) == CUDA_SUCCESS);
    CHECK(pop(&popped) == CUDA_SUCCESS);
    CHECK(release(device) == CUDA_SUCCESS);
    CHECK(release(device) == CUDA_SUCCESS);
    CHECK(fifoAfterReset == defaultFifo);
}

TEST_CASE("Lesson 07's driver and runtime describe the same device and read one context's limits", "[gpu][lesson07]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, kIdentity);
    REQUIRE(r.exitCode == 0);
    REQUIRE(contains(r.out, "Result = PASS"));
    for (const char* check :
         {"cuDeviceGetName matches the runtime's name", "cuDeviceTotalMem matches the runtime's totalGlobalMem",
          "cuDeviceGetUuid matches the runtime's uuid", "compute capability matches the runtime's major.minor",
          "multiprocessor count matches cudaDeviceGetAttribute", "cuMemGetInfo's total matches cudaMemGetInfo's",
          "cuCtxGetLimit reads the heap size cudaDeviceSetLimit set",
          "cudaDeviceGetLimit reads the FIFO size cuCtxSetLimit set"}) {
        INFO(check);
        CHECK(checkOk(r.out, check));
    }
    // The printed pairs agree too, and the driver's answers are the ones the test's own calls get.
    CHECK(valueOf(r.out, "cuDeviceGetName") == valueOf(r.out, "cudaDeviceProp::name"));
    CHECK(valueOf(r.out, "cuDeviceGetUuid") == valueOf(r.out, "cudaDeviceProp::uuid"));
    CHECK(valueOf(r.out, "cuDeviceGetUuid").value_or("").rfind("GPU-", 0) == 0);
    const course::DynamicDriver& drv = driver();
    auto deviceGet = DRIVER_FUNCTION(drv, cuDeviceGet);
    auto getAttribute = DRIVER_FUNCTION(drv, cuDeviceGetAttribute);
    REQUIRE(deviceGet);
    REQUIRE(getAttribute);
    CUdevice device = 0;
    REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);
    int smCount = 0;
    REQUIRE(getAttribute(&smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device) == CUDA_SUCCESS);
    CHECK(valueOf(r.out, "multiprocessors, cuDeviceGetAttribute") == std::to_string(smCount));
}

TEST_CASE("Lesson 07 against NVIDIA's stub libcuda stops at cuInit, before any runtime call",
          "[cpu][lesson07][fault]") {
    for (const std::string& program : {kContext, kStream, kReset, kIdentity}) {
        INFO(program);
        const RunResult r = runAgainstStub(kLesson, {}, program);
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA driver call failed: cuInit(0)"));
        CHECK(contains(r.err, "CUDA_ERROR_STUB_LIBRARY (code 34)"));
        CHECK_FALSE(contains(r.err, "CUDA runtime call failed"));
        CHECK_FALSE(contains(r.out, "Result = PASS"));
    }
}

TEST_CASE("Lesson 07 rejects an unknown argument with a usage line and exit 2", "[cpu][lesson07]") {
    for (const std::string& program : {kContext, kStream, kReset, kIdentity}) {
        INFO(program);
        const RunResult r = runAgainstStub(kLesson, {"--bogus"}, program);
        CHECK(r.exitCode == 2);
        CHECK(contains(r.err, "usage:"));
    }
}

TEST_CASE("Lesson 07's programs decide PASS through named checks, and every one held", "[gpu][lesson07]") {
    requireGpu();
    for (const std::string& program : {kContext, kStream, kReset, kIdentity}) {
        INFO(program);
        const RunResult r = defaultRun(kLesson, program);
        REQUIRE(r.exitCode == 0);
        requireChecksHeld(r);
    }
    const RunResult reset = defaultRun(kLesson, kReset);
    CHECK(contains(reset.out, "check cudaDeviceReset loses the primary context's setting: ok"));
    CHECK(contains(reset.out, "check created context keeps its printf FIFO setting: ok"));
}
