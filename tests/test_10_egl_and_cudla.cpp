#include <catch2/catch_test_macros.hpp>

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "10-egl-and-cudla";
const std::string kNoEglSkip = "Result = SKIP (EGL headers were not found at build time: apt-get install libegl-dev)";



// The line "section <name>: SKIP (<reason>)", or empty when the section did not skip.
std::string skipLine(const std::string& out, const std::string& section) {
    const std::string prefix = "section " + section + ": SKIP (";
    for (const auto& line : lines(out))
        if (line.rfind(prefix, 0) == 0) return line;
    return "";
}

// egl_stream's plain run; SKIPs the test when the program could not run its streams here.
RunResult streamRun() {
    const RunResult r = defaultRun(kLesson, "egl_stream");
    requireRan(r);
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

TEST_CASE("Lesson 10's programs reject unknown arguments, and cudla_hybrid --loadable without a file, with exit 2",
          "[cpu][lesson10]") {
    for (const std::string program : {"egl_stream", "egl_sync", "cudla_hybrid"}) {
        INFO(program);
        const RunResult r = runAgainstStub(kLesson, {"--bogus"}, program);
        CHECK(r.exitCode == 2);
        CHECK(contains(r.err, "usage:"));
    }
    const RunResult r = runAgainstStub(kLesson, {"--loadable"}, "cudla_hybrid");
    CHECK(r.exitCode == 2);
    CHECK(contains(r.err, "--loadable needs a file"));
}

TEST_CASE("Built without EGL, lesson 10's EGL programs say so and exit 77 before any driver call", "[cpu][lesson10]") {
    // What the Makefile does where the EGL headers or libEGL.so are missing: -DCOURSE_NO_EGL, no -lEGL.
    char pattern[] = "/tmp/course-noegl-XXXXXX";
    const char* dir = mkdtemp(pattern);
    REQUIRE(dir != nullptr);
    const std::string cuda = std::getenv("CUDA_PATH") ? std::getenv("CUDA_PATH") : "/usr/local/cuda";
    const std::string cxx = std::getenv("CXX") ? std::getenv("CXX") : "g++";
    const std::string lesson = repoRoot() + "/" + kLesson + "/";
    const std::vector<std::pair<std::string, std::string>> programs = {
        {"egl_stream", "egl_stream.cpp stream_producer.cpp stream_consumer.cpp egl_display.cpp"},
        {"egl_sync", "egl_sync.cpp egl_display.cpp"}};
    for (const auto& [program, sources] : programs) {
        INFO(program);
        std::string command = "cd " + lesson + " && " + cxx +
                              " -std=c++20 -Wall -Wextra -Werror -DCOURSE_NO_EGL -isystem " + cuda + "/include -o " +
                              dir + "/" + program + " " + sources + " -L" + cuda + "/lib64/stubs -lcuda";
        RunOptions build;
        build.args = {"-c", command};
        const RunResult built = run("/bin/sh", build);
        REQUIRE(built.exitCode == 0);
        // Against the stub driver every driver call fails: exit 77 shows that none was made.
        RunOptions options;
        options.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();
        const RunResult r = run(std::string(dir) + "/" + program, options);
        CHECK(r.exitCode == 77);
        CHECK(r.out == kNoEglSkip + "\n");
        CHECK(r.err.empty());
        unlink((std::string(dir) + "/" + program).c_str());
    }
    rmdir(dir);
}

TEST_CASE("Lesson 10 finds the EGL device that is the CUDA device, whatever else EGL lists", "[gpu][lesson10]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "egl_stream");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    // EGL lists every GPU of the machine whatever CUDA_VISIBLE_DEVICES says: the count is information.
    const auto count = valueOf(r.out, "EGL devices on this machine");
    REQUIRE(count);
    CHECK(std::atoi(count->c_str()) >= 1);
    const auto match = valueOf(r.out, "EGL device of CUDA device 0");
    REQUIRE(match);
    CHECK(match->rfind("EGL device ", 0) == 0);
    CHECK(contains(*match, "(EGL_NV_device_cuda)"));
    CHECK(valueOf(r.out, "client extension EGL_EXT_platform_device") == "yes");
    CHECK(valueOf(r.out, "display extension EGL_KHR_stream") == "yes");
}

TEST_CASE("Lesson 10's EGLStream frames round-trip between the two threads with the right values", "[gpu][lesson10]") {
    requireGpu();
    const RunResult r = streamRun();
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "consumer thread saw frame 0, mismatched pixels") == "0");
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
    const RunResult r = streamRun();
    // App note, "CUDA as Producer": the stream keeps the last frame for re-acquisition. The
    // producer asks only after the consumer thread released it, so the timeout is the stream's doing.
    const auto stuck =
        valueOf(r.out, "producer thread, frame back with EGL_SUPPORT_REUSE_NV = EGL_TRUE (default), 20 attempts");
    REQUIRE(stuck);
    CHECK(*stuck == "CUDA_ERROR_LAUNCH_TIMEOUT (code 702)");
    CHECK(valueOf(r.out, "stream state after the consumer released") == "EGL_STREAM_STATE_OLD_FRAME_AVAILABLE_KHR");
    // Provoked on purpose and reported, not fatal.
    CHECK(contains(r.err, "CUDA driver call failed: askBack(end, stream, &returned, attempts)"));
}

