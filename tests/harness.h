// harness.h — what every test file uses: where the build is, running a lesson,
// reading its labelled output, and gating GPU tests.
//
// GPU tests call requireGpu() first: without a usable driver and device it ends
// the test with Catch2's SKIP and the reason (never a silent pass). A lesson that
// exits 77 ("not applicable here") is turned into a SKIP by requireRan().
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "common/tools/dynamic_driver.h"

namespace harness {

// build/ (the folder above this test binary's build/tests/), and the repository root above it.
std::string buildDir();
std::string repoRoot();
// The lesson folders (NN-topic) in the repository, in order.
std::vector<std::string> lessonFolders();
// build/NN-topic/NN-topic, or build/NN-topic/NAME for one of a lesson's programs
// (lesson.mk's _PROGRAMS) or its standalone programs.
std::string lessonBinary(const std::string& lesson, const std::string& program = "");
// The lesson's programs in the order make run-NN runs them (build/NN-topic/programs.txt,
// written by the Makefile): the lesson's own name when it has one program.
std::vector<std::string> lessonPrograms(const std::string& lesson);
// A folder with NVIDIA's stub libcuda.so as libcuda.so.1 (made by the Makefile):
// put it on LD_LIBRARY_PATH to run a program against the stub.
std::string stubDriverDir();

struct RunResult {
    int exitCode = -1;  // the program's exit code; 128 + signal if it was killed
    std::string out;    // stdout
    std::string err;    // stderr
    bool timedOut = false;
    std::string program;     // what ran
    std::string workingDir;  // where it ran (empty: the test's own working directory)
    double seconds = 0;      // how long it ran, wall clock
};

struct RunOptions {
    std::vector<std::string> args;
    std::map<std::string, std::string> setEnv;  // variables to set (an empty value is kept empty)
    std::vector<std::string> unsetEnv;          // variables to remove
    std::string workingDir;                     // empty: the test's own
    int timeoutSeconds = 120;
};

RunResult run(const std::string& program, const RunOptions& options = {});
// The same without a word to Catch2 (no assertion, nothing attached to the report), so that
// it may be called from any thread.
RunResult runQuietly(const std::string& program, const RunOptions& options = {});
// Runs build/NN-topic/NN-topic (or the named program of the lesson) with the options.
RunResult runLesson(const std::string& lesson, const RunOptions& options = {}, const std::string& program = "");

// Many runs at once, at most `parallel` at a time (0: one per core), results in the jobs' order.
struct Job {
    std::string program;
    RunOptions options;
};
std::vector<RunResult> runAll(const std::vector<Job>& jobs, unsigned parallel = 0);
// Whether a lesson program must run with nothing else on the GPU or the CPU, because it times
// something or compares free device memory: lesson.mk's NN-topic_RUN_ALONE, which the Makefile
// writes to build/NN-topic/run-alone.txt.
bool runsAlone(const std::string& programPath);
// `make test` runs the suite as several processes at once (common/tools/run-tests.sh); every
// program run of every process takes a lock on the machine first: shared for runs that may go side
// by side, exclusive for the programs that must run alone (runsAlone), so that nothing of any
// process runs beside those. A test that measures the machine itself in-process (free device memory,
// say) holds the exclusive lock for its whole body with one of these. Its constructor first makes
// the shared plain runs (defaultRun), which need the machine too. Don't wait for the outside builds
// while holding one.
class MachineToMyself {
public:
    MachineToMyself();
    ~MachineToMyself();
    MachineToMyself(const MachineToMyself&) = delete;
    MachineToMyself& operator=(const MachineToMyself&) = delete;

private:
    int lock_ = -1;
};
// A folder of this test process's own under build/tests (made if missing), for files a test
// writes: two processes of one `make test` never share it.
std::string scratchDir();

// Runs lesson programs: those that may run beside others in parallel, then the ones that must
// run alone, one at a time. Results in the jobs' order. (A job may also be /bin/sh whose last
// argument is the program.)
std::vector<RunResult> runPrograms(const std::vector<Job>& jobs);

// The lesson's plain run (no arguments, no environment changes, started from / so that it also
// shows the program does not depend on the working directory), made once per test process and
// shared by every test that only reads its output: a lesson is a deterministic program, and
// some take seconds. On a machine with a usable GPU the first call runs every program of every
// lesson this way (runPrograms: in parallel where allowed). When the suite runs as several
// processes (COURSE_TEST_SHARED_RUNS names a folder), whichever needs them first makes these
// runs and leaves them in that folder for the others. Returned by value.
RunResult defaultRun(const std::string& lesson, const std::string& program = "");
// A whole file as text (empty when it cannot be read).
std::string readText(const std::string& path);
// Writes a whole file (created or truncated) with the given mode, through a descriptor no child
// process inherits (O_CLOEXEC). The suite forks and execs from several threads at once: a child
// forked while a file is open for writing would otherwise keep it open, and exec of that file
// (a copied program, a stand-in script) would then fail with ETXTBSY. Every file a test writes
// goes through here. False when the file cannot be written.
bool writeFile(const std::string& path, const std::string& text, unsigned mode = 0644);
// Copies a file the same way (a program copied to run elsewhere: mode 0755).
bool copyFile(const std::string& from, const std::string& to, unsigned mode = 0644);
// The text of a README block between "<!-- MARKER:begin -->" and "<!-- MARKER:end -->", without its
// ```FENCE fence; empty when the README has no such block.
std::string markedBlock(const std::string& readme, const std::string& marker, const std::string& fence);
// The commands of a README's "Build it outside the course" block, without the ```sh fence.
std::string buildOutsideBlock(const std::string& readme);
// Building every lesson outside the course: each lesson folder and common/ copied into an empty
// folder, build/tests/outside/NN-topic, and exactly its README's commands run there, every lesson
// at once. A lesson whose sources, commands and compilers are those of its last outside build is
// not built again. Started as the run begins when the whole suite runs (in the background, while
// the first programs run), or by the first test that needs the results; the programs that must
// run alone wait for it to end. Results in lessonFolders() order.
void startOutsideBuilds();
const std::vector<RunResult>& outsideBuildResults();
// Where a lesson's programs come out of its outside build.
std::string outsideDir(const std::string& lesson);

// What the program's plain run prints with stdout and stderr through one pipe, as a terminal
// shows them (the README's "Expected output"), shared the same way. Any program path.
std::string terminalOutput(const std::string& programPath);
// Attaches a run's exit code and output to the running test's report, shown if it fails.
void attachToReport(const RunResult& result);
// Runs a lesson against NVIDIA's stub libcuda.so: the program loads on any machine and
// every driver call fails with CUDA_ERROR_STUB_LIBRARY. Also how CPU tests reach the
// argument parsing, which comes before cuInit.
RunResult runAgainstStub(const std::string& lesson, const std::vector<std::string>& args = {},
                         const std::string& program = "");

// Runs one of a lesson's programs against the stub with a command line it must refuse, and
// checks it refused it the way every lesson does: exit 2 and the usage line, before any driver
// call (so the stub's error never shows). Returns the run for the caller's own checks.
RunResult checkRefusesArguments(const std::string& lesson, const std::vector<std::string>& args,
                                const std::string& program = "");

// The driver, opened once per test process with dlopen (so the suite starts without one). A test
// that asks for it holds the machine shared from then to its end (see MachineToMyself): what it
// then does in-process on the GPU never runs beside a program that must run alone.
const course::DynamicDriver& driver();
// SKIPs the running test, with the reason, when there is no usable driver and GPU.
void requireGpu();
// SKIPs when a lesson exited 77 (its "Result = SKIP (...)" line gives the reason).
void requireRan(const RunResult& result);

// The primary context of device 0, retained and current on this thread for one test;
// made not current and released when the test ends.
class CurrentPrimaryContext {
public:
    CurrentPrimaryContext();
    ~CurrentPrimaryContext();
    CurrentPrimaryContext(const CurrentPrimaryContext&) = delete;
    CurrentPrimaryContext& operator=(const CurrentPrimaryContext&) = delete;
    CUdevice device() const { return device_; }
    CUcontext context() const { return context_; }

private:
    CUdevice device_ = 0;
    CUcontext context_ = nullptr;
};

// Gives something back when the test leaves the scope, also when a failed REQUIRE ends the test
// early (Catch2 throws): every test shares this process and its device memory. The action may
// return a CUresult; now() runs it at once (and not again) and returns that answer.
class Cleanup {
public:
    template <typename Action>
    explicit Cleanup(Action action) {
        if constexpr (std::is_void_v<std::invoke_result_t<Action>>)
            release_ = [action] {
                action();
                return CUDA_SUCCESS;
            };
        else
            release_ = [action] { return static_cast<CUresult>(action()); };
    }
    ~Cleanup() {
        if (release_) release_();
    }
    Cleanup(const Cleanup&) = delete;
    Cleanup& operator=(const Cleanup&) = delete;
    CUresult now() {
        const CUresult result = release_();
        release_ = nullptr;
        return result;
    }

private:
    std::function<CUresult()> release_;
};

// Output helpers. Labelled lines look like "label: value".
std::vector<std::string> lines(const std::string& text);
// The value of the first line "label: value", if any.
std::optional<std::string> valueOf(const std::string& text, const std::string& label);
// Every value of lines "label: value", in order.
std::vector<std::string> valuesOf(const std::string& text, const std::string& label);
bool contains(const std::string& text, const std::string& part);
// The text without the white space (spaces, tabs, line ends) around it.
std::string trim(const std::string& text);
// The program's "check NAME: ok|FAIL" lines (course::Verdict), in order.
std::vector<std::string> checkLines(const std::string& out);
// Whether the program printed "check NAME: ok" (its own verdict on NAME).
bool checkOk(const std::string& out, const std::string& name);
// Every check a run printed held ("ok"), and, when `needsOne`, there was at least one.
void requireChecksHeld(const RunResult& r, bool needsOne = true);
// The same, except that a check named in `mayBeSkipped` may instead print "SKIP (reason)" (a check
// whose precondition the machine did not give, such as an order that could not be shown); there
// must be at least one check.
void requireChecksHeldOrSkipped(const RunResult& r, const std::vector<std::string>& mayBeSkipped);
// The number of a "bench: <metric> = <number> <unit>" line, or -1 when there is no such line.
double benchValue(const std::string& out, const std::string& metric);

}  // namespace harness
