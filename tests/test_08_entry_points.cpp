#include <cudaTypedefs.h>
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/harness.h"

using namespace harness;

namespace {
const std::string kLesson = "08-entry-points";
const std::string kStandalone = "dlopen_driver";



// "cuCtxCreate_v3" and the like: a lookup that gave a function (never an error
// name, never a NULL pointer). Which exported name it matches is the driver's business.
bool gaveFunction(const std::optional<std::string>& value) {
    return value && !value->empty() && value->rfind("CUDA_", 0) != 0 && !contains(*value, "NULL");
}
}  // namespace

TEST_CASE("Lesson 08 resolves known symbols at every version up to the driver's", "[gpu][lesson08]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson);
    REQUIRE(r.exitCode == 0);
    REQUIRE(contains(r.out, "Result = PASS"));
    const int driverVersion = driver().driverVersion();
    // Each answer is the export that the README's table expects for that version (cuda.h's
    // #defines and cudaTypedefs.h name the ABI of each), not merely some function.
    for (const auto& [symbol, version, exported] :
         {std::tuple{"cuCtxCreate", 3020, "cuCtxCreate_v2"}, std::tuple{"cuCtxCreate", 11040, "cuCtxCreate_v3"},
          std::tuple{"cuCtxCreate", 12050, "cuCtxCreate_v4"}, std::tuple{"cuCtxCreate", 13000, "cuCtxCreate_v4"},
          std::tuple{"cuStreamBeginCapture", 10000, "cuStreamBeginCapture"},
          std::tuple{"cuStreamBeginCapture", 10010, "cuStreamBeginCapture_v2"}}) {
        if (version > driverVersion) continue;
        const std::string label = std::string(symbol) + " @ " + std::to_string(version);
        INFO(label);
        CHECK(gaveFunction(valueOf(r.out, label)));
        CHECK(valueOf(r.out, label) == std::string(exported));
    }
    // Versions whose typedefs differ (PFN_cuCtxCreate_v3020 / _v11040 / _v12050,
    // PFN_cuStreamBeginCapture_v10000 / _v10010) are different functions.
    if (driverVersion >= 12050)
        CHECK(valueOf(r.out, "cuCtxCreate @ 3020, @ 11040, @ 12050") == "different functions");
    CHECK(valueOf(r.out, "cuStreamBeginCapture @ 10000, @ 10010") == "different functions");
    CHECK(valueOf(r.out, "cuCtxCreate compiles as") == (CUDA_VERSION >= 13000 ? "cuCtxCreate_v4" : "cuCtxCreate_v2"));
}

TEST_CASE("Lesson 08 tells an unknown symbol from one newer than the requested version", "[gpu][lesson08]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson);
    REQUIRE(r.exitCode == 0);
    const int askVersion = std::min(CUDA_VERSION, driver().driverVersion());
    CHECK(valueOf(r.out, "cuDoesNotExist @ " + std::to_string(askVersion)) ==
          "CUDA_SUCCESS, pointer NULL, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND");
    const auto tooOld = valueOf(r.out, "cuDeviceGetExecAffinitySupport @ 11030");
    REQUIRE(tooOld);
    CHECK(contains(*tooOld, "CUDA_SUCCESS, pointer NULL"));
    if (CUDA_VERSION >= 12000) CHECK(contains(*tooOld, "CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT"));
    CHECK(gaveFunction(valueOf(r.out, "cuDeviceGetExecAffinitySupport @ 11040")));
}

TEST_CASE("Lesson 08 calls through resolved pointers and finds the per-thread variants", "[gpu][lesson08]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson);
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "round trip through resolved pointers") == "1024 of 1024 correct");
    CHECK(gaveFunction(valueOf(r.out, "cuMemcpyAsync, LEGACY_STREAM")));
    CHECK(gaveFunction(valueOf(r.out, "cuMemcpyAsync, PER_THREAD_DEFAULT_STREAM")));
    CHECK(valueOf(r.out, "cuMemcpyAsync, LEGACY_STREAM") != valueOf(r.out, "cuMemcpyAsync, PER_THREAD_DEFAULT_STREAM"));
    const auto alloc = valueOf(r.out, "cuMemAlloc, PER_THREAD_DEFAULT_STREAM");
    REQUIRE(alloc);
    CHECK(contains(*alloc, "same as LEGACY_STREAM"));
    CHECK(contains(r.out, "context destroyed, library handle closed"));
}

