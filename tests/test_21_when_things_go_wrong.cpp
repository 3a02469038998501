#include <cuda.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "tests/harness.h"
// The lesson's process plumbing has no CUDA calls: its CPU tests compile it in directly.
#include "21-when-things-go-wrong/children.cpp"

using namespace harness;

namespace {

const std::string kLesson = "21-when-things-go-wrong";
const std::vector<std::string> kPrograms = {"sticky_errors", "late_errors", "driver_logs", "coredump", "checkpoint"};

// The value of a line the child printed, as the parent printed it again: "[child] LABEL: VALUE".
std::optional<std::string> childValue(const std::string& out, const std::string& label) {
    return valueOf(out, "[child] " + label);
}

// The rate at the end of "... N.NN GB/s", or -1 when the value has none.
double gigabytesPerSecondIn(const std::optional<std::string>& value) {
    static const std::regex form(".*?([0-9]+(\\.[0-9]+)?) GB/s");
    std::smatch match;
    return value && std::regex_match(*value, match, form) ? std::stod(match[1]) : -1.0;
}

// "N of N ..." with both numbers equal and above zero.
bool allOf(const std::optional<std::string>& value) {
    static const std::regex form("([1-9][0-9]*) of ([1-9][0-9]*).*");
    std::smatch match;
    return value && std::regex_match(*value, match, form) && match[1] == match[2];
}

// While it lives, this process's stdout goes to /dev/null: the plumbing under test prints every
// line of its child again, which would land in the test report.
class QuietStdout {
public:
    QuietStdout() {
        std::fflush(stdout);
        saved_ = dup(STDOUT_FILENO);
        const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        dup2(null, STDOUT_FILENO);
        close(null);
    }
    ~QuietStdout() {
        std::fflush(stdout);
        dup2(saved_, STDOUT_FILENO);
        close(saved_);
    }
    QuietStdout(const QuietStdout&) = delete;
    QuietStdout& operator=(const QuietStdout&) = delete;

private:
    int saved_ = -1;
};

// The folders the coredump program makes ("lesson21-coredump-XXXXXX" under $TMPDIR or /tmp).
std::vector<std::string> coredumpFolders() {
    const char* tmp = std::getenv("TMPDIR");
    const std::filesystem::path base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    std::vector<std::string> found;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(base, error))
        if (entry.path().filename().string().rfind("lesson21-coredump-", 0) == 0) found.push_back(entry.path());
    std::sort(found.begin(), found.end());
    return found;
}

#if CUDA_VERSION >= 12080
// Skips where the driver or the headers the tests were built with lack an API.
void requireCuda(int version, const char* api) {
    if (driver().driverVersion() < version || CUDA_VERSION < version)
        SKIP(std::string(api) + " needs CUDA " + std::to_string(version / 1000) + "." +
             std::to_string(version % 1000 / 10) + " in the driver and the headers");
}
#endif

}  // namespace

// ---------------------------------------------------------------------------
// CPU: no driver needed.

TEST_CASE("Lesson 21 runs its five programs in order", "[cpu][lesson21]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Lesson 21 refuses unknown or incomplete arguments with a usage line and exit 2", "[cpu][lesson21]") {
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {"sticky_errors", {"--bench"}},     // only checkpoint has a benchmark
        {"late_errors", {"--child"}},       // a role needs its number
        {"driver_logs", {"--child", "1"}},  // driver_logs starts no child
        {"coredump", {"--child", "one"}},
        {"checkpoint", {"--sizes", "3"}},
        {"checkpoint", {"--bench-max-mib", "256"}},             // only with --bench
        {"checkpoint", {"--bench", "--bench-max-mib", "100"}},  // below the smallest size, 256 MiB
        {"checkpoint", {"--bench", "--bench-max-mib"}},
    };
    for (const auto& [program, args] : cases) checkRefusesArguments(kLesson, args, program);
}

