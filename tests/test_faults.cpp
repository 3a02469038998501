// The fault matrix: every lesson meets a broken environment with a clear message
// (the failing call, the error's name, file:line, a hint) and a non-zero exit —
// never a crash, a hang or a raw loader error.
#include <catch2/catch_test_macros.hpp>

#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "tests/harness.h"

using namespace harness;

namespace {

// Killed by a signal (a crash) or by the harness's timeout (a hang)?
bool crashedOrHung(const RunResult& r) {
    return r.timedOut || r.exitCode >= 128;
}

// Lessons 01-02 look at every device; from 03 on every program takes --device N.
bool takesDeviceOption(const std::string& lesson) {
    return lesson >= "03";
}

// Every program of every lesson, as (lesson, program) pairs in run order.
std::vector<std::pair<std::string, std::string>> everyProgram() {
    std::vector<std::pair<std::string, std::string>> programs;
    for (const auto& lesson : lessonFolders())
        for (const auto& program : lessonPrograms(lesson)) programs.emplace_back(lesson, program);
    return programs;
}

// The failing call's place, as the check macro prints it: a source file and a line.
bool namesSourceLine(const std::string& text) {
    static const std::regex place("[A-Za-z0-9_]+\\.(cpp|h):[0-9]+");
    return std::regex_search(text, place);
}

// The same options for every program, run at once (runAll), results in everyProgram()'s order.
std::vector<RunResult> runEveryProgram(const RunOptions& options, bool onlyWithDeviceOption = false) {
    std::vector<Job> jobs;
    for (const auto& [lesson, program] : everyProgram())
        if (!onlyWithDeviceOption || takesDeviceOption(lesson)) jobs.push_back(Job{lessonBinary(lesson, program), options});
    return runAll(jobs);
}

}  // namespace

TEST_CASE("Every lesson run against NVIDIA's stub library names CUDA_ERROR_STUB_LIBRARY and exits 1", "[cpu][faults]") {
    RunOptions options;
    options.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();
    options.timeoutSeconds = 60;
    const auto results = runEveryProgram(options);
    size_t i = 0;
    for (const auto& [lesson, program] : everyProgram()) {
        INFO(lesson << "/" << program);
        const RunResult& r = results[i++];
        attachToReport(r);
        CHECK_FALSE(crashedOrHung(r));
        // A program that cannot apply on any machine like this one (built without EGL, say)
        // may stop before the driver with exit 77 and its reason; every other one meets the stub.
        if (r.exitCode == course::kExitNotApplicable) {
            CHECK(contains(r.out, "Result = SKIP ("));
            continue;
        }
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA_ERROR_STUB_LIBRARY (code 34)"));
        CHECK(namesSourceLine(r.err));
        CHECK(contains(r.err, "hint:"));
        CHECK_FALSE(contains(r.out, "Result = PASS"));
        // The first checked call of every program is cuInit, and the report names it, with the
        // source file of the program that made it. Lesson 02 is the exception by design: its
        // first steps call the driver before cuInit on purpose, to show the errors that gives.
        if (lesson.rfind("02-", 0) == 0) continue;
        CHECK(contains(r.err, "CUDA driver call failed: cuInit(0)"));
        CHECK(contains(r.err, lesson + "/" + (program == lesson ? std::string("") : program + ".cpp:")));
    }
}

TEST_CASE("make run-NN for every lesson explains a machine without a usable GPU", "[cpu][faults]") {
    std::vector<Job> jobs;
    for (const auto& lesson : lessonFolders()) {
        Job job{"make", {}};
        job.options.args = {"-s", "-C", repoRoot(), "run-" + lesson.substr(0, 2)};
        job.options.unsetEnv = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"};
        job.options.setEnv["CUDA_VISIBLE_DEVICES"] = "";
        jobs.push_back(job);
    }
    const auto results = runAll(jobs);
    for (size_t i = 0; i < jobs.size(); ++i) {
        INFO(lessonFolders()[i]);
        attachToReport(results[i]);
        CHECK(results[i].exitCode != 0);
        CHECK(contains(results[i].err, "Cannot run the lessons"));
        CHECK_FALSE(contains(results[i].out + results[i].err, "error while loading shared libraries"));
    }
}

TEST_CASE("Every lesson with every device hidden fails at cuInit with CUDA_ERROR_NO_DEVICE", "[gpu][faults]") {
    requireGpu();
    RunOptions options;
    options.setEnv["CUDA_VISIBLE_DEVICES"] = "";
    const auto results = runEveryProgram(options);
    size_t i = 0;
    for (const auto& [lesson, program] : everyProgram()) {
        INFO(lesson << "/" << program);
        const RunResult& r = results[i++];
        attachToReport(r);
        CHECK_FALSE(crashedOrHung(r));
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA_ERROR_NO_DEVICE"));
        CHECK(contains(r.err, "hint:"));
    }
}

TEST_CASE("Every lesson that takes --device rejects an ordinal that does not exist", "[gpu][faults]") {
    requireGpu();
    RunOptions options;
    options.args = {"--device", std::to_string(driver().deviceCount())};
    const auto results = runEveryProgram(options, true);
    size_t i = 0;
    for (const auto& [lesson, program] : everyProgram()) {
        if (!takesDeviceOption(lesson)) continue;
        INFO(lesson << "/" << program);
        const RunResult& r = results[i++];
        attachToReport(r);
        CHECK_FALSE(crashedOrHung(r));
        if (r.exitCode == course::kExitNotApplicable) continue;  // stops before choosing a device
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA_ERROR_INVALID_DEVICE"));
        CHECK(namesSourceLine(r.err));
    }
}

TEST_CASE("Every lesson that takes --device rejects a malformed one with usage and exit 2", "[cpu][faults]") {
    for (const auto& [lesson, program] : everyProgram()) {
        if (!takesDeviceOption(lesson)) continue;
        checkRefusesArguments(lesson, {"--device", "first"}, program);
    }
}

TEST_CASE("Every lesson passes when started from another working directory", "[gpu][faults]") {
    requireGpu();
    // The shared plain run of every program starts in /, not in the repository.
    for (const auto& [lesson, program] : everyProgram()) {
        INFO(lesson << "/" << program);
        const RunResult r = defaultRun(lesson, program);
        CHECK(r.workingDir == "/");
        CHECK((r.exitCode == 0 || r.exitCode == course::kExitNotApplicable));
        CHECK(contains(r.out, "Result = "));
    }
}
