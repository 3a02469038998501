// load_timing.cpp — see load_timing.h.
#include "load_timing.h"

#include <cuda.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "lesson22.h"

extern char** environ;

namespace lesson22 {

namespace {

#if CUDA_VERSION >= 12040
using Clock = std::chrono::steady_clock;

// The microseconds `work` took: each timed call gets a clock of its own.
template <typename Work>
double microsecondsOf(Work work) {
    const Clock::time_point start = Clock::now();
    work();
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// One launch of addOffset over 256 ints in the current context and the wait for it, timed. The
// last call inside the timed span is cuStreamQuery on the NULL stream ("CUDA_SUCCESS if all
// operations in the stream ... have completed", cuda.h:15741-15742): a wait moved out of the span
// would come after the query, which would then find the kernel still running unless it had
// already finished. `finished` counts the launches for which the query said finished: their time
// covered the whole launch (and the query).
double timedLaunch(CUkernel kernel, CUdeviceptr out, unsigned int& finished) {
    CUresult state = CUDA_ERROR_NOT_READY;
    const double time = microsecondsOf([&] {
        int n = 256;
        void* params[] = {&out, &n};
        CHECK_DRIVER(
            cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
        CHECK_DRIVER(cuCtxSynchronize());
        state = cuStreamQuery(nullptr);
    });
    if (state != CUDA_ERROR_NOT_READY) CHECK_DRIVER(state);  // NOT_READY is an answer; any other error ends the run
    finished += state == CUDA_SUCCESS ? 1 : 0;
    return time;
}
#endif

constexpr int kChildSeconds = 120;  // a timing run that takes longer is killed
constexpr int kLaterLaunches = 21;
constexpr int kTimedLaunches = kLaterLaunches + 2;  // and the first, and the first in the second context

// Runs `argv` with CUDA_MODULE_LOADING=mode added to this process's environment, its stdout
// into a pipe; returns everything it printed there, and its exit code in `exitCode` (-1 when it
// did not start, did not exit normally, or was killed after kChildSeconds). Its stderr is this
// process's.
std::string runChild(const std::vector<std::string>& argv, const std::string& mode, int& exitCode) {
    exitCode = -1;
    std::vector<std::string> entries;
    for (char** entry = environ; *entry != nullptr; ++entry)
        if (std::strncmp(*entry, "CUDA_MODULE_LOADING=", 20) != 0) entries.emplace_back(*entry);
    entries.push_back("CUDA_MODULE_LOADING=" + mode);
    std::vector<char*> envp;
    for (std::string& entry : entries) envp.push_back(entry.data());
    envp.push_back(nullptr);
    std::vector<std::string> arguments = argv;
    std::vector<char*> args;
    for (std::string& argument : arguments) args.push_back(argument.data());
    args.push_back(nullptr);

    int ends[2] = {-1, -1};
    if (pipe2(ends, O_CLOEXEC) != 0) {
        std::fprintf(stderr, "pipe2: %s\n", std::strerror(errno));
        return "";
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, ends[1], STDOUT_FILENO);  // the copy loses O_CLOEXEC
    std::fflush(stdout);
    pid_t pid = -1;
    const int spawned = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(ends[1]);
    std::string output;
    if (spawned != 0) {
        std::fprintf(stderr, "posix_spawn %s: %s\n", args[0], std::strerror(spawned));
        close(ends[0]);
        return output;
    }
    // Read until the child closes its end, waiting at most until the deadline (a child stuck in
    // the driver would otherwise hold this process forever); then kill it and reap it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kChildSeconds);
    bool timedOut = false;
    char buffer[4096];
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd ready{ends[0], POLLIN, 0};
        const int polled = left.count() > 0 ? poll(&ready, 1, static_cast<int>(left.count())) : 0;
        if (polled < 0 && errno == EINTR) continue;
        if (polled == 0) {
            timedOut = true;
            break;
        }
        const ssize_t got = polled < 0 ? -1 : read(ends[0], buffer, sizeof(buffer));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        output.append(buffer, static_cast<size_t>(got));
    }
    close(ends[0]);
    if (timedOut) {
        std::fprintf(stderr, "%s run: no end after %d s; killing it\n", mode.c_str(), kChildSeconds);
        kill(pid, SIGKILL);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!timedOut && WIFEXITED(status)) exitCode = WEXITSTATUS(status);
    return output;
}

}  // namespace

int loadTimingChild(int ordinal) {
    const char* variable = std::getenv("CUDA_MODULE_LOADING");
    const std::string mode = variable != nullptr ? variable : "(unset)";
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    const std::string shortfall = versionShortfall(kLibraryVersionNeeded);
    if (!shortfall.empty()) return skip(shortfall);
#if CUDA_VERSION >= 12040
    CUmoduleLoadingMode loading{};
    CHECK_DRIVER(cuModuleGetLoadingMode(&loading));
    std::printf("loading mode of the %s run: %s\n", mode.c_str(), loading == CU_MODULE_LAZY_LOADING ? "LAZY" : "EAGER");
    // The context exists before the library: with EAGER, cuda.h says the library is loaded into
    // it "at the time of the call".
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUdeviceptr out = 0;
    CHECK_DRIVER(cuMemAlloc(&out, 256 * sizeof(int)));
    const std::string path = course::kernelPath("library_kernels.fatbin");

    CUlibrary library = nullptr;
    const double load = microsecondsOf([&] {
        CHECK_DRIVER(cuLibraryLoadFromFile(&library, path.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    });
    CUkernel kernel = nullptr;
    const double getKernel =
        microsecondsOf([&] { CHECK_DRIVER(cuLibraryGetKernel(&kernel, library, "addOffset")); });
    unsigned int finished = 0;
    const double first = timedLaunch(kernel, out, finished);
    std::vector<double> later;
    for (int i = 0; i < kLaterLaunches; ++i) later.push_back(timedLaunch(kernel, out, finished));
    // A context made after the load. cuda.h:7885-7890 says that with EAGER the library is loaded
    // into "future contexts at the time of creation", with LAZY "when a function is needed for that
    // context, such as a kernel launch". The two times below are only printed: they change from
    // run to run, and they do not show which call paid for the loading.
    CUcontext second = nullptr;
    const double create =
        microsecondsOf([&] { CHECK_DRIVER(course::ctxCreate(&second, 0, device)); });  // pushed: current from here
    CUdeviceptr secondOut = 0;
    CHECK_DRIVER(cuMemAlloc(&secondOut, 256 * sizeof(int)));
    const double firstInSecond = timedLaunch(kernel, secondOut, finished);
    CHECK_DRIVER(cuMemFree(secondOut));
    CHECK_DRIVER(cuCtxDestroy(second));  // popped too: the primary context is current again
    CHECK_DRIVER(cuMemFree(out));
    CHECK_DRIVER(cuLibraryUnload(library));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));

    const char* m = mode.c_str();
    std::printf("bench: %s cuLibraryLoadFromFile = %.1f us\n", m, load);
    std::printf("bench: %s cuLibraryGetKernel = %.1f us\n", m, getKernel);
    std::printf("bench: %s first launch + synchronize = %.1f us\n", m, first);
    std::printf("bench: %s later launch + synchronize (median of %d) = %.1f us\n", m, kLaterLaunches,
                course::median(later));
    std::printf("bench: %s cuCtxCreate of a second context = %.1f us\n", m, create);
    std::printf("bench: %s first launch in the second context = %.1f us\n", m, firstInSecond);
    std::printf("timed launches finished when their clocks stopped in the %s run: %u of %d\n", m, finished,
                kTimedLaunches);
    return EXIT_SUCCESS;
#else
    return course::kExitNotApplicable;  // not reached: versionShortfall names these headers
#endif
}

void runLoadTimings(course::Verdict& verdict, int ordinal) {
    bool allInMode = true;
    bool allFinished = true;
    for (const std::string mode : {"EAGER", "LAZY"}) {
        int exitCode = -1;
        const std::string output =
            runChild({"/proc/self/exe", "--load-timing", "--device", std::to_string(ordinal)}, mode, exitCode);
        std::fputs(output.c_str(), stdout);
        const bool inMode = output.find("loading mode of the " + mode + " run: " + mode + "\n") != std::string::npos;
        std::printf("%s run: exit code %d, %s\n", mode.c_str(), exitCode,
                    inMode ? "ran in that mode" : "did not report that mode");
        allInMode = allInMode && exitCode == 0 && inMode;
        const std::string all = std::to_string(kTimedLaunches);
        allFinished = allFinished && output.find("timed launches finished when their clocks stopped in the " + mode +
                                                 " run: " + all + " of " + all + "\n") != std::string::npos;
    }
    verdict.check("each timing run used the loading mode it was given", allInMode);
    verdict.check("every timed launch had finished when its clock stopped", allFinished);
}

}  // namespace lesson22