TEST_CASE("Lesson 21 refuses a child role a program does not have, before it touches the driver", "[cpu][lesson21]") {
    for (const auto& [program, role] : std::vector<std::pair<std::string, std::string>>{
             {"sticky_errors", "2"}, {"late_errors", "9"}, {"coredump", "2"}, {"checkpoint", "7"}}) {
        INFO(program << " --child " << role);
        const RunResult r = runAgainstStub(kLesson, {"--child", role}, program);
        CHECK(r.exitCode == 2);
        CHECK(contains(r.err, "no child role " + role));
        CHECK_FALSE(contains(r.err, "CUDA_ERROR_STUB_LIBRARY"));
    }
}

TEST_CASE("Lesson 21's children that need an instruction say so when stdin has none", "[cpu][lesson21]") {
    for (const auto& [program, message] : std::vector<std::pair<std::string, std::string>>{
             {"coredump", "no dump path on stdin"}, {"checkpoint", "no buffer size on stdin"}}) {
        INFO(program);
        RunOptions options;
        options.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();
        options.args = {"-c", "exec \"$0\" --child 1 </dev/null", lessonBinary(kLesson, program)};
        const RunResult r = run("/bin/sh", options);
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, message));
        CHECK_FALSE(contains(r.err, "CUDA_ERROR_STUB_LIBRARY"));
    }
}

TEST_CASE("Lesson 21 coredump's child writes a dump by hand only into a folder no one else can write to",
          "[cpu][lesson21]") {
    // /tmp: anyone may write there, so anyone could plant a link under the dump's name.
    RunOptions options;
    options.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();
    options.args = {"-c", "echo /tmp/gpu.core | exec \"$0\" --child 1", lessonBinary(kLesson, "coredump")};
    const RunResult r = run("/bin/sh", options);
    CHECK(r.exitCode == 1);
    CHECK(contains(r.err, "only this user can write to"));
    CHECK_FALSE(contains(r.err, "CUDA_ERROR_STUB_LIBRARY"));
}

TEST_CASE("A child's lines come back in order, and a line sent to it arrives on its stdin", "[cpu][lesson21]") {
    children::Child child;
    std::string ended;
    bool sawFirst = false;
    bool sawMissing = true;
    {
        const QuietStdout quiet;
        child = children::start(
            {"/bin/sh", "-c", "echo 'first: 1'; read line; echo \"got: $line\"; echo 'oops: 2' >&2; exit 3"}, {});
        sawFirst = children::readUntil(child, "first");
        REQUIRE(children::tell(child, "hello"));
        ended = children::finish(child);
        sawMissing = children::readUntil(child, "never printed");
    }
    CHECK(sawFirst);
    CHECK(ended == "exit code 3");
    CHECK(children::valueOf(child, "first") == "1");
    CHECK(children::valueOf(child, "got") == "hello");
    CHECK(children::valueOf(child, "oops") == "2");  // stderr comes back on the same socket
    CHECK_FALSE(sawMissing);
    CHECK(child.output == "first: 1\ngot: hello\noops: 2\n");
}

TEST_CASE("printedBefore finds a text only in a line before the labelled one", "[cpu][lesson21]") {
    children::Child child;
    child.output = "kernel line one\ncall: CUDA_ERROR_ASSERT\nkernel line two\n";
    CHECK(children::printedBefore(child, "line one", "call"));
    CHECK_FALSE(children::printedBefore(child, "line two", "call"));        // after the call's line
    CHECK_FALSE(children::printedBefore(child, "line three", "call"));      // never printed
    CHECK_FALSE(children::printedBefore(child, "line one", "other call"));  // no such label
    // The label counts only at the start of a line.
    child.output = "kernel line one, before call: x\ncall: CUDA_SUCCESS\n";
    CHECK(children::printedBefore(child, "line one", "call"));
    CHECK(children::valueOf(child, "call") == "CUDA_SUCCESS");
}

