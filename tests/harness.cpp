#include "tests/harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch_test_macros.hpp>
#include <catch2/interfaces/catch_interfaces_config.hpp>
#include <catch2/catch_test_spec.hpp>
#include <catch2/reporters/catch_reporter_event_listener.hpp>
#include <catch2/reporters/catch_reporter_registrars.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include "common/course_util.h"

namespace harness {

std::string buildDir() {
    const std::string testsDir = course::executableDir();  // .../build/tests
    return testsDir.substr(0, testsDir.rfind('/'));
}

std::string repoRoot() {
    const std::string build = buildDir();
    return build.substr(0, build.rfind('/'));
}

std::vector<std::string> lessonFolders() {
    std::vector<std::string> folders;
    if (DIR* dir = opendir(repoRoot().c_str())) {
        const std::regex lessonName("[0-9][0-9]-[a-z0-9-]+");
        while (const dirent* entry = readdir(dir))
            if (std::regex_match(entry->d_name, lessonName)) folders.push_back(entry->d_name);
        closedir(dir);
    }
    std::sort(folders.begin(), folders.end());
    return folders;
}

std::string lessonBinary(const std::string& lesson, const std::string& program) {
    return buildDir() + "/" + lesson + "/" + (program.empty() ? lesson : program);
}

std::vector<std::string> lessonPrograms(const std::string& lesson) {
    std::vector<std::string> programs;
    std::ifstream list(buildDir() + "/" + lesson + "/programs.txt");
    for (std::string name; std::getline(list, name);)
        if (!name.empty()) programs.push_back(name);
    if (programs.empty()) programs.push_back(lesson);
    return programs;
}

std::string stubDriverDir() {
    return buildDir() + "/stub-driver";
}

namespace {

// The machine lock (see MachineToMyself in harness.h): two flock(2) files under build/tests/locks.
// Every run holds "machine" shared, or exclusive for a program that must run alone. To take it, a
// run first passes through "turnstile": one waiting for the exclusive lock waits there holding the
// turnstile, so a stream of shared runs cannot keep it out for ever. flock locks belong to an open
// file, so threads of one process exclude each other exactly as processes do.
int openLockFile(const char* name) {
    const std::string folder = buildDir() + "/tests/locks";
    mkdir(folder.c_str(), 0755);  // EEXIST is fine; a failure shows as the open's failure
    const std::string path = folder + "/" + name;
    return open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
}

// Waits for the lock, at most 10 minutes: past that a circle of waits is more likely than a run
// that long, and the suite says so and goes on without the lock rather than hang.
bool lockFile(int fd, int operation) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
    while (flock(fd, operation | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) return false;
        if (std::chrono::steady_clock::now() > deadline) {
            const char warning[] = "harness: no lock on the machine after 10 minutes; going on without it\n";
            const ssize_t ignored = write(STDERR_FILENO, warning, sizeof(warning) - 1);
            (void)ignored;
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

// Whether this thread's runs are under a MachineToMyself already (set for the threads runAll
// starts on its behalf): they take no lock, which would wait for the holder, their own test.
thread_local bool machineIsMine = false;

int takeMachine(bool exclusive) {
    const int turnstile = openLockFile("turnstile");
    const int machine = openLockFile("machine");
    if (turnstile < 0 || machine < 0) {
        if (turnstile >= 0) close(turnstile);
        if (machine >= 0) close(machine);
        return -1;  // without the lock files the runs still run, only not kept apart
    }
    const bool held = lockFile(turnstile, LOCK_EX) && lockFile(machine, exclusive ? LOCK_EX : LOCK_SH);
    close(turnstile);
    if (held) return machine;
    close(machine);
    return -1;
}

// The driver, opened once per test process with dlopen (so the suite starts without one).
const course::DynamicDriver& loadedDriver() {
    static const course::DynamicDriver instance;
    return instance;
}

// A test that uses the driver in-process (harness::driver()) holds the machine shared from its
// first use to the end of the test case, so that what it does on the GPU never runs beside a
// program that must run alone; a test that only runs programs holds nothing of its own.
// While a test holds it, the shared runs it starts (itself or through runAll's threads) take no
// lock of their own: they count as held by the test. A holder must never wait for the turnstile,
// which an exclusive waiter of another process may hold while it waits for that very holder.
// So the hold is let go (once its runs have ended) before this process waits for an exclusive
// lock, and while it waits for another process (the shared runs, the outside builds).
std::mutex testHoldMutex;
std::condition_variable testHoldIdle;
int testHold = -1;             // the shared hold's descriptor, or -1
bool testHoldWanted = false;   // a test that asked for the driver is running
int testHoldPaused = 0;        // how many waits have let go of it
int runsUnderTestHold = 0;     // shared runs in flight that count as held by the test
thread_local bool partOfTest = false;  // the test's thread, or a runAll thread working for it
constexpr int kUnderTestHold = -2;

void pauseTestHold() {
    std::unique_lock<std::mutex> lock(testHoldMutex);
    ++testHoldPaused;  // from here on, shared runs take locks of their own
    testHoldIdle.wait(lock, [] { return runsUnderTestHold == 0; });
    if (testHold >= 0) {
        close(testHold);
        testHold = -1;
    }
}

// Takes the test's hold again if it is wanted and nothing holds it paused. The wait for the lock
// happens outside the mutex, holding nothing.
void retakeTestHold() {
    {
        const std::lock_guard<std::mutex> lock(testHoldMutex);
        if (testHoldPaused != 0 || !testHoldWanted || testHold >= 0) return;
    }
    const int taken = takeMachine(false);
    const std::lock_guard<std::mutex> lock(testHoldMutex);
    if (testHoldPaused == 0 && testHoldWanted && testHold < 0)
        testHold = taken;
    else if (taken >= 0)
        close(taken);
}

void resumeTestHold() {
    {
        const std::lock_guard<std::mutex> lock(testHoldMutex);
        --testHoldPaused;
    }
    retakeTestHold();
}

struct TestHoldPaused {
    TestHoldPaused() { pauseTestHold(); }
    ~TestHoldPaused() { resumeTestHold(); }
    TestHoldPaused(const TestHoldPaused&) = delete;
    TestHoldPaused& operator=(const TestHoldPaused&) = delete;
};

int lockMachine(bool exclusive) {
    if (machineIsMine) return -1;
    if (!exclusive) {
        if (partOfTest) {
            const std::lock_guard<std::mutex> lock(testHoldMutex);
            if (testHold >= 0 && testHoldPaused == 0) {
                ++runsUnderTestHold;
                return kUnderTestHold;
            }
        }
        return takeMachine(false);
    }
    pauseTestHold();
    return takeMachine(true);
}

void unlockMachine(int machine, bool exclusive) {
    if (machineIsMine) return;
    if (machine == kUnderTestHold) {
        const std::lock_guard<std::mutex> lock(testHoldMutex);
        if (--runsUnderTestHold == 0) testHoldIdle.notify_all();
        return;
    }
    if (machine >= 0) close(machine);  // closing the only descriptor of the open file drops its lock
    if (exclusive) resumeTestHold();
}

void holdMachineForTest() {
    partOfTest = true;
    {
        const std::lock_guard<std::mutex> lock(testHoldMutex);
        testHoldWanted = true;
    }
    retakeTestHold();
}

void releaseTestHold() {
    std::unique_lock<std::mutex> lock(testHoldMutex);
    testHoldWanted = false;
    testHoldIdle.wait(lock, [] { return runsUnderTestHold == 0; });
    if (testHold >= 0) close(testHold);
    testHold = -1;
}

// Whether a run can reach a GPU: not against the stub driver, not with every device hidden.
// Those that cannot take no lock: they neither time anything nor disturb what others time.
bool reachesGpu(const RunOptions& options) {
    const auto library = options.setEnv.find("LD_LIBRARY_PATH");
    const auto visible = options.setEnv.find("CUDA_VISIBLE_DEVICES");
    return !(library != options.setEnv.end() && library->second == stubDriverDir()) &&
           !(visible != options.setEnv.end() && visible->second.empty());
}

const std::string& programOfJob(const std::string& program, const RunOptions& options) {
    return program == "/bin/sh" && !options.args.empty() ? options.args.back() : program;
}

// COURSE_TEST_RUN_LOG=FILE: one line per program the suite ran (seconds, exit code, command
// line), to see where the suite's time goes.
void logRun(const RunResult& result, const RunOptions& options) {
    static const char* path = std::getenv("COURSE_TEST_RUN_LOG");
    if (path == nullptr || *path == '\0') return;
    std::ostringstream line;
    line << std::fixed;
    line.precision(2);
    line << std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
                result.seconds
         << "\t" << getpid() << "\t" << result.seconds << "\t" << result.exitCode << "\t" << result.program;
    for (const auto& arg : options.args) line << " " << arg;
    line << "\n";
    static std::mutex logMutex;
    const std::lock_guard<std::mutex> lock(logMutex);
    const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    const std::string text = line.str();
    const ssize_t ignored = write(fd, text.data(), text.size());
    (void)ignored;
    close(fd);
}

}  // namespace

RunResult runQuietly(const std::string& program, const RunOptions& options) {
    RunResult result;
    result.program = program;
    result.workingDir = options.workingDir;
    // Everything the child needs is built here, before fork: between fork and exec a child of a
    // multi-threaded process (runAll) may only make async-signal-safe calls, and malloc is not one.
    std::vector<std::string> arguments{program};
    arguments.insert(arguments.end(), options.args.begin(), options.args.end());
    std::vector<char*> argv;
    for (auto& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    std::vector<std::string> environment;
    for (char** variable = environ; *variable != nullptr; ++variable) {
        const std::string entry = *variable;
        const std::string name = entry.substr(0, entry.find('='));
        if (options.setEnv.count(name) != 0) continue;
        if (std::find(options.unsetEnv.begin(), options.unsetEnv.end(), name) != options.unsetEnv.end()) continue;
        environment.push_back(entry);
    }
    for (const auto& [name, value] : options.setEnv) environment.push_back(name + "=" + value);
    std::vector<char*> envp;
    for (auto& entry : environment) envp.push_back(entry.data());
    envp.push_back(nullptr);
    // The child reports why exec failed; strerror is not async-signal-safe, so the reason comes
    // from a table made here, indexed by errno there.
    const std::string cannotExecute = "harness: cannot execute " + program + ": ";
    const std::map<int, std::string> errnoNames = {{ENOENT, "ENOENT (no such file)"},
                                                   {EACCES, "EACCES (permission denied)"},
                                                   {ETXTBSY, "ETXTBSY (text file busy: open for writing)"},
                                                   {ENOEXEC, "ENOEXEC (not an executable format)"},
                                                   {ENOMEM, "ENOMEM (out of memory)"},
                                                   {E2BIG, "E2BIG (argument list too long)"}};
    std::vector<std::string> reasons(256);
    for (int e = 0; e < 256; ++e) reasons[e] = "errno " + std::to_string(e);
    for (const auto& [e, name] : errnoNames) reasons[e] = name;
    for (auto& reason : reasons) reason += "\n";

    const bool takesMachine = reachesGpu(options);
    const bool alone = takesMachine && runsAlone(programOfJob(program, options));
    const int machineLock = takesMachine ? lockMachine(alone) : -1;
    struct Unlock {
        int fd;
        bool exclusive;
        bool taken;
        ~Unlock() {
            if (taken) unlockMachine(fd, exclusive);
        }
    } unlock{machineLock, alone, takesMachine};

    int outPipe[2];
    int errPipe[2];
    if (pipe2(outPipe, O_CLOEXEC) != 0) {
        result.err = std::string("harness: pipe: ") + std::strerror(errno);
        return result;
    }
    if (pipe2(errPipe, O_CLOEXEC) != 0) {
        result.err = std::string("harness: pipe: ") + std::strerror(errno);
        close(outPipe[0]);
        close(outPipe[1]);
        return result;
    }
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(outPipe[1], STDOUT_FILENO);
        dup2(errPipe[1], STDERR_FILENO);
        if (!options.workingDir.empty() && chdir(options.workingDir.c_str()) != 0) _exit(126);
        execvpe(program.c_str(), argv.data(), envp.data());  // a bare name ("make") is looked up on PATH
        const std::string& reason = reasons[errno >= 0 && errno < 256 ? errno : 0];
        ssize_t ignored = write(STDERR_FILENO, cannotExecute.data(), cannotExecute.size());
        ignored = write(STDERR_FILENO, reason.data(), reason.size());
        (void)ignored;
        _exit(127);
    }
    close(outPipe[1]);
    close(errPipe[1]);
    if (pid < 0) {
        close(outPipe[0]);
        close(errPipe[0]);
        result.err = std::string("harness: fork: ") + std::strerror(errno);
        return result;
    }

    const auto started = std::chrono::steady_clock::now();
    const auto deadline = started + std::chrono::seconds(options.timeoutSeconds);
    pollfd fds[2] = {{outPipe[0], POLLIN, 0}, {errPipe[0], POLLIN, 0}};
    std::string* sinks[2] = {&result.out, &result.err};
    int open = 2;
    while (open > 0) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            result.timedOut = true;
            kill(pid, SIGKILL);
            break;
        }
        if (poll(fds, 2, static_cast<int>(left.count())) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP)) == 0) continue;
            char buffer[4096];
            const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
            if (n > 0) {
                sinks[i]->append(buffer, static_cast<size_t>(n));
            } else {
                close(fds[i].fd);
                fds[i].fd = -1;
                --open;
            }
        }
    }
    for (auto& fd : fds)
        if (fd.fd >= 0) close(fd.fd);
    int status = 0;
    waitpid(pid, &status, 0);
    result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    logRun(result, options);
    return result;
}

