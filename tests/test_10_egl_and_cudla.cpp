#include <catch2/catch_test_macros.hpp>

#include <string>

#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "10-egl-and-cudla";

// The line "section <name>: SKIP (<reason>)", or empty when the section did not skip.
std::string skipLine(const std::string& out, const std::string& section) {
    const std::string prefix = "section " + section + ": SKIP (";
    for (const auto& line : lines(out))
        if (line.rfind(prefix, 0) == 0) return line;
    return "";
}

// Runs lesson 10 and SKIPs the test when the EGLStream part could not run here.
RunResult runWithEglStreams() {
    const RunResult& r = defaultRun(kLesson);
    requireRan(r);
    const std::string skipped = skipLine(r.out, "EGLStream round trip");
    if (!skipped.empty()) SKIP("lesson 10 skipped its EGLStream part: " << skipped);
    return r;
}

bool integratedGpu() {
    auto deviceGet = DRIVER_FUNCTION(driver(), cuDeviceGet);
    auto getAttribute = DRIVER_FUNCTION(driver(), cuDeviceGetAttribute);
    REQUIRE(deviceGet);
    REQUIRE(getAttribute);
    CUdevice device = 0;
    REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);
    int integrated = 0;
    REQUIRE(getAttribute(&integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED, device) == CUDA_SUCCESS);
    return integrated == 1;
}

}  // namespace

TEST_CASE("Lesson 10 rejects --loadable without a file, and unknown arguments, with usage and exit 2",
          "[cpu][lesson10]") {
    for (const auto& arguments : {std::vector<std::string>{"--loadable"}, std::vector<std::string>{"--bogus"}}) {
        const RunResult r = runAgainstStub(kLesson, arguments);
        CHECK(r.exitCode == 2);
        CHECK(contains(r.err, "usage:"));
    }
}

TEST_CASE("Lesson 10 finds an EGL device that is the CUDA device", "[gpu][lesson10]") {
    requireGpu();
    const RunResult& r = defaultRun(kLesson);
    requireRan(r);
    REQUIRE((r.exitCode == 0 || r.exitCode == 1));
    if (!skipLine(r.out, "EGL device platform").empty()) SKIP(skipLine(r.out, "EGL device platform"));
    CHECK(contains(r.out, "EGL_NV_device_cuda yes, CUDA device 0"));
    CHECK(valueOf(r.out, "client extension EGL_EXT_platform_device") == "yes");
    CHECK(valueOf(r.out, "display extension EGL_KHR_stream") == "yes");
}

TEST_CASE("Lesson 10's EGLStream frames round-trip with the right values", "[gpu][lesson10]") {
    requireGpu();
    const RunResult r = runWithEglStreams();
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "consumer acquired frame 0, mismatched pixels") == "0");
    for (int frame = 0; frame < 4; ++frame) {
        const std::string n = std::to_string(frame);
        INFO("frame " << n);
        CHECK(contains(r.out, "frame " + n + ": consumer saw frame " + n +
                                  ", mismatched pixels 0, returned to producer: CUDA_SUCCESS, same buffer: yes"));
    }
    CHECK(valueOf(r.out, "round trips") == "4 of 4");
}

TEST_CASE("With EGL_SUPPORT_REUSE_NV left at EGL_TRUE the producer's last frame never comes back", "[gpu][lesson10]") {
    requireGpu();
    const RunResult r = runWithEglStreams();
    // App note, "CUDA as Producer": the stream keeps the last frame for re-acquisition.
    const auto stuck = valueOf(r.out, "return frame with EGL_SUPPORT_REUSE_NV = EGL_TRUE (default), 20 attempts");
    REQUIRE(stuck);
    CHECK(*stuck == "CUDA_ERROR_LAUNCH_TIMEOUT (code 702)");
    // Provoked on purpose and reported, not fatal.
    CHECK(contains(r.err, "CUDA driver call failed: returnFrameWithRetry(ends, &returned)"));
    CHECK(contains(r.err, "CUDA_ERROR_LAUNCH_TIMEOUT"));
}

TEST_CASE("An EGLStream in mailbox mode delivers the newest frame and in FIFO mode every frame", "[gpu][lesson10]") {
    requireGpu();
    const RunResult r = runWithEglStreams();
    CHECK(valueOf(r.out, "mailbox") == "presented frames 10 11, consumer saw 11");
    CHECK(valueOf(r.out, "mailbox: frames back at the producer") == "2 of 2");
    if (skipLine(r.out, "EGLStream fifo").empty()) {
        CHECK(valueOf(r.out, "fifo") == "presented frames 10 11, consumer saw 10 11");
        CHECK(valueOf(r.out, "fifo: frames back at the producer") == "2 of 2");
    } else {
        CHECK(valueOf(r.out, "display extension EGL_KHR_stream_fifo") == "no");
    }
}

TEST_CASE("Lesson 10 reports the Tegra-only parts as SKIP with a reason on a discrete GPU", "[gpu][lesson10]") {
    requireGpu();
    if (integratedGpu()) SKIP("this is an integrated GPU: the Tegra-only parts may run here");
    const RunResult& r = defaultRun(kLesson);
    // EGLImage needs a GL or NvBufSurface source; EGLSync-to-CUDA is Tegra-only; no DLA on a dGPU host.
    CHECK_FALSE(skipLine(r.out, "EGLImage").empty());
    CHECK(contains(skipLine(r.out, "EGLImage"), "OpenGL (ES) texture"));
    CHECK_FALSE(skipLine(r.out, "CUDA event from an EGLSync").empty());
    CHECK_FALSE(contains(r.out, "buffer complete after the stream waited on the EGLSync's event"));
#if __has_include(<cudla.h>)
    CHECK_FALSE(skipLine(r.out, "cuDLA").empty());
#else
    CHECK(skipLine(r.out, "cuDLA") ==
          "section cuDLA: SKIP (needs a Jetson Xavier/Orin DLA, cudla.h from an aarch64 Tegra toolkit, and a "
          "loadable built by TensorRT)");
#endif
    CHECK_FALSE(contains(r.out, "cudlaGetLastError:"));
}

TEST_CASE("The CUDA-EGL entry points the lesson reports match what cuGetProcAddress gives", "[gpu][lesson10]") {
    requireGpu();
    const RunResult& r = defaultRun(kLesson);
    for (const char* symbol :
         {"cuEGLStreamConsumerConnect", "cuEGLStreamProducerConnect", "cuEGLStreamProducerReturnFrame",
          "cuGraphicsEGLRegisterImage", "cuEventCreateFromEGLSync"}) {
        INFO(symbol);
        const bool found = driver().get<void*>(symbol) != nullptr;
        CHECK(valueOf(r.out, std::string("driver entry point ") + symbol) == (found ? "found" : "not found"));
    }
    if (!integratedGpu()) {
        // EGLSync-to-CUDA interop exists only in Tegra drivers (app note, EGLSync section).
        CHECK(driver().get<void*>("cuEventCreateFromEGLSync") == nullptr);
    }
}