TEST_CASE("A child gets the parent's environment with the lesson's changes", "[cpu][lesson21]") {
    setenv("LESSON21_DROPPED", "present", 1);
    setenv("LESSON21_REPLACED", "old", 1);
    children::Child child;
    {
        const QuietStdout quiet;
        children::Environment environment;
        environment.unset = {"LESSON21_DROPPED"};
        environment.set = {"LESSON21_REPLACED=new", "LESSON21_ADDED=yes"};
        child = children::start({"/bin/sh", "-c",
                                 "echo \"dropped: ${LESSON21_DROPPED:-none}\"; echo \"replaced: $LESSON21_REPLACED\"; "
                                 "echo \"added: $LESSON21_ADDED\"; echo \"path kept: ${PATH:+yes}\""},
                                environment);
        CHECK(children::finish(child) == "exit code 0");
    }
    unsetenv("LESSON21_DROPPED");
    unsetenv("LESSON21_REPLACED");
    CHECK(children::valueOf(child, "dropped") == "none");
    CHECK(children::valueOf(child, "replaced") == "new");
    CHECK(children::valueOf(child, "added") == "yes");
    CHECK(children::valueOf(child, "path kept") == "yes");
}

// ---------------------------------------------------------------------------
// GPU: the lesson's own checks, read from its output.

TEST_CASE("Lesson 21 sticky_errors: an invalid launch changes nothing, a fault poisons the child's context",
          "[gpu][lesson21]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "sticky_errors");
    requireRan(r);
    requireChecksHeld(r);
    CHECK(r.exitCode == 0);
    static const std::regex refused("cuLaunchKernel with [0-9]+ threads per block: CUDA_ERROR_INVALID_VALUE");
    CHECK(std::regex_search(r.out, refused));
    CHECK(valueOf(r.out, "cuCtxSynchronize after it") == "CUDA_SUCCESS");
    CHECK(allOf(valueOf(r.out, "good launch after it")));
    CHECK(childValue(r.out, "cuLaunchKernel of the out-of-bounds store") == "CUDA_SUCCESS");
    CHECK(childValue(r.out, "first error (cuCtxSynchronize after the store)") == "CUDA_ERROR_ILLEGAL_ADDRESS");
    for (const char* label : {"cuMemAlloc after it", "cuMemcpyHtoD after it",
                              "cuLaunchKernel of a healthy kernel after it", "cuCtxSynchronize again"}) {
        INFO(label);
        CHECK(childValue(r.out, label) == "CUDA_ERROR_ILLEGAL_ADDRESS");
    }
    // Observed on NVIDIA H100 80GB HBM3, not promised by cuda.h ("any further CUDA work will return
    // the same error"): a query of the device, not of the context, still answered.
    CHECK(childValue(r.out, "cuDeviceGetName after it (asks the device, not the context)") == "CUDA_SUCCESS");
    // What a new context in the poisoned process did is an observation of this driver: only that
    // the child tried and said what happened.
    CHECK(childValue(r.out, "cuDevicePrimaryCtxRelease (the last reference: the context is destroyed)"));
    CHECK(childValue(r.out, "cuDevicePrimaryCtxReset"));
    // The parent's summary agrees with the child's lines: "yes" only if a new context ran the kernel.
    const auto ranIn = [&](const char* label) {
        const auto value = childValue(r.out, label);
        return value && value->rfind("ran, ", 0) == 0;
    };
    const bool ran =
        ranIn("a healthy kernel in the new primary context") || ranIn("a healthy kernel in the new ordinary context");
    CHECK(valueOf(r.out, "a new context inside the poisoned process ran a healthy kernel (observed here)") ==
          std::optional<std::string>(ran ? "yes" : "no"));
    CHECK(valueOf(r.out, "child") == "exit code 0");
    CHECK(allOf(valueOf(r.out, "step 2's buffer after a new launch of addOne")));
    for (const char* name :
         {"an invalid launch is refused with CUDA_ERROR_INVALID_VALUE",
          "the context still works after the non-sticky error",
          "the out-of-bounds store gives CUDA_ERROR_ILLEGAL_ADDRESS",
          "every later call in the child's context returns that error", "the child reported every step and exited 0",
          "the parent's context still works after the child's fault"}) {
        INFO(name);
        CHECK(checkOk(r.out, name));
    }
}