RunResult run(const std::string& program, const RunOptions& options) {
    RunResult result = runQuietly(program, options);
    attachToReport(result);
    return result;
}

std::vector<RunResult> runAll(const std::vector<Job>& jobs, unsigned parallel) {
    if (parallel == 0) parallel = std::max(1u, std::thread::hardware_concurrency());
    std::vector<RunResult> results(jobs.size());
    std::atomic<size_t> next{0};
    const bool mine = machineIsMine;  // the workers run on behalf of this thread
    const bool forTest = partOfTest;
    auto worker = [&] {
        machineIsMine = mine;
        partOfTest = forTest;
        for (size_t i = next++; i < jobs.size(); i = next++) results[i] = runQuietly(jobs[i].program, jobs[i].options);
    };
    std::vector<std::thread> threads;
    for (size_t t = 0; t < std::min<size_t>(parallel, jobs.size()); ++t) threads.emplace_back(worker);
    for (auto& thread : threads) thread.join();
    return results;
}

void attachToReport(const RunResult& result) {
    UNSCOPED_INFO("ran " << result.program << (result.workingDir.empty() ? "" : " in " + result.workingDir)
                         << " -> exit " << result.exitCode << (result.timedOut ? " (timed out)" : "")
                         << "\n--- stdout ---\n"
                         << result.out << "--- stderr ---\n"
                         << result.err);
}