TEST_CASE("Lesson 08 calls a function newer than old toolkits only when the driver has it", "[gpu][lesson08]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson);
    REQUIRE(r.exitCode == 0);
    const auto line = valueOf(r.out, "cuStreamGetDevice");
    REQUIRE(line);
    if (driver().driverVersion() >= 12080) {
        CHECK(contains(*line, "found in driver"));
        CHECK(contains(*line, "(the stream's device)"));
        // Called through the header's typedef where the toolkit has one.
        CHECK(contains(*line, CUDA_VERSION >= 12080 ? "PFN_cuStreamGetDevice_v12080 from cudaTypedefs.h"
                                                    : "a hand-written typedef for the 12080 ABI"));
    } else {
        CHECK(contains(*line, "not in this driver"));
    }
}

#if CUDA_VERSION >= 12000
// Checked directly through the driver, with the CUDA 12 form of cuGetProcAddress.
TEST_CASE("cuGetProcAddress answers known, unknown, too-new and too-old requests as documented", "[gpu][lesson08]") {
    requireGpu();
    const course::DynamicDriver& drv = driver();
    auto getProcAddress = DRIVER_FUNCTION(drv, cuGetProcAddress);
    REQUIRE(getProcAddress);
    const int driverVersion = drv.driverVersion();
    const int askVersion = std::min(CUDA_VERSION, driverVersion);

    for (const char* known : {"cuInit", "cuMemAlloc", "cuMemFree", "cuCtxCreate", "cuStreamBeginCapture"}) {
        INFO(known);
        void* function = nullptr;
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CHECK(getProcAddress(known, &function, askVersion, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS);
        CHECK(function != nullptr);
        CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS);
    }

    int notAFunction = 0;
    void* unknown = &notAFunction;  // anything but NULL, to see the driver clear it
    CUdriverProcAddressQueryResult unknownStatus = CU_GET_PROC_ADDRESS_SUCCESS;
    CHECK(getProcAddress("cuDoesNotExist", &unknown, askVersion, CU_GET_PROC_ADDRESS_DEFAULT, &unknownStatus) ==
          CUDA_SUCCESS);
    CHECK(unknown == nullptr);
    CHECK(unknownStatus == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);

    // cuDeviceGetExecAffinitySupport arrived in CUDA 11.4: asked for as 11.3, it is "too new".
    void* tooNew = nullptr;
    CUdriverProcAddressQueryResult tooNewStatus = CU_GET_PROC_ADDRESS_SUCCESS;
    CHECK(getProcAddress("cuDeviceGetExecAffinitySupport", &tooNew, 11030, CU_GET_PROC_ADDRESS_DEFAULT,
                         &tooNewStatus) == CUDA_SUCCESS);
    CHECK(tooNew == nullptr);
    CHECK(tooNewStatus == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);

    // Two versions whose typedefs differ give two different functions.
    void* v3020 = nullptr;
    void* v12050 = nullptr;
    CHECK(getProcAddress("cuCtxCreate", &v3020, 3020, CU_GET_PROC_ADDRESS_DEFAULT, nullptr) == CUDA_SUCCESS);
    CHECK(v3020 != nullptr);
    if (driverVersion >= 12050) {
        CHECK(getProcAddress("cuCtxCreate", &v12050, 12050, CU_GET_PROC_ADDRESS_DEFAULT, nullptr) == CUDA_SUCCESS);
        CHECK(v12050 != nullptr);
        CHECK(v3020 != v12050);
    }

    // A version above the driver's own: the documentation promises CUDA_ERROR_INVALID_VALUE.
    void* future = nullptr;
    CHECK(getProcAddress("cuMemAlloc", &future, driverVersion + 10, CU_GET_PROC_ADDRESS_DEFAULT, nullptr) ==
          CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("Resolved cuMemAlloc and cuMemFree, cast to their typedefs, allocate and free", "[gpu][lesson08]") {
    requireGpu();
    const course::DynamicDriver& drv = driver();
    auto getProcAddress = DRIVER_FUNCTION(drv, cuGetProcAddress);
    auto deviceGet = DRIVER_FUNCTION(drv, cuDeviceGet);
    auto retain = DRIVER_FUNCTION(drv, cuDevicePrimaryCtxRetain);
    auto release = DRIVER_FUNCTION(drv, cuDevicePrimaryCtxRelease);
    auto push = DRIVER_FUNCTION(drv, cuCtxPushCurrent);
    auto pop = DRIVER_FUNCTION(drv, cuCtxPopCurrent);
    REQUIRE((getProcAddress && deviceGet && retain && release && push && pop));

    void* allocAddress = nullptr;
    void* freeAddress = nullptr;
    REQUIRE(getProcAddress("cuMemAlloc", &allocAddress, 3020, CU_GET_PROC_ADDRESS_DEFAULT, nullptr) == CUDA_SUCCESS);
    REQUIRE(getProcAddress("cuMemFree", &freeAddress, 3020, CU_GET_PROC_ADDRESS_DEFAULT, nullptr) == CUDA_SUCCESS);
    REQUIRE(allocAddress != nullptr);
    REQUIRE(freeAddress != nullptr);
    const auto memAlloc = reinterpret_cast<PFN_cuMemAlloc_v3020>(allocAddress);
    const auto memFree = reinterpret_cast<PFN_cuMemFree_v3020>(freeAddress);

    CUdevice device = 0;
    REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);
    CUcontext primary = nullptr;
    REQUIRE(retain(&primary, device) == CUDA_SUCCESS);
    REQUIRE(push(primary) == CUDA_SUCCESS);
    CUdeviceptr buffer = 0;
    const CUresult allocated = memAlloc(&buffer, 1 << 20);
    const CUresult freed = allocated == CUDA_SUCCESS ? memFree(buffer) : allocated;
    CUcontext popped = nullptr;
    CHECK(pop(&popped) == CUDA_SUCCESS);
    CHECK(release(device) == CUDA_SUCCESS);
    CHECK(allocated == CUDA_SUCCESS);
    CHECK(buffer != 0);
    CHECK(freed == CUDA_SUCCESS);
}
#endif

// The program that does not link libcuda.

TEST_CASE("dlopen_driver does not link libcuda", "[cpu][lesson08]") {
    // The dynamic section lists the libraries the loader must find before main runs.
    RunOptions options;
    options.args = {"-d", lessonBinary(kLesson, kStandalone)};
    const RunResult r = run("readelf", options);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "(NEEDED)"));
    CHECK_FALSE(contains(r.out, "libcuda"));
}