TEST_CASE("An EGLStream in mailbox mode delivers the newest frame and in FIFO mode every frame", "[gpu][lesson10]") {
    requireGpu();
    const RunResult r = streamRun();
    CHECK(valueOf(r.out, "mailbox") == "presented frames 10 11, consumer saw 11");
    CHECK(valueOf(r.out, "mailbox: frames back at the producer") == "2 of 2");
    if (skipLine(r.out, "EGLStream fifo").empty()) {
        CHECK(valueOf(r.out, "fifo") == "presented frames 10 11, consumer saw 10 11");
        CHECK(valueOf(r.out, "fifo: frames back at the producer") == "2 of 2");
    } else {
        CHECK(valueOf(r.out, "display extension EGL_KHR_stream_fifo") == "no");
    }
}

TEST_CASE("Without a wait the consumer reads the old frame; after the GPU-side wait the new one", "[gpu][lesson10]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "egl_sync");
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    // The producer is held at a gate while both reads are enqueued, so these cannot pass by luck.
    CHECK(valueOf(r.out, "producer's fence while the gate is closed") == "CUDA_ERROR_NOT_READY");
    CHECK(valueOf(r.out, "consumer without a wait read frame") == "1, mismatched pixels 0");
    CHECK(valueOf(r.out, "consumer after the GPU-side wait read frame") == "2, mismatched pixels 0");
    if (contains(r.out, "eglCreateSync from the producer's CUDA event: made")) {
        CHECK(valueOf(r.out, "eglClientWaitSync, timeout 0, gate closed") == "EGL_TIMEOUT_EXPIRED");
        CHECK(valueOf(r.out, "eglClientWaitSync, timeout 1 s, gate open") == "EGL_CONDITION_SATISFIED");
    }
}

TEST_CASE("Lesson 10 reports the Tegra-only parts as SKIP with a reason on a discrete GPU", "[gpu][lesson10]") {
    requireGpu();
    if (integratedGpu()) SKIP("this is an integrated GPU: the Tegra-only parts may run here");
    const RunResult sync = defaultRun(kLesson, "egl_sync");
    requireRan(sync);
    // EGLImage needs a GL or NvBufSurface source; EGLSync-to-CUDA is Tegra-only.
    CHECK(contains(skipLine(sync.out, "EGLImage"), "OpenGL (ES) texture"));
    CHECK_FALSE(skipLine(sync.out, "CUDA event from an EGLSync").empty());
    CHECK(valueOf(sync.out, "consumer waits on") == "the producer's CUDA event (no EGL on this path)");
    const RunResult dla = defaultRun(kLesson, "cudla_hybrid");
    CHECK(dla.exitCode == 77);
    CHECK(valueOf(dla.out, "integrated") == "0");
#if __has_include(<cudla.h>)
    CHECK(contains(dla.out, "Result = SKIP (cuDLA works only with a Jetson's integrated GPU"));
#else
    CHECK(contains(dla.out, "Result = SKIP (cudla.h was not found at build time"));
#endif
}

TEST_CASE("The CUDA-EGL entry points the lesson reports match what cuGetProcAddress gives", "[gpu][lesson10]") {
    requireGpu();
    const std::vector<std::pair<std::string, std::vector<const char*>>> programs = {
        {"egl_stream", {"cuEGLStreamConsumerConnect", "cuEGLStreamProducerConnect", "cuEGLStreamProducerReturnFrame"}},
        {"egl_sync", {"cuGraphicsEGLRegisterImage", "cuEventCreateFromEGLSync"}}};
    for (const auto& [program, symbols] : programs) {
        const RunResult r = defaultRun(kLesson, program);
        requireRan(r);
        for (const char* symbol : symbols) {
            INFO(program << ": " << symbol);
            const bool found = driver().get<void*>(symbol) != nullptr;
            CHECK(valueOf(r.out, std::string("driver entry point ") + symbol) == (found ? "found" : "not found"));
        }
    }
    if (!integratedGpu()) {
        // EGLSync-to-CUDA interop exists only in Tegra drivers (app note, EGLSync section).
        CHECK(driver().get<void*>("cuEventCreateFromEGLSync") == nullptr);
    }
}

TEST_CASE("Lesson 10's programs decide PASS through named checks, and every one held", "[gpu][lesson10]") {
    requireGpu();
    for (const std::string program : {"egl_stream", "egl_sync", "cudla_hybrid"}) {
        INFO(program);
        const RunResult r = defaultRun(kLesson, program);
        if (r.exitCode == 77) continue;
        // cudla_hybrid without --loadable runs no task: nothing to check.
        requireChecksHeld(r, program != "cudla_hybrid");
    }
    const RunResult r = streamRun();
    // The worker threads report their calls to main, which turns them into one check per step.
    CHECK(contains(r.out, "check worker threads' driver calls succeed: ok"));
    CHECK_FALSE(contains(r.out, " thread: cu"));
    CHECK(contains(r.out, "check the stream keeps the last frame while reuse is on: ok"));
}