TEST_CASE("Lesson 21 late_errors: the error arrives late, on the launch with CUDA_LAUNCH_BLOCKING=1; assert and trap",
          "[gpu][lesson21]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "late_errors");
    requireRan(r);
    requireChecksHeld(r);
    CHECK(r.exitCode == 0);
    // The children in order: late, late with CUDA_LAUNCH_BLOCKING=1, assert, trap.
    CHECK(valuesOf(r.out, "[child] CUDA_LAUNCH_BLOCKING") == std::vector<std::string>{"(not set)", "1"});
    CHECK(valuesOf(r.out, "[child] cuLaunchKernel") ==
          std::vector<std::string>{"CUDA_SUCCESS", "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_SUCCESS", "CUDA_SUCCESS"});
    CHECK(childValue(r.out, "cuStreamQuery right after it (the kernel waits for the flag)") == "CUDA_ERROR_NOT_READY");
    // The late call's buffer is another allocation than the kernel's, in both late children.
    CHECK(valuesOf(r.out, "[child] the copy's buffer is the kernel's allocation (cuMemGetAddressRange)") ==
          std::vector<std::string>{"no", "no"});
    CHECK(valuesOf(r.out, "[child] cuMemcpyDtoH of another buffer, one the kernel never touches") ==
          std::vector<std::string>{"CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_ILLEGAL_ADDRESS"});
    const auto synchronize = valuesOf(r.out, "[child] cuCtxSynchronize (the kernel's printf lines come out first)");
    REQUIRE(synchronize.size() == 2);
    CHECK(synchronize[0] == "CUDA_ERROR_ASSERT");
    CHECK(synchronize[1].rfind("CUDA_ERROR_", 0) == 0);
    CHECK(childValue(r.out, "cuMemAlloc after it") == "CUDA_ERROR_ASSERT");
    for (const char* line : {"[child] device printf: values[0] = 3", "[child] device printf: values[3] = 0",
                             "[child] device printf: calling __trap()"}) {
        INFO(line);
        CHECK(contains(r.out + r.err, line));
    }
    CHECK(valuesOf(r.out, "child") == std::vector<std::string>(4, "exit code 0"));
    for (const char* name :
         {"the launch returns CUDA_SUCCESS before the kernel has completed",
          "cuStreamQuery after the launch: CUDA_ERROR_NOT_READY (not completed)",
          "the late call copies another allocation than the kernel's",
          "the kernel's printf lines and the assert's message come out before cuCtxSynchronize returns",
          "the line printed before __trap() comes out before cuCtxSynchronize returns"}) {
        INFO(name);
        CHECK(checkOk(r.out, name));
    }
}

TEST_CASE("Lesson 21 late_errors sets CUDA_LAUNCH_BLOCKING for each child, whatever its own environment holds",
          "[gpu][lesson21]") {
    requireGpu();
    RunOptions options;
    options.setEnv["CUDA_LAUNCH_BLOCKING"] = "1";
    const RunResult r = runLesson(kLesson, options, "late_errors");
    requireRan(r);
    requireChecksHeld(r);
    CHECK(valuesOf(r.out, "[child] CUDA_LAUNCH_BLOCKING") == std::vector<std::string>{"(not set)", "1"});
    CHECK(valuesOf(r.out, "[child] cuLaunchKernel").front() == "CUDA_SUCCESS");
}