void prepareSharedRuns();

MachineToMyself::MachineToMyself() {
    prepareSharedRuns();
    lock_ = lockMachine(true);
    machineIsMine = true;
}

MachineToMyself::~MachineToMyself() {
    machineIsMine = false;
    unlockMachine(lock_, true);
}

std::string scratchDir() {
    const char* shard = std::getenv("COURSE_TEST_SHARD");
    const std::string folder =
        buildDir() + "/tests/scratch" + (shard != nullptr && *shard != '\0' ? std::string("-") + shard : "");
    mkdir(folder.c_str(), 0755);
    return folder;
}

bool runsAlone(const std::string& programPath) {
    // The lesson is the program's folder's name, for the course's build (build/NN-topic/P) and
    // for a build outside it (.../NN-topic/P) alike; the list is the course build's.
    const std::string folder = programPath.substr(0, programPath.rfind('/'));
    const std::string lesson = folder.substr(folder.rfind('/') + 1);
    const std::string name = programPath.substr(programPath.rfind('/') + 1);
    std::ifstream list(buildDir() + "/" + lesson + "/run-alone.txt");
    for (std::string line; std::getline(list, line);)
        if (line == name) return true;
    return false;
}

namespace {

// The shared plain runs, by kind ("plain" or "terminal") and program path.
std::mutex cacheMutex;
std::map<std::string, RunResult> cache;

RunOptions plainOptions() {
    RunOptions options;
    options.workingDir = "/";  // never the repository: programs find their files from the executable
    return options;
}

// A terminal's view: stdout and stderr through one pipe, in the order the program wrote them.
Job terminalJob(const std::string& programPath) {
    RunOptions options = plainOptions();
    options.args = {"-c", "exec \"$0\" 2>&1", programPath};
    return Job{"/bin/sh", options};
}

const std::string& programOf(const Job& job) {
    return programOfJob(job.program, job.options);
}

// The shared runs as one file, for the other test processes of the same `make test`: each field
// a length and its bytes.
void putField(std::string& out, const std::string& field) {
    out += std::to_string(field.size()) + "\n" + field;
}

bool takeField(const std::string& in, size_t& at, std::string& field) {
    const size_t newline = in.find('\n', at);
    if (newline == std::string::npos) return false;
    const size_t size = std::strtoull(in.c_str() + at, nullptr, 10);
    if (newline + 1 + size > in.size()) return false;
    field = in.substr(newline + 1, size);
    at = newline + 1 + size;
    return true;
}

std::string serializeRuns(const std::map<std::string, RunResult>& runs) {
    std::string out;
    for (const auto& [key, r] : runs) {
        for (const std::string& field : {key, r.program, r.workingDir, r.out, r.err, std::to_string(r.exitCode),
                                         std::string(r.timedOut ? "1" : "0"), std::to_string(r.seconds)})
            putField(out, field);
    }
    return out;
}

std::map<std::string, RunResult> deserializeRuns(const std::string& in) {
    std::map<std::string, RunResult> runs;
    size_t at = 0;
    std::string key, exitCode, timedOut, seconds;
    RunResult r;
    while (at < in.size() && takeField(in, at, key) && takeField(in, at, r.program) &&
           takeField(in, at, r.workingDir) && takeField(in, at, r.out) && takeField(in, at, r.err) &&
           takeField(in, at, exitCode) && takeField(in, at, timedOut) && takeField(in, at, seconds)) {
        r.exitCode = std::atoi(exitCode.c_str());
        r.timedOut = timedOut == "1";
        r.seconds = std::strtod(seconds.c_str(), nullptr);
        runs[key] = r;
    }
    return runs;
}

}  // namespace

