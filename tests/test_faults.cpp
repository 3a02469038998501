// The fault matrix: every lesson meets a broken environment with a clear message
// (the failing call, the error's name, file:line, a hint) and a non-zero exit —
// never a crash, a hang or a raw loader error.
#include <catch2/catch_test_macros.hpp>

#include <string>

#include "tests/harness.h"

using namespace harness;

namespace {

// Killed by a signal (a crash) or by the harness's timeout (a hang)?
bool crashedOrHung(const RunResult& r) {
    return r.timedOut || r.exitCode >= 128;
}

bool takesDeviceOption(const std::string& lesson) {
    return lesson >= "03";
}

}  // namespace

TEST_CASE("Every lesson run against NVIDIA's stub library names CUDA_ERROR_STUB_LIBRARY and exits 1", "[cpu][faults]") {
    for (const auto& lesson : lessonFolders()) {
        INFO(lesson);
        RunOptions options;
        options.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();
        options.timeoutSeconds = 60;
        const RunResult r = runLesson(lesson, options);
        CHECK_FALSE(crashedOrHung(r));
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA_ERROR_STUB_LIBRARY (code 34)"));
        CHECK(contains(r.err, "main.cpp:"));
        CHECK(contains(r.err, "hint:"));
    }
}

TEST_CASE("make run-NN for every lesson explains a machine without a usable GPU", "[cpu][faults]") {
    for (const auto& lesson : lessonFolders()) {
        INFO(lesson);
        RunOptions options;
        options.args = {"-s", "-C", repoRoot(), "run-" + lesson.substr(0, 2)};
        options.unsetEnv = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"};
        options.setEnv["CUDA_VISIBLE_DEVICES"] = "";
        const RunResult r = run("make", options);
        CHECK(r.exitCode != 0);
        CHECK(contains(r.err, "Cannot run the lessons"));
        CHECK_FALSE(contains(r.out + r.err, "error while loading shared libraries"));
    }
}

TEST_CASE("Every lesson with every device hidden fails at cuInit with CUDA_ERROR_NO_DEVICE", "[gpu][faults]") {
    requireGpu();
    for (const auto& lesson : lessonFolders()) {
        INFO(lesson);
        RunOptions options;
        options.setEnv["CUDA_VISIBLE_DEVICES"] = "";
        const RunResult r = runLesson(lesson, options);
        CHECK_FALSE(crashedOrHung(r));
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA_ERROR_NO_DEVICE"));
        CHECK(contains(r.err, "hint:"));
    }
}

TEST_CASE("Every lesson that takes --device rejects an ordinal that does not exist", "[gpu][faults]") {
    requireGpu();
    for (const auto& lesson : lessonFolders()) {
        if (!takesDeviceOption(lesson)) continue;
        INFO(lesson);
        RunOptions options;
        options.args = {"--device", std::to_string(driver().deviceCount())};
        const RunResult r = runLesson(lesson, options);
        CHECK_FALSE(crashedOrHung(r));
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA_ERROR_INVALID_DEVICE"));
        CHECK(contains(r.err, "main.cpp:"));
    }
}

TEST_CASE("Every lesson that takes --device rejects a malformed one with usage and exit 2", "[cpu][faults]") {
    for (const auto& lesson : lessonFolders()) {
        if (!takesDeviceOption(lesson)) continue;
        INFO(lesson);
        const RunResult r = runAgainstStub(lesson, {"--device", "first"});
        CHECK(r.exitCode == 2);
        CHECK(contains(r.err, "usage:"));
    }
}

TEST_CASE("Every lesson passes when started from another working directory", "[gpu][faults]") {
    requireGpu();
    for (const auto& lesson : lessonFolders()) {
        INFO(lesson);
        RunOptions options;
        options.workingDir = "/";
        const RunResult r = runLesson(lesson, options);
        CHECK((r.exitCode == 0 || r.exitCode == course::kExitNotApplicable));
        CHECK(contains(r.out, "Result = "));
    }
}
