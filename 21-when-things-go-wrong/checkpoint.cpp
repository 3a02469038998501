// Lesson 21, program 5 — moving a process's GPU state out and back: checkpoint and restore.
//
// The cuCheckpointProcess* calls (CUDA 12.8; what the cuda-checkpoint tool does, and what CRIU
// calls to save a CUDA process with the rest of it) act on another process, named by its pid:
// lock it (cuda.h: this "will block further CUDA API calls" of that process), checkpoint it (its
// device memory is copied into host memory and everything it held on the GPU is released), restore
// it (cuda.h: "from its last checkpoint"), unlock it. cuCheckpointProcessGetState says where it
// is. The parent does this to a child that holds a buffer, shows the device memory free while the
// child is checkpointed, and the child checks its buffer after the restore, through the pointer it
// had before, and goes on computing with it: that the buffer was back at its old address is what
// these runs show, not something cuda.h promises.
//
//   checkpoint                           the steps, with their checks
//   checkpoint --bench                   also checkpoint and restore of 256 MiB, 1 GiB, 4 GiB, and pinned copies
//   checkpoint --bench --bench-max-mib N only the --bench sizes up to N MiB (256: the smallest only)
//   checkpoint --device N                another GPU
//   checkpoint --child 1                 the child (started by the program itself, not by hand)
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "checkpoint.h"
#include "children.h"
#include "lesson21.h"

namespace checkpoint {

size_t freeDeviceMemory() {
    size_t freeBytes = 0;
    size_t totalBytes = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &totalBytes));
    return freeBytes;
}

bool allWords(const std::string& value) {
    std::smatch match;
    return std::regex_match(value, match, std::regex("([1-9][0-9]*) of ([0-9]+)")) && match[1] == match[2];
}

#if CUDA_VERSION >= 12080
std::string stateOf(int pid) {
    CUprocessState state = CU_PROCESS_STATE_FAILED;
    const CUresult result = cuCheckpointProcessGetState(pid, &state);
    if (result != CUDA_SUCCESS) return course::driverErrorName(result);
    switch (state) {
        case CU_PROCESS_STATE_RUNNING: return "CU_PROCESS_STATE_RUNNING";
        case CU_PROCESS_STATE_LOCKED: return "CU_PROCESS_STATE_LOCKED";
        case CU_PROCESS_STATE_CHECKPOINTED: return "CU_PROCESS_STATE_CHECKPOINTED";
        case CU_PROCESS_STATE_FAILED: return "CU_PROCESS_STATE_FAILED";
        default: return "state " + std::to_string(static_cast<int>(state));
    }
}

bool Cycle::succeeded(int i, const char* state) const {
    return called[i] && results[i] == CUDA_SUCCESS && states[i] == state;
}

bool Cycle::allSucceeded() const {
    return succeeded(0, kLocked) && succeeded(1, kCheckpointed) && succeeded(2, kLocked) && succeeded(3, kRunning);
}

// Free device memory between the lock and the unlock: a failure here must not end the parent
// with the child still LOCKED or CHECKPOINTED (CHECK_DRIVER would exit). It is reported, the
// value is 0 (so the memory checks fail), and the cycle goes on to restore and unlock.
static size_t freeDeviceMemoryWhileLocked() {
    size_t freeBytes = 0;
    size_t totalBytes = 0;
    if (REPORT_DRIVER(cuMemGetInfo(&freeBytes, &totalBytes)) != CUDA_SUCCESS) return 0;
    return freeBytes;
}