// The outside builds (see harness.h), started at most once, in a background thread.
namespace {

std::once_flag outsideOnce;
std::future<std::vector<RunResult>> outsideFuture;
std::vector<RunResult> outsideResults;
std::mutex outsideMutex;
bool outsideDone = false;

}  // namespace

std::string readText(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

bool writeFile(const std::string& path, const std::string& text, unsigned mode) {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, static_cast<mode_t>(mode));
    if (fd < 0) return false;
    bool written = fchmod(fd, static_cast<mode_t>(mode)) == 0;  // also when the file existed before
    for (size_t done = 0; written && done < text.size();) {
        const ssize_t n = write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        written = n > 0;
        if (written) done += static_cast<size_t>(n);
    }
    return close(fd) == 0 && written;
}

bool copyFile(const std::string& from, const std::string& to, unsigned mode) {
    std::ifstream in(from, std::ios::binary);
    if (!in) return false;
    std::stringstream bytes;
    bytes << in.rdbuf();
    return writeFile(to, bytes.str(), mode);
}

std::string markedBlock(const std::string& readme, const std::string& marker, const std::string& fence) {
    const std::string begin = "<!-- " + marker + ":begin -->\n```" + fence + "\n";
    const std::string end = "\n```\n<!-- " + marker + ":end -->";
    const auto from = readme.find(begin);
    const auto to = readme.find(end);
    if (from == std::string::npos || to == std::string::npos || to < from + begin.size()) return "";
    return readme.substr(from + begin.size(), to - from - begin.size());
}

