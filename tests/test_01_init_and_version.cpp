#include <catch2/catch_test_macros.hpp>

#include <string>

#include "common/course_util.h"
#include "tests/harness.h"

using namespace harness;

namespace {
const std::string kLesson = "01-init-and-version";
}

TEST_CASE("Lesson 01 reports a driver at least as new as its major version and at least one device",
          "[gpu][lesson01]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson);
    REQUIRE(r.exitCode == 0);
    REQUIRE(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "check driver major version reaches the toolkit's") == "ok");
    CHECK(valueOf(r.out, "check each device's PCI bus id leads back to it") == "ok");
    CHECK(valueOf(r.out, "check the device count ends the valid ordinals") == "ok");
    CHECK(valueOf(r.out, "cuDeviceGet(count - 1)") == "CUDA_SUCCESS");
    CHECK(valueOf(r.out, "cuDeviceGet(count)") != "CUDA_SUCCESS");

    // "driver CUDA version: 13.0 (cuDriverGetVersion = 13000)"
    const auto driverLine = valueOf(r.out, "driver CUDA version");
    REQUIRE(driverLine);
    const auto equals = driverLine->find("= ");
    REQUIRE(equals != std::string::npos);
    const int reported = std::stoi(driverLine->substr(equals + 2));
    CHECK(reported == driver().driverVersion());
    // Minor-version compatibility: the driver's major version must reach the toolkit's.
    CHECK(course::decodeCudaVersion(reported).major >= course::decodeCudaVersion(CUDA_VERSION).major);
    CHECK(valueOf(r.out, "compiled with cuda.h") ==
          course::formatCudaVersion(CUDA_VERSION) + " (CUDA_VERSION = " + std::to_string(CUDA_VERSION) + ")");

    const auto count = valueOf(r.out, "device count");
    REQUIRE(count);
    CHECK(std::stoi(*count) >= 1);
    CHECK(std::stoi(*count) == driver().deviceCount());
    // Every device gets its six labelled lines.
    for (int d = 0; d < driver().deviceCount(); ++d) {
        const std::string prefix = "device " + std::to_string(d);
        CHECK(valueOf(r.out, prefix + " name"));
        CHECK(valueOf(r.out, prefix + " compute capability"));
        CHECK(valueOf(r.out, prefix + " uuid").value_or("").rfind("GPU-", 0) == 0);
        CHECK(valueOf(r.out, prefix + " integrated"));
        CHECK(valueOf(r.out, prefix + " PCI bus id"));
    }
}

TEST_CASE("Lesson 01 reports the device's compute capability as the driver does", "[gpu][lesson01]") {
    requireGpu();
    const course::DynamicDriver& drv = driver();
    auto deviceGet = DRIVER_FUNCTION(drv, cuDeviceGet);
    auto getAttribute = DRIVER_FUNCTION(drv, cuDeviceGetAttribute);
    REQUIRE(deviceGet);
    REQUIRE(getAttribute);
    CUdevice device = 0;
    REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);
    int major = 0;
    int minor = 0;
    REQUIRE(getAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) == CUDA_SUCCESS);
    REQUIRE(getAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device) == CUDA_SUCCESS);

    const RunResult r = defaultRun(kLesson);
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "device 0 compute capability") == std::to_string(major) + "." + std::to_string(minor));
}

TEST_CASE("Lesson 01 against NVIDIA's stub libcuda fails at cuInit with a clear message and exit 1",
          "[cpu][lesson01][fault]") {
    const RunResult r = runAgainstStub(kLesson);
    CHECK(r.exitCode == 1);
    CHECK(contains(r.err, "CUDA driver call failed: cuInit(0)"));
    CHECK(contains(r.err, "CUDA_ERROR_STUB_LIBRARY (code 34)"));
    CHECK(contains(r.err, "01-init-and-version/main.cpp:"));
    CHECK(contains(r.err, "hint:"));
    CHECK_FALSE(contains(r.out, "Result = PASS"));
}

TEST_CASE("Lesson 01 with every device hidden says so and exits 1", "[gpu][lesson01][fault]") {
    requireGpu();
    RunOptions options;
    options.setEnv["CUDA_VISIBLE_DEVICES"] = "";
    const RunResult r = runLesson(kLesson, options);
    CHECK(r.exitCode == 1);
    // cuInit itself reports that there is no device.
    CHECK(contains(r.err, "CUDA_ERROR_NO_DEVICE"));
    CHECK(contains(r.err, "hint:"));
}