Cycle checkpointAndRestore(int pid) {
    Cycle cycle;
    // Zeroed: cuda.h says their reserved fields must be zero. The lock's timeout is set; the restore's
    // gpuPairs and gpuPairsCount stay empty: no GPU remapping, back onto the GPU it came from.
    CUcheckpointLockArgs lockArgs{};
    lockArgs.timeoutMs = 10000;  // cuda.h: once the timeout is reached, the process is left RUNNING
    CUcheckpointCheckpointArgs checkpointArgs{};
    CUcheckpointRestoreArgs restoreArgs{};
    CUcheckpointUnlockArgs unlockArgs{};
    using clock = std::chrono::steady_clock;
    // cuda.h: each call needs the process in one state ("Process must be in the ... state"). So
    // each is made only when the one before it succeeded and left that state: the first failure
    // ends the cycle.
    cycle.called[0] = true;
    cycle.results[0] = cuCheckpointProcessLock(pid, &lockArgs);
    cycle.states[0] = stateOf(pid);
    if (cycle.succeeded(0, kLocked)) {
        cycle.called[1] = true;
        const auto beforeCheckpoint = clock::now();
        cycle.results[1] = cuCheckpointProcessCheckpoint(pid, &checkpointArgs);
        cycle.checkpointMs = std::chrono::duration<double, std::milli>(clock::now() - beforeCheckpoint).count();
        cycle.states[1] = stateOf(pid);
        cycle.freeCheckpointed = freeDeviceMemoryWhileLocked();
    }
    if (cycle.succeeded(1, kCheckpointed)) {
        cycle.called[2] = true;
        const auto beforeRestore = clock::now();
        cycle.results[2] = cuCheckpointProcessRestore(pid, &restoreArgs);
        cycle.restoreMs = std::chrono::duration<double, std::milli>(clock::now() - beforeRestore).count();
        cycle.states[2] = stateOf(pid);
        cycle.freeRestored = freeDeviceMemoryWhileLocked();
    }
    // Unlock from LOCKED only, the state it needs: after the restore, or after any step that
    // failed and left the process locked. A process left LOCKED would block in its next CUDA call.
    int last = 0;
    while (last < 2 && cycle.called[last + 1]) ++last;
    if (cycle.states[last] == kLocked) {
        cycle.called[3] = true;
        cycle.results[3] = cuCheckpointProcessUnlock(pid, &unlockArgs);
        cycle.states[3] = stateOf(pid);
    }
    return cycle;
}
#endif

}  // namespace checkpoint