std::string buildOutsideBlock(const std::string& readme) {
    return markedBlock(readme, "build-outside", "sh");
}

std::string outsideDir(const std::string& lesson) {
    return buildDir() + "/tests/outside/" + lesson + "/" + lesson;
}

void startOutsideBuilds() {
    std::call_once(outsideOnce, [] {
        std::vector<Job> builds;
        for (const auto& lesson : lessonFolders()) {
            const std::string commands = buildOutsideBlock(readText(repoRoot() + "/" + lesson + "/README.md"));
            Job build;
            build.program = "/bin/bash";
            // A fresh copy of the lesson folder and common/, then exactly the README's commands; skipped
            // when the last build had the same sources, commands and compilers (a stamp of their hash).
            build.options.args = {
                "-euo", "pipefail", "-c",
                "copy=$1 repo=$2 lesson=$3 commands=$4\n"
                // The compilers yield the processors to the lesson programs that the tests run
                // meanwhile: those hold contexts on the GPU, and a starved one holds up the others.
                "renice -n 10 $$ >/dev/null 2>&1 || true\n"
                "stamp=$( { printf '%s\\n' \"$commands\"; g++ --version; "
                "/usr/local/cuda/bin/nvcc --version 2>/dev/null || true;"
                " cd \"$repo\" && find \"$lesson\" common -type f -print0 | sort -z | xargs -0 sha256sum; } | sha256sum)\n"
                "if [ -f \"$copy/.stamp\" ] && [ \"$(cat \"$copy/.stamp\")\" = \"$stamp\" ]; then\n"
                "    echo \"built before from the same sources, commands and compilers\"; exit 0\n"
                "fi\n"
                "rm -rf \"$copy\" && mkdir -p \"$copy\" && cp -r \"$repo/$lesson\" \"$repo/common\" \"$copy/\"\n"
                "cd \"$copy/$lesson\" && eval \"$commands\"\n"
                "echo \"$stamp\" > \"$copy/.stamp\"\n",
                "bash", buildDir() + "/tests/outside/" + lesson, repoRoot(), lesson, commands};
            build.options.timeoutSeconds = 600;
            builds.push_back(build);
        }
        outsideFuture = std::async(std::launch::async, [builds] {
            // One process builds at a time: another test process of the same run waits here, then
            // finds every lesson built from the same sources (the stamps) and builds nothing.
            const int lock = openLockFile("outside-builds");
            if (lock >= 0) lockFile(lock, LOCK_EX);
            auto results = runAll(builds);
            if (lock >= 0) close(lock);
            return results;
        });
    });
}

