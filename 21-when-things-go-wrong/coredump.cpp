// Lesson 21, program 4 — a GPU coredump of a kernel that faults.
//
// With GPU coredumps on, the driver writes what the GPU held when a kernel raised an exception to a
// file — the kernel, the thread and instruction that faulted, registers and, unless told to leave
// them out, memory — and cuda-gdb opens the file ("target cudacore FILE") as if it had stopped the
// kernel there. The cuCoredump* calls (CUDA 12.1) set this up: dumps on exception, the file, what
// to leave out — for the whole process (cuCoredumpSetAttributeGlobal), which a context takes over
// when it is made, or for the current context (cuCoredumpSetAttribute); a context can also be
// made with the flag CU_CTX_COREDUMP_ENABLE (cuda.h: where dumps are not on globally or through
// the environment). The child turns dumps on globally and faults, and the driver writes the dump
// and then abort()s it; the parent made the temporary folder the dump goes to, checks the file and
// how the child ended, and removes the folder.
//
//   coredump               the steps, with their checks
//   coredump --device N    another GPU
//   coredump --child 1     the child: it reads the dump's path from stdin. Started by hand,
//                          dir=$(mktemp -d); echo "$dir/gpu.core" | coredump --child 1
//                          leaves the dump in that private folder for cuda-gdb. A folder that
//                          other users can write to (/tmp itself) is refused.
#include <cuda.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "children.h"
#include "lesson21.h"