namespace {

#if CUDA_VERSION >= 12080
// "CALL: ANSWER, then the child is STATE" for call i of the cycle, or that it was not made.
void printCall(const checkpoint::Cycle& cycle, int i) {
    if (cycle.called[i])
        std::printf("%s: %s, then the child is %s\n", checkpoint::kCalls[i], course::driverErrorName(cycle.results[i]),
                    cycle.states[i].c_str());
    else
        std::printf("%s: not called (the child is not in the state it needs)\n", checkpoint::kCalls[i]);
}
#endif

// The child: a buffer of the size the parent sends, filled; after the parent's "go", checked and used.
int holdingChild(int ordinal) {
    children::beginChild();
    const unsigned long long bytes = std::strtoull(children::readInstruction().c_str(), nullptr, 10);
    const unsigned long long count = bytes / sizeof(unsigned int);
    if (count == 0) {
        std::fprintf(stderr, "child: no buffer size on stdin (this child is started by the program itself)\n");
        return 1;
    }
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, lesson21::faultsModulePath().c_str()));
    CUfunction fill = nullptr;
    CUfunction addOne = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&fill, module, "fillPattern"));
    CHECK_DRIVER(cuModuleGetFunction(&addOne, module, "addOne"));
    CUdeviceptr words = 0;
    CHECK_DRIVER(cuMemAlloc(&words, count * sizeof(unsigned int)));
    unsigned int seed = checkpoint::kSeed;
    void* fillParams[] = {&words, const_cast<unsigned long long*>(&count), &seed};
    const unsigned int blocks = lesson21::blocksFor(count);
    CHECK_DRIVER(cuLaunchKernel(fill, blocks, 1, 1, lesson21::kThreads, 1, 1, 0, nullptr, fillParams, nullptr));
    CHECK_DRIVER(cuCtxSynchronize());
    std::printf("buffer: %llu MiB, filled with the pattern\n", bytes / checkpoint::kMiB);
    std::printf("%s: the parent may checkpoint this process now\n", checkpoint::kReady);
    const std::string instruction = children::readInstruction();
    if (instruction != "go") {
        std::printf("told \"%s\", not \"go\": stopping\n", instruction.c_str());
        return 1;
    }
    std::vector<unsigned int> host(count);
    CHECK_DRIVER(cuMemcpyDtoH(host.data(), words, count * sizeof(unsigned int)));
    std::printf("%s: %zu of %llu\n", checkpoint::kSurvived, lesson21::wordsHolding(host, seed, 0), count);
    void* addParams[] = {&words, const_cast<unsigned long long*>(&count)};
    CHECK_DRIVER(cuLaunchKernel(addOne, blocks, 1, 1, lesson21::kThreads, 1, 1, 0, nullptr, addParams, nullptr));
    CHECK_DRIVER(cuMemcpyDtoH(host.data(), words, count * sizeof(unsigned int)));
    std::printf("%s: %zu of %llu\n", checkpoint::kComputed, lesson21::wordsHolding(host, seed, 1), count);
    CHECK_DRIVER(cuMemFree(words));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    const char* usage = "[--device N] [--bench [--bench-max-mib N]]";
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device", "--child", "--bench-max-mib"}, usage, args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    // --bench's sizes up to this many MiB (all of them by default); 0 without --bench.
    const long long benchMiB = args.has("--bench") ? args.valueOr("--bench-max-mib", 1ll << 40) : 0;
    if (args.values.count("--bench-max-mib") != 0 && benchMiB < static_cast<long long>(checkpoint::kBenchMiB[0])) {
        std::fprintf(stderr, "%s: --bench-max-mib goes with --bench, and is at least %zu (the smallest size)\n",
                     argv[0], checkpoint::kBenchMiB[0]);
        std::fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return course::kExitUsage;
    }
    if (args.values.count("--child") != 0) {
        if (args.valueOr("--child", 0) == checkpoint::kHolderRole) return holdingChild(ordinal);
        std::fprintf(stderr, "%s: no child role %lld here\n", argv[0], args.valueOr("--child", 0));
        return course::kExitUsage;
    }
    course::Verdict verdict;

    course::printStep(1, "initialise the driver, check the versions");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    const int driverVersion = lesson21::describeDevice(ordinal, &device);
    std::string why;
    if (!lesson21::sectionAvailable("checkpoint", "cuCheckpointProcess*", 12080, driverVersion, &why)) {
        std::printf("Result = SKIP (%s)\n", why.c_str());
        return course::kExitNotApplicable;
    }