const std::vector<RunResult>& outsideBuildResults() {
    startOutsideBuilds();
    const TestHoldPaused paused;  // another process may be the one building
    const std::lock_guard<std::mutex> lock(outsideMutex);
    if (!outsideDone) {
        outsideResults = outsideFuture.get();
        outsideDone = true;
    }
    return outsideResults;
}

std::vector<RunResult> runPrograms(const std::vector<Job>& jobs) {
    std::vector<Job> together;
    std::vector<size_t> togetherAt;
    std::vector<size_t> aloneAt;
    for (size_t i = 0; i < jobs.size(); ++i) {
        if (runsAlone(programOf(jobs[i]))) {
            aloneAt.push_back(i);
        } else {
            together.push_back(jobs[i]);
            togetherAt.push_back(i);
        }
    }
    std::vector<RunResult> results(jobs.size());
    // At most 8 at once: more processes sharing the GPU wait for each other's time slices (on an
    // H100, 45 programs started together took 22 s; each takes about 0.3 s on its own).
    const auto parallel = runAll(together, std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
    for (size_t k = 0; k < parallel.size(); ++k) results[togetherAt[k]] = parallel[k];
    // The programs that must run alone take the machine's lock exclusively: they wait for every
    // other run, the outside builds' compilers too, of this test process and of the others.
    for (size_t i : aloneAt) results[i] = runQuietly(jobs[i].program, jobs[i].options);
    return results;
}

void prepareSharedRuns() {
    static std::once_flag once;
    std::call_once(once, [] {
        if (!loadedDriver().usable()) return;
        // Another process of this `make test` may have made them: one makes them while the
        // others wait on the folder's lock, then reads them (the file is complete once it exists).
        const char* sharedFolder = std::getenv("COURSE_TEST_SHARED_RUNS");
        const TestHoldPaused paused;  // another process may be making them, and need the machine alone
        std::string sharedFile;
        int sharedLock = -1;
        if (sharedFolder != nullptr && *sharedFolder != '\0') {
            mkdir(sharedFolder, 0755);
            sharedFile = std::string(sharedFolder) + "/runs";
            sharedLock = open((std::string(sharedFolder) + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
            if (sharedLock >= 0) lockFile(sharedLock, LOCK_EX);
            if (access(sharedFile.c_str(), F_OK) == 0) {
                auto made = deserializeRuns(readText(sharedFile));
                const std::lock_guard<std::mutex> lock(cacheMutex);
                cache.merge(made);
                if (sharedLock >= 0) close(sharedLock);
                return;
            }
        }
        // Every program's plain run; then, for the programs that wrote to stderr, the terminal's
        // view as well (where stderr stayed empty, the terminal shows exactly what stdout held).
        std::vector<Job> plain;
        for (const auto& lesson : lessonFolders())
            for (const auto& program : lessonPrograms(lesson))
                plain.push_back(Job{lessonBinary(lesson, program), plainOptions()});
        const auto plainResults = runPrograms(plain);
        std::vector<Job> terminal;
        for (size_t i = 0; i < plain.size(); ++i)
            if (!plainResults[i].err.empty()) terminal.push_back(terminalJob(plain[i].program));
        const auto terminalResults = runPrograms(terminal);
        std::map<std::string, RunResult> made;
        for (size_t i = 0; i < plain.size(); ++i) made.emplace("plain " + plain[i].program, plainResults[i]);
        for (size_t i = 0; i < terminal.size(); ++i)
            made.emplace("terminal " + programOf(terminal[i]), terminalResults[i]);
        if (!sharedFile.empty()) {
            const std::string partial = sharedFile + ".partial";
            if (writeFile(partial, serializeRuns(made))) std::rename(partial.c_str(), sharedFile.c_str());
        }
        if (sharedLock >= 0) close(sharedLock);
        const std::lock_guard<std::mutex> lock(cacheMutex);
        cache.merge(made);
    });
}

namespace {

RunResult sharedRun(const std::string& key, const Job& job) {
    prepareSharedRuns();
    const std::lock_guard<std::mutex> lock(cacheMutex);
    auto it = cache.find(key);
    if (it == cache.end()) it = cache.emplace(key, runQuietly(job.program, job.options)).first;
    attachToReport(it->second);
    return it->second;
}

}  // namespace

RunResult defaultRun(const std::string& lesson, const std::string& program) {
    const std::string path = lessonBinary(lesson, program);
    return sharedRun("plain " + path, Job{path, plainOptions()});
}

std::string terminalOutput(const std::string& programPath) {
    prepareSharedRuns();
    {
        const std::lock_guard<std::mutex> lock(cacheMutex);
        const auto plain = cache.find("plain " + programPath);
        if (plain != cache.end() && plain->second.err.empty()) return plain->second.out;
    }
    return sharedRun("terminal " + programPath, terminalJob(programPath)).out;
}

namespace {

// Starts the outside builds as the run begins when the whole suite runs (no test named on the
// command line), so that they compile while the first programs run.
class StartOutsideBuilds : public Catch::EventListenerBase {
public:
    using Catch::EventListenerBase::EventListenerBase;
    void testRunStarting(const Catch::TestRunInfo&) override {
        if (!m_config->testSpec().hasFilters()) startOutsideBuilds();
    }
    // The shared hold on the machine that requireGpu took ends with the test case.
    void testCaseEnded(const Catch::TestCaseStats&) override { releaseTestHold(); }
};

}  // namespace

RunResult runLesson(const std::string& lesson, const RunOptions& options, const std::string& program) {
    return run(lessonBinary(lesson, program), options);
}

RunResult runAgainstStub(const std::string& lesson, const std::vector<std::string>& args, const std::string& program) {
    RunOptions options;
    options.args = args;
    options.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();
    return runLesson(lesson, options, program);
}

RunResult checkRefusesArguments(const std::string& lesson, const std::vector<std::string>& args,
                                const std::string& program) {
    std::string commandLine = program.empty() ? lesson : program;
    for (const auto& arg : args) commandLine += " " + arg;
    INFO("refused command line: " << commandLine);
    const RunResult r = runAgainstStub(lesson, args, program);
    CHECK(r.exitCode == 2);
    CHECK(contains(r.err, "usage:"));
    CHECK_FALSE(contains(r.err, "CUDA_ERROR_STUB_LIBRARY"));
    return r;
}

const course::DynamicDriver& driver() {
    holdMachineForTest();  // what a test does with it in-process runs on the GPU: see holdMachineForTest
    return loadedDriver();
}

void requireGpu() {
    if (!loadedDriver().usable()) SKIP("GPU test skipped: " << loadedDriver().problem());
}

void requireRan(const RunResult& result) {
    if (result.exitCode != course::kExitNotApplicable) return;
    std::string why = "not applicable on this machine";
    for (const auto& line : lines(result.out))
        if (line.rfind("Result = SKIP", 0) == 0) why = line;
    SKIP("lesson exited 77: " << why);
}

CurrentPrimaryContext::CurrentPrimaryContext() {
    auto deviceGet = DRIVER_FUNCTION(driver(), cuDeviceGet);
    auto retain = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxRetain);
    auto setCurrent = DRIVER_FUNCTION(driver(), cuCtxSetCurrent);
    REQUIRE(deviceGet);
    REQUIRE(retain);
    REQUIRE(setCurrent);
    REQUIRE(deviceGet(&device_, 0) == CUDA_SUCCESS);
    REQUIRE(retain(&context_, device_) == CUDA_SUCCESS);
    REQUIRE(setCurrent(context_) == CUDA_SUCCESS);
}

CurrentPrimaryContext::~CurrentPrimaryContext() {
    if (auto setCurrent = DRIVER_FUNCTION(driver(), cuCtxSetCurrent)) setCurrent(nullptr);
    if (auto release = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxRelease)) release(device_);
}

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> result;
    std::istringstream stream(text);
    for (std::string line; std::getline(stream, line);) result.push_back(line);
    return result;
}

