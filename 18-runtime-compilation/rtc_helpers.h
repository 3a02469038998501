// rtc_helpers.h — lesson 18's shared helpers: the NVRTC and nvJitLink check macros, the
// architectures NVRTC compiles for on this GPU, one compile of a source with its log, and the
// saxpy launch the programs check their kernels with.
#pragma once

#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "kernel_cache.h"

// nvJitLink (link-time optimisation at run time) is a library of its own: CUDA 11.8's toolkit
// has no nvJitLink.h, 12.4's has one (NVIDIA's release notes date it to 12.0, the guard below).
// lesson.mk defines LESSON18_HAVE_NVJITLINK where the toolkit has it and links -lnvJitLink.
#if defined(LESSON18_HAVE_NVJITLINK) && CUDA_VERSION >= 12000 && __has_include(<nvJitLink.h>)
#include <nvJitLink.h>
#define LESSON18_NVJITLINK 1
#else
#define LESSON18_NVJITLINK 0
#endif

namespace lesson18 {

inline void reportNvrtcError(nvrtcResult result, const char* expression, const char* file, int line) {
    std::fflush(stdout);  // keep the report after what the program printed before it
    std::fprintf(stderr, "NVRTC call failed: %s\n  error: %s (code %d)\n  at:    %s:%d\n", expression,
                 nvrtcGetErrorString(result), static_cast<int>(result), file, line);
}

}  // namespace lesson18