TEST_CASE("Lesson 21 driver_logs prints the driver's line beside the bare CUresult", "[gpu][lesson21]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "driver_logs");
    requireRan(r);  // a driver or headers older than 12.9: the program says so and exits 77
    requireChecksHeld(r);
    const auto bare = valueOf(r.out, "cuLaunchKernel with 2048 threads per block, bare CUresult");
    REQUIRE(bare);
    CHECK(bare->rfind("CUDA_ERROR_INVALID_VALUE", 0) == 0);
    const auto logged = valuesOf(r.out, "driver log (callback)");
    REQUIRE_FALSE(logged.empty());
    CHECK(logged.front() != "(no line)");
    CHECK_FALSE(valuesOf(r.out, "driver log (dump)").empty());
    CHECK(valueOf(r.out, "second dump from the advanced iterator") == "0 bytes");
    CHECK(valueOf(r.out, "callback lines after a healthy launch") == "0");
    CHECK(valueOf(r.out, "its lines in the callback") == "0; in a dump: yes");
    CHECK(valueOf(r.out, "the file cuLogsDumpToFile wrote from the second iterator holds that line") == "yes");
    for (const char* name : {"the callback received a line about the invalid launch",
                             "the dump since the iterator holds the callback's line",
                             "the dump leaves out the line logged before cuLogsCurrent",
                             "a second dump from the advanced iterator is empty",
                             "after cuLogsUnregisterCallback a failed call is logged but reaches no callback",
                             "cuLogsDumpToFile writes the line cuLogsDumpToMemory returned"}) {
        INFO(name);
        CHECK(checkOk(r.out, name));
    }
}

TEST_CASE("Lesson 21 coredump: the child's dump is written, then the driver aborts the child; the folder is removed",
          "[gpu][lesson21]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "coredump");
    // Only where the driver refuses the settings with CUDA_ERROR_NOT_PERMITTED does the program say
    // why and exit 77; any other refusal, or no dump and no abort once they were accepted, fails.
    requireRan(r);
    requireChecksHeld(r);
    CHECK(childValue(r.out, "coredump settings (cuCoredumpSetAttributeGlobal)") == "CUDA_SUCCESS");
    CHECK(childValue(r.out, "the context's CU_COREDUMP_ENABLE_ON_EXCEPTION") == "true");
    CHECK(childValue(r.out, "the context's CU_COREDUMP_FILE") == "the path the parent sent");
    // Whether the global settings show as the context flag is the driver's business: only that it was read.
    CHECK(childValue(r.out, "the context's flags (cuCtxGetFlags) include CU_CTX_COREDUMP_ENABLE"));
    CHECK(childValue(r.out, "cuLaunchKernel of the out-of-bounds store") == "CUDA_SUCCESS");
    // The driver ends the child while it waits after cuCtxSynchronize: it never ends by itself.
    CHECK_FALSE(contains(r.out, "no dump and no abort came"));
    const auto file = valueOf(r.out, "gpu.core");
    REQUIRE(file);
    CHECK(file->rfind("written, ", 0) == 0);
    CHECK(file != std::optional<std::string>("written, 0 bytes"));
    CHECK(valueOf(r.out, "child") == "killed by signal 6");
    CHECK(valueOf(r.out, "starts with the ELF magic (0x7f 'E' 'L' 'F')") == "yes");
    CHECK(valueOf(r.out, "temporary folder at the end") == "removed");
    CHECK(childValue(r.out, "the context's generation flags include every lightweight flag") == "yes");
    CHECK(valueOf(r.out, "the process's file (cuCoredumpGetAttributeGlobal)") == "process.core, as set");
    CHECK(valueOf(r.out, "the context's file (cuCoredumpGetAttribute)") == "context.core, as set");
    for (const char* name :
         {"the process-wide file reads back as set for the process",
          "the context's file reads back as set for the context", "the driver accepts the coredump settings",
          "the child's context took the process's settings: dumps on, the parent's file",
          "the child's context took the lightweight flags"}) {
        INFO(name);
        CHECK(checkOk(r.out, name));
    }
}

// The parent removes the coredump variables from its child's environment: set in the parent's,
// they must change nothing (cuda.h: values set before CUDA initialises "take permanent precedence").
TEST_CASE("Lesson 21 coredump tells the same story with coredump variables in its own environment", "[gpu][lesson21]") {
    requireGpu();
    const std::string elsewhere = scratchDir() + "/lesson21-env-core";
    RunOptions options;
    options.setEnv["CUDA_ENABLE_COREDUMP_ON_EXCEPTION"] = "1";
    options.setEnv["CUDA_COREDUMP_FILE"] = elsewhere;
    const RunResult r = runLesson(kLesson, options, "coredump");
    requireRan(r);
    requireChecksHeld(r);
    CHECK(childValue(r.out, "coredump settings (cuCoredumpSetAttributeGlobal)") == "CUDA_SUCCESS");
    CHECK(childValue(r.out, "the context's CU_COREDUMP_FILE") == "the path the parent sent");
    CHECK(valueOf(r.out, "child") == "killed by signal 6");
    CHECK(valueOf(r.out, "gpu.core").value_or("").rfind("written, ", 0) == 0);
    CHECK_FALSE(std::filesystem::exists(elsewhere));
}