std::optional<std::string> valueOf(const std::string& text, const std::string& label) {
    const auto all = valuesOf(text, label);
    if (all.empty()) return std::nullopt;
    return all.front();
}

std::vector<std::string> valuesOf(const std::string& text, const std::string& label) {
    std::vector<std::string> values;
    const std::string prefix = label + ": ";
    for (const auto& line : lines(text))
        if (line.rfind(prefix, 0) == 0) values.push_back(line.substr(prefix.size()));
    return values;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

std::string trim(const std::string& text) {
    const auto first = text.find_first_not_of(" \t\r\n");
    return first == std::string::npos ? "" : text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

bool checkOk(const std::string& out, const std::string& name) {
    return valueOf(out, "check " + name) == "ok";
}

std::vector<std::string> checkLines(const std::string& out) {
    std::vector<std::string> found;
    for (const auto& line : lines(out))
        if (line.rfind("check ", 0) == 0) found.push_back(line);
    return found;
}

namespace {

void checksHeld(const RunResult& r, bool needsOne, const std::vector<std::string>& mayBeSkipped) {
    const std::vector<std::string> checks = checkLines(r.out);
    if (needsOne) CHECK_FALSE(checks.empty());
    for (const std::string& line : checks) {
        INFO(line);
        bool skippable = false;
        for (const std::string& name : mayBeSkipped)
            skippable = skippable || line.rfind("check " + name + ": ", 0) == 0;
        if (skippable && line.find(": SKIP (") != std::string::npos) continue;
        CHECK(line.size() > 4);
        CHECK(line.substr(line.size() - 4) == ": ok");
    }
}

}  // namespace

void requireChecksHeld(const RunResult& r, bool needsOne) {
    checksHeld(r, needsOne, {});
}

void requireChecksHeldOrSkipped(const RunResult& r, const std::vector<std::string>& mayBeSkipped) {
    checksHeld(r, true, mayBeSkipped);
}

double benchValue(const std::string& out, const std::string& metric) {
    const std::string prefix = "bench: " + metric + " = ";
    for (const auto& line : lines(out))
        if (line.rfind(prefix, 0) == 0) return std::strtod(line.c_str() + prefix.size(), nullptr);
    return -1.0;
}

}  // namespace harness

CATCH_REGISTER_LISTENER(harness::StartOutsideBuilds)