namespace {

constexpr int kDumpRole = 1;
constexpr const char* kSettings = "coredump settings (cuCoredumpSetAttributeGlobal)";
constexpr const char* kLaunch = "cuLaunchKernel of the out-of-bounds store";
// The cuda-gdb guide's coredump variables: set before cuInit, they take precedence over the calls.
constexpr const char* kCoredumpVariables[] = {"CUDA_ENABLE_COREDUMP_ON_EXCEPTION",  "CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION",
                                              "CUDA_ENABLE_LIGHTWEIGHT_COREDUMP",   "CUDA_COREDUMP_FILE",
                                              "CUDA_COREDUMP_GENERATION_FLAGS",     "CUDA_ENABLE_USER_TRIGGERED_COREDUMP",
                                              "CUDA_COREDUMP_PIPE"};
constexpr const char* kLightweightKept = "the context's generation flags include every lightweight flag";
constexpr const char* kEnabledRead = "the context's CU_COREDUMP_ENABLE_ON_EXCEPTION";
constexpr const char* kFileRead = "the context's CU_COREDUMP_FILE";

#if CUDA_VERSION >= 12010
constexpr int kWaitSeconds = 20;  // below children::kQuietLimitSeconds, after which the parent kills a silent child
constexpr const char* kUnreported = "no dump and no abort came: the child ends by itself, without another CUDA call";

// One process-wide setting; the first failure is kept in *result.
void setGlobal(CUcoredumpSettings setting, void* value, size_t size, CUresult* result) {
    if (*result == CUDA_SUCCESS) *result = cuCoredumpSetAttributeGlobal(setting, value, &size);
}

// The child: dumps on before its context exists, then a store 1 TiB past its buffer.
int dumpingChild(int ordinal) {
    children::beginChild();
    std::string path = children::readInstruction();
    const std::string::size_type slash = path.rfind('/');
    if (path.empty() || slash == std::string::npos) {
        std::fprintf(stderr,
                     "child: no dump path on stdin (dir=$(mktemp -d); echo \"$dir/gpu.core\" | coredump --child 1)\n");
        return 1;
    }
    // The dump is written under a name the caller chose: only into a folder of this user's that
    // no one else can write to (a mkdtemp folder), where no one can plant a link under that name.
    const std::string folder = path.substr(0, slash + 1);
    struct stat info {};
    if (stat(folder.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != geteuid() ||
        (info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        std::fprintf(stderr, "child: %s is not a folder of this user's that only this user can write to (mktemp -d)\n",
                     folder.c_str());
        return 1;
    }
    // After the dump the driver abort()s the process: no host core file of it. And the dump's
    // folder becomes the working folder, so that a file written under a default name
    // (core.cuda.HOST.PID) lands there too.
    const rlimit noCoreFile{0, 0};
    setrlimit(RLIMIT_CORE, &noCoreFile);
    if (chdir(folder.c_str()) != 0) std::perror("child: chdir to the dump's folder");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));

    // Process-wide settings, made before the context: a context starts with the global settings of
    // the moment it is made (cuda.h). Booleans are C++ bools, the file a NUL-terminated string.
    CUresult settings = CUDA_SUCCESS;
    setGlobal(CU_COREDUMP_FILE, path.data(), path.size() + 1, &settings);
    int flags = 0;
#if CUDA_VERSION >= 12050
    // One integer of flags since CUDA 12.5. The lightweight ones leave out GPU memory and the ELF
    // images that are not relocated at run time (cuda.h), not every ELF image.
    if (driverVersion >= 12050) {
        flags = CU_COREDUMP_LIGHTWEIGHT_FLAGS;
        setGlobal(CU_COREDUMP_GENERATION_FLAGS, &flags, sizeof(flags), &settings);
    }
#endif
    if (flags == 0) {  // CUDA 12.1 to 12.4: the same as one boolean (deprecated since 12.5)
        bool lightweight = true;
        setGlobal(CU_COREDUMP_LIGHTWEIGHT, &lightweight, sizeof(lightweight), &settings);
    }
    // Not CU_COREDUMP_SKIP_ABORT: after a fault this process's CUDA is over anyway (the error is
    // sticky), and the dump is its report; by default the driver abort()s the process after it.
    bool enable = true;
    setGlobal(CU_COREDUMP_ENABLE_ON_EXCEPTION, &enable, sizeof(enable), &settings);
    lesson21::show(kSettings, settings);
    if (settings != CUDA_SUCCESS) return 0;

    // The context, and the settings it started with (cuCoredumpGetAttribute: the current context's).
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    bool enabled = false;
    size_t size = sizeof(enabled);
    CHECK_DRIVER(cuCoredumpGetAttribute(CU_COREDUMP_ENABLE_ON_EXCEPTION, &enabled, &size));
    char file[1024] = {};
    size = sizeof(file);
    CHECK_DRIVER(cuCoredumpGetAttribute(CU_COREDUMP_FILE, file, &size));
    std::printf("%s: %s\n", kEnabledRead, enabled ? "true" : "false");
    std::printf("%s: %s\n", kFileRead, std::string(file) == path ? "the path the parent sent" : file);
    // The context flag that turns dumps on for one context (cuda.h: set when the context is made,
    // where dumps are not on globally). Only read here: the settings above are global.
    unsigned int contextFlags = 0;
    CHECK_DRIVER(cuCtxGetFlags(&contextFlags));
    std::printf("the context's flags (cuCtxGetFlags) include CU_CTX_COREDUMP_ENABLE: %s\n",
                (contextFlags & CU_CTX_COREDUMP_ENABLE) != 0 ? "yes" : "no");
    std::printf("CU_COREDUMP_GENERATION_FLAGS set: 0x%x (lightweight: no GPU memory, no non-relocated ELF images)\n",
                flags);
    // What the context took over, read back (cuCoredumpGetAttribute): every lightweight flag.
    bool lightweightKept = false;
#if CUDA_VERSION >= 12050
    if (flags != 0) {
        int kept = 0;
        size = sizeof(kept);
        const CUresult read = cuCoredumpGetAttribute(CU_COREDUMP_GENERATION_FLAGS, &kept, &size);
        if (read == CUDA_SUCCESS)
            std::printf("the context's CU_COREDUMP_GENERATION_FLAGS: 0x%x\n", kept);
        else
            lesson21::show("the context's CU_COREDUMP_GENERATION_FLAGS", read);
        lightweightKept =
            read == CUDA_SUCCESS && (kept & CU_COREDUMP_LIGHTWEIGHT_FLAGS) == CU_COREDUMP_LIGHTWEIGHT_FLAGS;
    }
#endif
    if (flags == 0) {  // CUDA 12.1 to 12.4: the boolean
        bool kept = false;
        size = sizeof(kept);
        const CUresult read = cuCoredumpGetAttribute(CU_COREDUMP_LIGHTWEIGHT, &kept, &size);
        if (read != CUDA_SUCCESS) lesson21::show("the context's CU_COREDUMP_LIGHTWEIGHT", read);
        lightweightKept = read == CUDA_SUCCESS && kept;
    }
    std::printf("%s: %s\n", kLightweightKept, lightweightKept ? "yes" : "no");

    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, lesson21::faultsModulePath().c_str()));
    CUfunction storeAt = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&storeAt, module, "storeAt"));
    CUdeviceptr words = 0;
    CHECK_DRIVER(cuMemAlloc(&words, 4096));
    long long index = lesson21::kFarIndex;
    unsigned int value = 7;
    void* params[] = {&words, &index, &value};
    lesson21::show(kLaunch, cuLaunchKernel(storeAt, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    // The driver writes the dump when the exception reaches it and then calls abort(). Observed on
    // NVIDIA H100 80GB HBM3: cuCtxSynchronize returned first, with CUDA_SUCCESS, and the dump and the
    // abort came about a quarter of a second after the launch, while this thread slept. A CUDA call made
    // meanwhile hung there (and no dump came): so the child makes none, and ends by itself only if
    // nothing comes.
    lesson21::show("cuCtxSynchronize", cuCtxSynchronize());
    std::printf("waiting, with no CUDA call, for the driver's dump and abort: at most %d s\n", kWaitSeconds);
    std::fflush(stdout);
    for (int tenth = 0; tenth < kWaitSeconds * 10; ++tenth) usleep(100 * 1000);
    std::printf("%s\n", kUnreported);
    std::fflush(stdout);
    _exit(3);  // no CUDA call, not even the context's release: it could wait on the dump for ever
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device", "--child"}, "[--device N]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
#if CUDA_VERSION >= 12010
    if (args.values.count("--child") != 0 && args.valueOr("--child", 0) == kDumpRole) return dumpingChild(ordinal);
#endif
    if (args.values.count("--child") != 0) {
        std::fprintf(stderr, "%s: no child role %lld here\n", argv[0], args.valueOr("--child", 0));
        return course::kExitUsage;
    }
    course::Verdict verdict;

    course::printStep(1, "initialise the driver, check the versions");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    const int driverVersion = lesson21::describeDevice(ordinal, &device);
    std::string why;
    if (!lesson21::sectionAvailable("GPU coredump", "cuCoredumpSetAttribute", 12010, driverVersion, &why)) {
        std::printf("Result = SKIP (%s)\n", why.c_str());
        return course::kExitNotApplicable;
    }

    // Step 2: the dump goes into a folder of the parent's own, which it removes at the end.
    course::printStep(2, "a temporary folder for the dump");
    const char* tmp = std::getenv("TMPDIR");
    std::string folder = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/lesson21-coredump-XXXXXX";
    if (mkdtemp(folder.data()) == nullptr) {
        std::printf("section GPU coredump: SKIP (no temporary folder could be made under %s)\n", folder.c_str());
        std::printf("Result = SKIP (no temporary folder)\n");
        return course::kExitNotApplicable;
    }
    const std::string path = folder + "/gpu.core";
    std::printf("temporary folder made with mkdtemp: lesson21-coredump-XXXXXX under %s\n",
                tmp != nullptr && *tmp != '\0' ? "$TMPDIR" : "/tmp");
    std::printf("dump file: gpu.core in that folder\n");

#if CUDA_VERSION >= 12010  // older headers have no cuCoredump* (sectionAvailable returned above)
    // Step 3: the two scopes, in this process, which enables no dump and faults nowhere. A value set
    // for the process (cuCoredumpSetAttributeGlobal) is what cuCoredumpGetAttributeGlobal reads; one
    // set for the current context (cuCoredumpSetAttribute) is that context's. Environment variables
    // set before cuInit would take precedence (cuda.h): then the section is skipped.
    course::printStep(3, "the process's and the current context's dump file, set and read back");
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    std::string processFile = folder + "/process.core";
    std::string contextFile = folder + "/context.core";
    size_t size = processFile.size() + 1;
    const CUresult setProcess = cuCoredumpSetAttributeGlobal(CU_COREDUMP_FILE, processFile.data(), &size);
    size = contextFile.size() + 1;
    const CUresult setContext = cuCoredumpSetAttribute(CU_COREDUMP_FILE, contextFile.data(), &size);
    char processRead[1024] = {};  // cuda.h: a file name of up to 1023 characters
    size = sizeof(processRead);
    const CUresult readProcess = cuCoredumpGetAttributeGlobal(CU_COREDUMP_FILE, processRead, &size);
    char contextRead[1024] = {};
    size = sizeof(contextRead);
    const CUresult readContext = cuCoredumpGetAttribute(CU_COREDUMP_FILE, contextRead, &size);
    lesson21::show("cuCoredumpSetAttributeGlobal(CU_COREDUMP_FILE)", setProcess);
    lesson21::show("cuCoredumpSetAttribute(CU_COREDUMP_FILE)", setContext);
    std::printf("the process's file (cuCoredumpGetAttributeGlobal): %s\n",
                readProcess != CUDA_SUCCESS ? course::driverErrorName(readProcess)
                : processFile == processRead ? "process.core, as set" : processRead);
    std::printf("the context's file (cuCoredumpGetAttribute): %s\n",
                readContext != CUDA_SUCCESS ? course::driverErrorName(readContext)
                : contextFile == contextRead ? "context.core, as set" : contextRead);
    bool environmentSets = false;
    for (const char* variable : kCoredumpVariables) environmentSets = environmentSets || std::getenv(variable) != nullptr;
    if (environmentSets || setProcess == CUDA_ERROR_NOT_PERMITTED) {
        std::printf("section settings: SKIP (a coredump variable is set in the environment, or the driver refused)\n");
    } else {
        verdict.check("the process-wide file reads back as set for the process",
                      readProcess == CUDA_SUCCESS && processFile == processRead);
        verdict.check("the context's file reads back as set for the context",
                      readContext == CUDA_SUCCESS && contextFile == contextRead);
    }
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
#endif

    // Step 4: environment variables set before cuInit take precedence over the API for good
    // (cuda.h): the child gets none of them, whatever the parent's environment holds.
    course::printStep(4, "a child with GPU coredumps on, and a kernel that faults");
    children::Environment environment;
    environment.unset.assign(std::begin(kCoredumpVariables), std::end(kCoredumpVariables));
    children::Child child = children::startSelf(kDumpRole, ordinal, environment);
    children::tell(child, path);
    children::readUntil(child, kLaunch);
    const auto launched = std::chrono::steady_clock::now();
    const std::string ended = children::finish(child);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - launched).count();
    std::printf("child: %s\n", ended.c_str());
    std::printf("from the child's launch until its end: %.0f ms\n", ms);
    const std::string settings = children::valueOf(child, kSettings);

    course::printStep(5, "the dump file");
    std::error_code error;
    const bool exists = std::filesystem::is_regular_file(path, error);
    const auto bytes = exists ? std::filesystem::file_size(path, error) : 0;
    char magic[4] = {};
    std::ifstream(path, std::ios::binary).read(magic, sizeof(magic));
    std::printf("gpu.core: %s, %llu bytes\n", exists ? "written" : "missing", static_cast<unsigned long long>(bytes));
    std::printf("starts with the ELF magic (0x7f 'E' 'L' 'F'): %s\n",
                magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' && magic[3] == 'F' ? "yes" : "no");
    // cuda.h lists three answers of cuCoredumpSetAttributeGlobal: CUDA_SUCCESS,
    // CUDA_ERROR_INVALID_VALUE and CUDA_ERROR_NOT_PERMITTED. Only the last is this machine's
    // refusal (no dump to check: SKIP); CUDA_ERROR_INVALID_VALUE means the program passed a wrong
    // value or size, and fails. Once the driver accepted them, a child whose fault brought no dump
    // and no abort (it hung, or ended by itself) fails the checks below.
    std::string skip;
    if (settings == "CUDA_ERROR_NOT_PERMITTED") skip = "the driver refused the coredump settings: " + settings;
    if (!skip.empty()) {
        std::printf("section GPU coredump: SKIP (%s)\n", skip.c_str());
    } else if (verdict.check("the driver accepts the coredump settings", settings == "CUDA_SUCCESS")) {
        verdict.check("the child's context took the process's settings: dumps on, the parent's file",
                      children::valueOf(child, kEnabledRead) == "true" &&
                          children::valueOf(child, kFileRead) == "the path the parent sent");
        verdict.check("the child's context took the lightweight flags",
                      children::valueOf(child, kLightweightKept) == "yes");
        verdict.check("the child's GPU coredump is written and not empty", exists && bytes > 0);
        // SIGABRT is 6 on Linux: abort() is what the driver calls after the dump unless told not to.
        verdict.check("the driver aborted the child after the dump", ended == "killed by signal 6");
    }

    course::printStep(6, "remove the temporary folder and the dump in it");
    std::filesystem::remove_all(folder, error);
    const bool removed = !std::filesystem::exists(folder, error);
    std::printf("temporary folder at the end: %s\n", removed ? "removed" : "still there");
    verdict.check("the temporary folder is gone", removed);
    if (!skip.empty() && verdict.allHeld()) {
        std::printf("Result = SKIP (%s)\n", skip.c_str());
        return course::kExitNotApplicable;
    }
    return verdict.finish();
}