TEST_CASE("Lesson 21 coredump leaves no folder and no file behind, whether or not its section ran", "[gpu][lesson21]") {
    requireGpu();
    // Folders from before (an interrupted run, say) are not this run's: only new ones count.
    const std::vector<std::string> before = coredumpFolders();
    const RunResult r = runLesson(kLesson, {}, "coredump");
    CHECK((r.exitCode == 0 || r.exitCode == course::kExitNotApplicable));
    CHECK(valueOf(r.out, "temporary folder at the end") == "removed");
    CHECK(checkOk(r.out, "the temporary folder is gone"));
    CHECK(coredumpFolders() == before);
}

TEST_CASE("Lesson 21 checkpoint: the states in order, the memory freed and back, the child's buffer intact",
          "[gpu][lesson21]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "checkpoint");
    requireRan(r);
    requireChecksHeld(r);
    CHECK(checkOk(r.out, "the child fills its buffer and says it is ready"));
    CHECK(valueOf(r.out, "cuCheckpointProcessGetState") == "CU_PROCESS_STATE_RUNNING");
    CHECK(valueOf(r.out, "cuCheckpointProcessLock") == "CUDA_SUCCESS, then the child is CU_PROCESS_STATE_LOCKED");
    CHECK(valueOf(r.out, "cuCheckpointProcessCheckpoint") ==
          "CUDA_SUCCESS, then the child is CU_PROCESS_STATE_CHECKPOINTED");
    CHECK(valueOf(r.out, "cuCheckpointProcessRestore") == "CUDA_SUCCESS, then the child is CU_PROCESS_STATE_LOCKED");
    CHECK(valueOf(r.out, "cuCheckpointProcessUnlock") == "CUDA_SUCCESS, then the child is CU_PROCESS_STATE_RUNNING");
    CHECK(allOf(childValue(r.out, "words holding the pattern after the restore")));
    CHECK(allOf(childValue(r.out, "words holding the pattern + 1 after a kernel")));
    CHECK(valueOf(r.out, "child") == "exit code 0");
    CHECK(checkOk(r.out, "the child is CU_PROCESS_STATE_RUNNING before the lock"));
    CHECK(valueOf(r.out, "cuCheckpointProcessGetRestoreThreadId") == "CUDA_SUCCESS, a thread of the child: yes");
    CHECK(checkOk(r.out, "cuCheckpointProcessGetRestoreThreadId names one of the child's threads"));
    // Step 6's figures are numbers above zero, not only lines.
    for (const char* label : {"checkpoint, 256 MiB buffer", "restore, 256 MiB buffer",
                              "pinned copy of 256 MiB, host to device", "pinned copy of 256 MiB, device to host"}) {
        INFO(label);
        CHECK(gigabytesPerSecondIn(valueOf(r.out, label)) > 0.0);
    }
}