TEST_CASE("dlopen_driver against NVIDIA's stub library explains the stub and exits 1", "[cpu][lesson08][fault]") {
    const RunResult r = runAgainstStub(kLesson, {}, kStandalone);
    CHECK(r.exitCode == 1);
    CHECK(contains(r.out, "entry point: cuGetProcAddress"));
    CHECK(contains(r.err, "NVIDIA's stub library"));
    CHECK(contains(r.err, stubDriverDir()));
    CHECK_FALSE(contains(r.out + r.err, "error while loading shared libraries"));
    CHECK_FALSE(contains(r.out, "Result = PASS"));
}

TEST_CASE("dlopen_driver on a machine without the driver says so and exits 1", "[cpu][lesson08][fault]") {
    // Only meaningful where libcuda.so.1 really cannot be loaded (CI); a machine with
    // the driver installed cannot hide it from dlopen.
    if (!contains(driver().problem(), "libcuda.so.1 could not be loaded")) {
        SKIP("libcuda.so.1 loads on this machine, so the no-driver case cannot happen here ("
             << (driver().usable() ? std::string("driver usable") : driver().problem()) << ")");
    }
    const RunResult r = runLesson(kLesson, {}, kStandalone);
    CHECK(r.exitCode == 1);
    CHECK(contains(r.err, "no NVIDIA driver found: libcuda.so.1 is installed with the driver"));
    CHECK_FALSE(contains(r.out + r.err, "error while loading shared libraries"));
    CHECK_FALSE(contains(r.out, "Result = PASS"));
}

TEST_CASE("dlopen_driver runs an allocation round trip through cuGetProcAddress", "[gpu][lesson08]") {
    requireGpu();
    const RunResult r = runLesson(kLesson, {}, kStandalone);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "resolved") == "12 functions");
    CHECK(valueOf(r.out, "device count") == std::to_string(driver().deviceCount()));
    CHECK(valueOf(r.out, "round trip") == "4096 bytes, identical");
}

TEST_CASE("dlopen_driver with every device hidden explains it and exits 1", "[gpu][lesson08][fault]") {
    requireGpu();
    RunOptions options;
    options.setEnv["CUDA_VISIBLE_DEVICES"] = "";
    const RunResult r = runLesson(kLesson, options, kStandalone);
    CHECK(r.exitCode == 1);
    CHECK(contains(r.err, "cuInit(0) failed: CUDA_ERROR_NO_DEVICE"));
    CHECK(contains(r.err, "CUDA_VISIBLE_DEVICES"));
}

TEST_CASE("Lesson 08 rejects an unknown argument with a usage line and exit 2", "[cpu][lesson08]") {
    const RunResult r = runAgainstStub(kLesson, {"--bogus"});
    CHECK(r.exitCode == 2);
    CHECK(contains(r.err, "usage:"));
}

TEST_CASE("Lesson 08 decides PASS through named checks, and every one held", "[gpu][lesson08]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson);
    REQUIRE(r.exitCode == 0);
    requireChecksHeld(r);
    for (const char* check : {"cuCtxCreate gives a different function for each ABI",
                              "unknown name gives no function and symbol not found",
                              "cuMemcpyAsync has a per-thread variant", "round trip through resolved pointers exact"}) {
        INFO(check);
        CHECK(contains(r.out, std::string("check ") + check + ": ok"));
    }
}
