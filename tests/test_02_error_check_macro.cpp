#include <catch2/catch_test_macros.hpp>

#include <string>

#include "tests/harness.h"

using namespace harness;

namespace {
const std::string kLesson = "02-error-check-macro";
}

TEST_CASE("Lesson 02's provoked errors carry the expected names", "[gpu][lesson02]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "cuDriverGetVersion(nullptr): got CUDA_ERROR_INVALID_VALUE (code 1)"));
    CHECK(contains(r.out, "cuDeviceGetCount before cuInit: got CUDA_ERROR_NOT_INITIALIZED (code 3)"));
    CHECK(contains(r.out, "cuInit(0xFFFFFFFF): got CUDA_ERROR_INVALID_VALUE (code 1)"));
    CHECK(contains(r.out, "cuDeviceGet(&device, deviceCount): got CUDA_ERROR_INVALID_DEVICE (code 101)"));
    CHECK(contains(r.out, "CHECK_DRIVER_BOOL returned false"));
    // What a failed call leaves in its out-parameter is not promised: only its presence is checked.
    CHECK(valueOf(r.out, "device handle after the failed call"));
    for (const char* check :
         {"a NULL version pointer gives CUDA_ERROR_INVALID_VALUE",
          "a call before cuInit gives CUDA_ERROR_NOT_INITIALIZED",
          "undefined cuInit flags give CUDA_ERROR_INVALID_VALUE", "the bool form returned false for the failed call",
          "an ordinal past the last device gives CUDA_ERROR_INVALID_DEVICE", "cuGetErrorName spells the enumerator",
          "cuGetErrorString gives a description, not the name",
          "cuGetErrorName refuses an unknown code with a NULL string",
          "cuGetErrorString refuses an unknown code with a NULL string"})
        CHECK(valueOf(r.out, std::string("check ") + check) == "ok");
    CHECK(valueOf(r.out, "cuGetErrorName(CUDA_ERROR_INVALID_DEVICE)") == "CUDA_ERROR_INVALID_DEVICE");
    CHECK(valueOf(r.out, "cuGetErrorName(1000)") == "CUDA_ERROR_INVALID_VALUE, *pStr NULL");
    CHECK(valueOf(r.out, "cuGetErrorString(1000)") == "CUDA_ERROR_INVALID_VALUE, *pStr NULL");
    CHECK(contains(r.out, "Result = PASS"));
    // The function form stamps its caller's place but cannot know the call's text.
    CHECK(contains(r.out, "function form: code 1 at "));
    CHECK(contains(r.out, "call text: (not available to a function)"));
    // The reports themselves went to stderr, each naming the call and its place.
    CHECK(contains(r.err, "CUDA driver call failed: cuDriverGetVersion(nullptr)"));
    CHECK(contains(r.err, "CUDA driver call failed: cuDeviceGetCount(&deviceCount)"));
    CHECK(contains(r.err, "CUDA driver call failed: cuInit(0xFFFFFFFFu)"));
    CHECK(contains(r.err, "CUDA driver call failed: cuDeviceGet(&device, deviceCount)"));
    CHECK(contains(r.err, "02-error-check-macro/main.cpp:"));
}

TEST_CASE("Lesson 02's fail-fast form ends the program with exit 1 at the failing call", "[gpu][lesson02]") {
    requireGpu();
    RunOptions options;
    options.args = {"--fail-fast-demo"};
    const RunResult r = runLesson(kLesson, options);
    CHECK(r.exitCode == 1);
    CHECK(contains(r.err, "CUDA driver call failed: cuDeviceGet(&device, deviceCount)"));
    CHECK(contains(r.err, "CUDA_ERROR_INVALID_DEVICE (code 101)"));
    CHECK_FALSE(contains(r.out, "unreachable"));
    CHECK_FALSE(contains(r.out, "Result = PASS"));
}

TEST_CASE("Lesson 02 against NVIDIA's stub libcuda reports each failure and exits 1 at cuInit",
          "[cpu][lesson02][fault]") {
    const RunResult r = runAgainstStub(kLesson);
    CHECK(r.exitCode == 1);
    // The report-and-carry-on form printed the first failure, then the fail-fast cuInit ended it.
    CHECK(contains(r.err, "CUDA driver call failed: cuDeviceGetCount(&deviceCount)"));
    CHECK(contains(r.err, "CUDA driver call failed: cuInit(0)"));
    CHECK(contains(r.err, "CUDA_ERROR_STUB_LIBRARY (code 34)"));
}

TEST_CASE("Lesson 02 rejects an unknown argument with a usage line and exit 2", "[cpu][lesson02]") {
    // Arguments are parsed before any driver call; the stub only lets the program load.
    const RunResult r = runAgainstStub(kLesson, {"--bogus"});
    CHECK(r.exitCode == 2);
    CHECK(contains(r.err, "usage:"));
}