#if CUDA_VERSION >= 12080
    // The parent's own context: only to read free device memory (and for --bench's copies).
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));

    course::printStep(2, "a child that holds 256 MiB of device memory");
    const size_t bytes = 256 * checkpoint::kMiB;
    const size_t freeBefore = checkpoint::freeDeviceMemory();
    children::Child child = children::startSelf(checkpoint::kHolderRole, ordinal);
    children::tell(child, std::to_string(bytes));
    const bool ready = children::readUntil(child, checkpoint::kReady);
    const size_t freeWithChild = checkpoint::freeDeviceMemory();
    std::printf("free device memory: %zu MiB before the child, %zu MiB with it\n", freeBefore / checkpoint::kMiB,
                freeWithChild / checkpoint::kMiB);
    // What a checkpoint moves: the buffer, and the rest the child's context holds on the GPU.
    const size_t childHolds = freeBefore > freeWithChild ? freeBefore - freeWithChild : 0;
    std::printf("device memory the child holds: %zu MiB in all, %zu MiB of it its buffer\n",
                childHolds / checkpoint::kMiB, bytes / checkpoint::kMiB);
    // A child that never said it was ready has no buffer to move (it failed, or hangs): nothing
    // is locked or checkpointed then.
    if (!verdict.check("the child fills its buffer and says it is ready", ready)) {
        std::printf("child: %s\n", children::kill(child).c_str());
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
        return verdict.finish();
    }
    const std::string running = checkpoint::stateOf(child.pid);
    std::printf("cuCheckpointProcessGetState: %s\n", running.c_str());
    if (running == "CUDA_ERROR_NOT_SUPPORTED") {
        // Seen under compute-sanitizer too, which stands between this process and the driver.
        const char* tool = course::instrumentingTool();
        const std::string reason = std::string("cuCheckpointProcessGetState answers CUDA_ERROR_NOT_SUPPORTED") +
                                   (tool != nullptr ? std::string(" under ") + tool : std::string());
        std::printf("section checkpoint: SKIP (%s)\n", reason.c_str());
        std::printf("child: %s\n", children::kill(child).c_str());
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
        std::printf("Result = SKIP (%s)\n", reason.c_str());
        return course::kExitNotApplicable;
    }
    verdict.check("the child is CU_PROCESS_STATE_RUNNING before the lock", running == checkpoint::kRunning);
    // The driver's restore thread for the child: Linux lists a process's threads in /proc/PID/task.
    int restoreThread = 0;
    const CUresult asked = cuCheckpointProcessGetRestoreThreadId(child.pid, &restoreThread);
    const bool childsThread = asked == CUDA_SUCCESS && restoreThread > 0 &&
                              std::filesystem::exists("/proc/" + std::to_string(child.pid) + "/task/" +
                                                      std::to_string(restoreThread));
    std::printf("cuCheckpointProcessGetRestoreThreadId: %s, a thread of the child: %s\n",
                course::driverErrorName(asked), childsThread ? "yes" : "no");
    verdict.check("cuCheckpointProcessGetRestoreThreadId names one of the child's threads", childsThread);

    // Steps 3 and 4: one cycle. The parent reads no output meanwhile: the child waits on its stdin.
    course::printStep(3, "lock and checkpoint the child: its device memory moves to host memory");
    const checkpoint::Cycle cycle = checkpoint::checkpointAndRestore(child.pid);
    const char* expected[4] = {checkpoint::kLocked, checkpoint::kCheckpointed, checkpoint::kLocked,
                               checkpoint::kRunning};
    for (int i = 0; i < 2; ++i) {
        printCall(cycle, i);
        verdict.check((std::string(checkpoint::kCalls[i]) + " leaves the child " + expected[i]).c_str(),
                      cycle.succeeded(i, expected[i]));
    }
    std::printf("free device memory while the child is checkpointed: %zu MiB\n",
                cycle.freeCheckpointed / checkpoint::kMiB);
    verdict.checkFreeMemory("the child's device memory is free while it is checkpointed",
                            cycle.freeCheckpointed >= freeWithChild + bytes);

    course::printStep(4, "restore and unlock the child: its memory is back on the GPU");
    for (int i = 2; i < 4; ++i) {
        printCall(cycle, i);
        verdict.check((std::string(checkpoint::kCalls[i]) + " leaves the child " + expected[i]).c_str(),
                      cycle.succeeded(i, expected[i]));
    }
    std::printf("free device memory after the restore: %zu MiB\n", cycle.freeRestored / checkpoint::kMiB);
    verdict.checkFreeMemory(
        "the child holds its device memory again after the restore",
        cycle.called[2] && cycle.freeRestored > 0 && cycle.freeRestored + bytes <= cycle.freeCheckpointed);

    // Step 5: a child that is not RUNNING would block in its next CUDA call: it is killed instead.
    course::printStep(5, "the child checks its buffer and goes on computing");
    const bool goesOn = checkpoint::stateOf(child.pid) == checkpoint::kRunning && children::tell(child, "go");
    const std::string ended = goesOn ? children::finish(child) : children::kill(child);
    std::printf("child: %s\n", ended.c_str());
    verdict.check("the child's buffer survived the checkpoint",
                  checkpoint::allWords(children::valueOf(child, checkpoint::kSurvived)));
    verdict.check("the child computes on it after the restore",
                  checkpoint::allWords(children::valueOf(child, checkpoint::kComputed)));
    verdict.check("the child exits cleanly", ended == "exit code 0");

    course::printStep(6, args.has("--bench") ? "what it costs: 256 MiB, 1 GiB, 4 GiB, beside pinned copies (--bench)"
                                             : "what it costs, beside pinned copies of the same size");
    checkpoint::costs(ordinal, bytes, cycle.checkpointMs, cycle.restoreMs, static_cast<size_t>(benchMiB), verdict);

    course::printStep(7, "release the parent's context");
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context: released\n");
#endif
    return verdict.finish();
}