// Only the smallest size (--bench-max-mib 256): the sweep's code is the same for every size, and
// the larger ones (make bench) take most of its time.
TEST_CASE("Lesson 21 checkpoint --bench: GB/s for each size that fits, beside pinned copies", "[gpu][lesson21]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench", "--bench-max-mib", "256"};
    options.timeoutSeconds = 300;
    const RunResult r = runLesson(kLesson, options, "checkpoint");
    attachToReport(r);
    requireRan(r);
    requireChecksHeld(r);
    CHECK(benchValue(r.out, "pinned copy host to device 256 MiB") > 0.0);
    CHECK(benchValue(r.out, "pinned copy device to host 256 MiB") > 0.0);
    // The smallest size must run: a sweep whose sizes all SKIP would check nothing.
    CHECK_FALSE(contains(r.out, "section bench 256 MiB: SKIP ("));
    CHECK(checkOk(r.out, "every --bench child kept its buffer through its checkpoints, the 256 MiB one at least"));
    for (const char* size : {"256 MiB", "1 GiB", "4 GiB"}) {
        INFO(size);
        if (std::string(size) != "256 MiB" && contains(r.out, std::string("section bench ") + size + ": SKIP ("))
            continue;
        CHECK(benchValue(r.out, std::string("checkpoint ") + size) > 0.0);
        CHECK(benchValue(r.out, std::string("restore ") + size) > 0.0);
    }
    // The sizes above the limit are named and left out, not taken anyway.
    CHECK(contains(r.out, "section bench 1 GiB: SKIP (above --bench-max-mib 256)"));
    CHECK(contains(r.out, "section bench 4 GiB: SKIP (above --bench-max-mib 256)"));
}

// ---------------------------------------------------------------------------
// GPU: the driver's behaviour, checked directly.

#if CUDA_VERSION >= 12080
TEST_CASE("cuCheckpointProcessGetState: this process, which holds a context, is RUNNING; one without CUDA has no state",
          "[gpu][lesson21]") {
    requireGpu();
    requireCuda(12080, "cuCheckpointProcessGetState");
    CurrentPrimaryContext primary;
    auto getState = DRIVER_FUNCTION(driver(), cuCheckpointProcessGetState);
    REQUIRE(getState);
    CUprocessState state = CU_PROCESS_STATE_FAILED;
    CHECK(getState(static_cast<int>(getpid()), &state) == CUDA_SUCCESS);
    CHECK(state == CU_PROCESS_STATE_RUNNING);
    // A process that never called cuInit: /bin/sleep, started and killed here.
    pid_t sleeper = -1;
    char* argv[] = {const_cast<char*>("sleep"), const_cast<char*>("30"), nullptr};
    REQUIRE(posix_spawn(&sleeper, "/bin/sleep", nullptr, nullptr, argv, environ) == 0);
    const Cleanup reap([sleeper] {
        kill(sleeper, SIGKILL);
        waitpid(sleeper, nullptr, 0);
    });
    const CUresult result = getState(static_cast<int>(sleeper), &state);
    INFO(driver().nameOf(result));
    CHECK(result != CUDA_SUCCESS);
}
#endif

#if CUDA_VERSION >= 12090
TEST_CASE("A cuLogs callback receives the line the driver writes for a failed call", "[gpu][lesson21]") {
    requireGpu();
    requireCuda(12090, "cuLogsRegisterCallback");
    auto registerCallback = DRIVER_FUNCTION(driver(), cuLogsRegisterCallback);
    auto unregisterCallback = DRIVER_FUNCTION(driver(), cuLogsUnregisterCallback);
    auto dumpToMemory = DRIVER_FUNCTION(driver(), cuLogsDumpToMemory);
    REQUIRE((registerCallback && unregisterCallback && dumpToMemory));
    struct Lines {
        std::mutex lock;
        std::vector<std::string> text;
    } lines;
    CUlogsCallbackHandle handle = nullptr;
    REQUIRE(registerCallback(
                [](void* data, CUlogLevel, char* message, size_t length) {
                    auto* collected = static_cast<Lines*>(data);
                    const std::lock_guard<std::mutex> hold(collected->lock);
                    collected->text.emplace_back(message, strnlen(message, length));
                },
                &lines, &handle) == CUDA_SUCCESS);
    const Cleanup unregister([&] { return unregisterCallback(handle); });
    // The Programming Guide's own example: a dump into no buffer.
    size_t size = 64;
    CHECK(dumpToMemory(nullptr, nullptr, &size, 0) == CUDA_ERROR_INVALID_VALUE);
    const std::lock_guard<std::mutex> hold(lines.lock);
    REQUIRE_FALSE(lines.text.empty());
    bool named = false;
    for (const auto& line : lines.text) named = named || contains(line, "buffer cannot be NULL");
    INFO(lines.text.front());
    CHECK(named);
}
#endif