// NVRTC's fail-fast check, the twin of CHECK_DRIVER: nvrtcGetErrorString names the code.
// A failed nvrtcCompileProgram is not checked with it: the program log says why (see the programs).
#define CHECK_NVRTC(call)                                                               \
    do {                                                                                \
        const nvrtcResult checkNvrtcResult_ = (call);                                   \
        if (checkNvrtcResult_ != NVRTC_SUCCESS) {                                       \
            ::lesson18::reportNvrtcError(checkNvrtcResult_, #call, __FILE__, __LINE__); \
            std::exit(EXIT_FAILURE);                                                    \
        }                                                                               \
    } while (0)

#if LESSON18_NVJITLINK
// nvJitLink has no function that names its result codes: the number is printed, and a failed
// nvJitLinkComplete is handled by the program, which prints the handle's error log.
#define CHECK_NVJITLINK(call)                                                                                       \
    do {                                                                                                            \
        const nvJitLinkResult checkNvJitLinkResult_ = (call);                                                       \
        if (checkNvJitLinkResult_ != NVJITLINK_SUCCESS) {                                                           \
            std::fflush(stdout);                                                                                    \
            std::fprintf(stderr, "nvJitLink call failed: %s\n  error: nvJitLinkResult %d\n  at:    %s:%d\n", #call, \
                         static_cast<int>(checkNvJitLinkResult_), __FILE__, __LINE__);                              \
            std::exit(EXIT_FAILURE);                                                                                \
        }                                                                                                           \
    } while (0)
#endif

namespace lesson18 {

// NVRTC's version in the driver's encoding (13.0 -> 13000), for printing and for cache keys.
// nvrtcVersion gives a major and a minor number only: two patch releases of one minor give the same.
inline int nvrtcVersionNumber() {
    int major = 0;
    int minor = 0;
    CHECK_NVRTC(nvrtcVersion(&major, &minor));
    return 1000 * major + 10 * minor;
}

// The NVRTC library file this process runs: what tells two patch releases apart for a cache key.
// dladdr names the file that holds an address; the address is nvrtcVersion's in the libraries
// loaded after this program (dlsym with RTLD_NEXT), not the one the program itself uses, which
// may be a stub inside the program. nullopt when the file cannot be found.
inline std::optional<FileIdentity> nvrtcLibraryFile() {
    void* function = dlsym(RTLD_NEXT, "nvrtcVersion");
    Dl_info info{};
    if (function == nullptr || dladdr(function, &info) == 0 || info.dli_fname == nullptr) return std::nullopt;
    return fileIdentity(info.dli_fname);
}

// NVRTC may answer a compile from a cache of its own: CUDA 13.0's nvrtc.h lists the option
// --no-cache, "Disable the use of cache for both ptx and cubin code generation", with no version
// (12.4's nvrtc.h does not list it). A program that times compiles adds it. The version 12.9 below
// is not from the header: NVRTC's user guide dates the cache to it ("Caching (CUDA 12.9+)"). An
// option NVRTC does not take may fail the compile (nvrtcCompileProgram lists
// NVRTC_ERROR_INVALID_OPTION among its results), so the option is added only where both the
// headers (CUDA_VERSION) and the NVRTC loaded (nvrtcVersion) are 12.9 or newer.
inline bool nvrtcHasNoCacheOption() {
#if CUDA_VERSION >= 12090
    return nvrtcVersionNumber() >= 12090;
#else
    return false;
#endif
}

// What this GPU gets from this NVRTC. Architectures are numbered like compute capabilities:
// 90 is 9.0. PTX for compute_XX runs on every GPU of compute capability XX or newer (the driver
// compiles it); SASS for sm_XX only within major version X, minor not below. Both rules are the
// CUDA C++ Programming Guide's (binary and PTX compatibility), not cuda.h's.
struct Target {
    int computeCapability = 0;  // of the GPU, 90 for 9.0
    int arch = 0;               // the newest architecture NVRTC knows that is not newer than the GPU
    bool cubinRuns = false;     // SASS for sm_<arch> runs on this GPU
    std::string ptxOption() const { return "--gpu-architecture=compute_" + std::to_string(arch); }
    std::string cubinOption() const { return "--gpu-architecture=sm_" + std::to_string(arch); }
};

// Step 1 of every program: the GPU's compute capability, NVRTC's version and architectures,
// and the two targets. nullopt (with the reason printed) when NVRTC knows no architecture
// this GPU can run: every NVRTC architecture is newer than the GPU.
inline std::optional<Target> chooseTarget(CUdevice device) {
    int major = 0;
    int minor = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
    int count = 0;
    CHECK_NVRTC(nvrtcGetNumSupportedArchs(&count));
    std::vector<int> archs(static_cast<std::size_t>(count));
    CHECK_NVRTC(nvrtcGetSupportedArchs(archs.data()));  // sorted, oldest first
    Target target;
    target.computeCapability = 10 * major + minor;
    std::string list;
    for (const int arch : archs) {
        list += (list.empty() ? "" : " ") + std::to_string(arch);
        if (arch <= target.computeCapability) target.arch = arch;
    }
    std::printf("compute capability: %d.%d\n", major, minor);
    std::printf("NVRTC version: %s\n", course::formatCudaVersion(nvrtcVersionNumber()).c_str());
    std::printf("NVRTC architectures (nvrtcGetSupportedArchs): %s\n", list.c_str());
    if (target.arch == 0) {
        std::printf("Result = SKIP (this NVRTC compiles for no architecture older than %d.%d)\n", major, minor);
        return std::nullopt;
    }
    target.cubinRuns = target.arch / 10 == major && target.arch % 10 <= minor;
    std::printf("PTX target (virtual architecture, the driver's JIT makes SASS): compute_%d\n", target.arch);
    std::printf("CUBIN target (real architecture, SASS as it is): sm_%d%s\n", target.arch,
                target.cubinRuns ? "" : " (does not run on this GPU)");
    return target;
}

// The log of the program's last compile: errors and warnings with file(line), empty on a clean
// compile. The size NVRTC reports counts the terminating NUL, which the string does not keep.
inline std::string programLog(nvrtcProgram program) {
    std::size_t bytes = 0;
    CHECK_NVRTC(nvrtcGetProgramLogSize(program, &bytes));
    std::string log(bytes, '\0');
    CHECK_NVRTC(nvrtcGetProgramLog(program, log.data()));
    if (!log.empty() && log.back() == '\0') log.pop_back();
    return log;
}

// Prints a log under a label, each of its lines indented with "  | ".
inline void printLog(const char* label, const std::string& log) {
    if (log.empty()) {
        std::printf("%s: empty\n", label);
        return;
    }
    std::printf("%s: %zu bytes\n", label, log.size());
    for (std::size_t start = 0; start < log.size();) {
        std::size_t end = log.find('\n', start);
        if (end == std::string::npos) end = log.size();
        std::printf("  | %s\n", log.substr(start, end - start).c_str());
        start = end + 1;
    }
}

enum class Output { Ptx, Cubin, LtoIr };

struct Compiled {
    nvrtcResult result = NVRTC_SUCCESS;
    std::string log;
    std::string image;  // the PTX (without its NUL), the CUBIN or the LTO-IR; empty if the compile failed
};

// One program, one compile, the output asked for, the program destroyed: the calls that
// compile_and_load shows one by one in its step 3.
inline Compiled compileSource(const std::string& source, const char* name, const std::vector<std::string>& options,
                              Output output) {
    nvrtcProgram program = nullptr;
    CHECK_NVRTC(nvrtcCreateProgram(&program, source.c_str(), name, 0, nullptr, nullptr));
    std::vector<const char*> optionPointers;
    for (const std::string& option : options) optionPointers.push_back(option.c_str());
    Compiled compiled;
    compiled.result = nvrtcCompileProgram(program, static_cast<int>(optionPointers.size()), optionPointers.data());
    compiled.log = programLog(program);
    std::size_t bytes = 0;
    if (compiled.result == NVRTC_SUCCESS && output == Output::Ptx) {
        CHECK_NVRTC(nvrtcGetPTXSize(program, &bytes));
        compiled.image.resize(bytes);
        CHECK_NVRTC(nvrtcGetPTX(program, compiled.image.data()));
        compiled.image.pop_back();  // the NUL; c_str() still ends the PTX with one
    } else if (compiled.result == NVRTC_SUCCESS && output == Output::Cubin) {
        CHECK_NVRTC(nvrtcGetCUBINSize(program, &bytes));
        compiled.image.resize(bytes);
        if (bytes > 0) CHECK_NVRTC(nvrtcGetCUBIN(program, compiled.image.data()));
    }
#if CUDA_VERSION >= 12000  // nvrtcGetLTOIR: in 12.4's nvrtc.h, not in 11.8's
    if (compiled.result == NVRTC_SUCCESS && output == Output::LtoIr) {
        CHECK_NVRTC(nvrtcGetLTOIRSize(program, &bytes));
        compiled.image.resize(bytes);
        if (bytes > 0) CHECK_NVRTC(nvrtcGetLTOIR(program, compiled.image.data()));
    }
#endif
    CHECK_NVRTC(nvrtcDestroyProgram(&program));
    return compiled;
}

// kernels/saxpy.cu, next to the executable (lesson.mk copies it there); nullopt, with a line
// naming the path, when it is missing.
inline std::optional<std::string> readKernelSource() {
    std::optional<std::string> source = course::readFile(course::kernelPath("saxpy.cu"));
    if (!source)
        std::fprintf(stderr, "The lesson's kernel source is copied next to its programs: run make build-18.\n");
    return source;
}

// Elements placed after the n a kernel is given, as many as a block has threads: the last block
// runs up to 255 threads past n, and a kernel without its bounds check writes there. The guard
// holds a value the kernel never writes; it must come back unchanged.
constexpr int kGuardElements = 256;
constexpr float kGuardValue = -12345.0f;

// Runs saxpy (y = a x + y) on 100003 elements with a = 2, x[i] = i % 1000, y[i] = 1 and
// checks every y[i] == 2 x[i] + 1 on the host, and that the guard after y is untouched. Small
// integers are exact in float, fused multiply-add or not, so "exact" means exact. The function may
// be a CUkernel of a library (cast to CUfunction): launched on the NULL stream, as here, it runs in
// the current context (with a stream, in the stream's context).
inline bool saxpyExact(CUfunction saxpy) {
    constexpr int kCount = 100003;  // not a multiple of the block: 93 threads of the last block are past the end
    constexpr std::size_t kBytes = (kCount + kGuardElements) * sizeof(float);
    std::vector<float> x(kCount + kGuardElements, kGuardValue);
    std::vector<float> y(kCount + kGuardElements, kGuardValue);
    for (int i = 0; i < kCount; ++i) x[i] = static_cast<float>(i % 1000);
    for (int i = 0; i < kCount; ++i) y[i] = 1.0f;
    const std::vector<float> before = y;
    CUdeviceptr dx = 0;
    CUdeviceptr dy = 0;
    CHECK_DRIVER(cuMemAlloc(&dx, kBytes));
    CHECK_DRIVER(cuMemAlloc(&dy, kBytes));
    CHECK_DRIVER(cuMemcpyHtoD(dx, x.data(), kBytes));
    CHECK_DRIVER(cuMemcpyHtoD(dy, y.data(), kBytes));
    float a = 2.0f;
    int count = kCount;
    void* params[] = {&a, &dx, &dy, &count};
    CHECK_DRIVER(cuLaunchKernel(saxpy, (kCount + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    CHECK_DRIVER(cuMemcpyDtoH(y.data(), dy, kBytes));  // waits for the kernel
    CHECK_DRIVER(cuMemFree(dy));
    CHECK_DRIVER(cuMemFree(dx));
    int wrong = 0;
    for (int i = 0; i < kCount; ++i) wrong += y[i] != 2.0f * x[i] + 1.0f;
    const bool guardKept = std::memcmp(y.data() + kCount, before.data() + kCount, kGuardElements * sizeof(float)) == 0;
    return wrong == 0 && guardKept;
}

// What cuda.h says a refused PTX load means, for the two results that a program here turns into
// a SKIP of its PTX section; nullptr for any other result.
inline const char* ptxRefusal(CUresult result) {
    if (result == CUDA_ERROR_JIT_COMPILATION_DISABLED) return "PTX JIT compilation was disabled";
    if (result == CUDA_ERROR_UNSUPPORTED_PTX_VERSION) return "the PTX was compiled with an unsupported toolchain";
    return nullptr;
}

}  // namespace lesson18
