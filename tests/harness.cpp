#include "tests/harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

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

RunResult run(const std::string& program, const RunOptions& options) {
    int outPipe[2];
    int errPipe[2];
    REQUIRE(pipe2(outPipe, O_CLOEXEC) == 0);
    REQUIRE(pipe2(errPipe, O_CLOEXEC) == 0);

    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(outPipe[1], STDOUT_FILENO);
        dup2(errPipe[1], STDERR_FILENO);
        for (const auto& [name, value] : options.setEnv) setenv(name.c_str(), value.c_str(), 1);
        for (const auto& name : options.unsetEnv) unsetenv(name.c_str());
        if (!options.workingDir.empty() && chdir(options.workingDir.c_str()) != 0) _exit(126);
        std::vector<char*> argv;
        argv.push_back(const_cast<char*>(program.c_str()));
        for (const auto& arg : options.args) argv.push_back(const_cast<char*>(arg.c_str()));
        argv.push_back(nullptr);
        execvp(program.c_str(), argv.data());  // a bare name ("make") is looked up on PATH
        std::fprintf(stderr, "harness: cannot execute %s: %s\n", program.c_str(), std::strerror(errno));
        _exit(127);
    }
    close(outPipe[1]);
    close(errPipe[1]);

    RunResult result;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.timeoutSeconds);
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
        if (poll(fds, 2, static_cast<int>(left.count())) < 0) break;
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
    result.program = program;
    attachToReport(result);
    return result;
}

void attachToReport(const RunResult& result) {
    UNSCOPED_INFO("ran " << result.program << " -> exit " << result.exitCode
                         << (result.timedOut ? " (timed out)" : "") << "\n--- stdout ---\n"
                         << result.out << "--- stderr ---\n"
                         << result.err);
}

const RunResult& defaultRun(std::string lesson, std::string program) {
    static std::map<std::string, RunResult> runs;
    const std::string key = lesson + "/" + program;
    auto it = runs.find(key);
    if (it == runs.end()) {
        it = runs.emplace(key, runLesson(lesson, {}, program)).first;
    } else {
        attachToReport(it->second);
    }
    return it->second;
}

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
    static const course::DynamicDriver instance;
    return instance;
}

void requireGpu() {
    if (!driver().usable()) SKIP("GPU test skipped: " << driver().problem());
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

}  // namespace harness
