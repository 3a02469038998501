// Lesson 18, program 2 of 3 — a templated kernel by name, and link-time optimisation.
//
// A template kernel has no symbol until it is instantiated, and then its symbol is a mangled C++
// name. nvrtcAddNameExpression asks NVRTC to instantiate "scaleBy<float>"; nvrtcGetLoweredName
// gives the mangled name that cuModuleGetFunction needs. Then two translation units: a kernel
// that calls step(), and the unit that defines step(). Compiled apart (-rdc=true) and linked by
// the driver (cuLink*, as in lesson 06) the call stays a call: neither compile saw both halves.
// Compiled to LTO-IR (-dlto) and linked by nvJitLink with -lto, the optimiser sees both and can
// inline it: the PTX that nvJitLink links with -ptx shows whether it did (printed, not checked:
// nvJitLink.h promises only "Do link time optimization"). The program checks both kernels'
// results against the host and prints their registers, local memory and time.
//
//   templates_and_lto [--device N]
#include <cuda.h>
#include <nvrtc.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "iterate_run.h"
#include "rtc_helpers.h"

namespace {

constexpr const char* kTemplateSource = R"(template <typename T>
__global__ void scaleBy(T* data, T factor, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = data[i] * factor;
}
)";

// Unsigned integers, so that the host's result (iterate_run.h) is exact: each step is a bijection
// of 32-bit values, and the result depends on the element read and on the number of steps.
constexpr const char* kKernelUnit = R"(__device__ unsigned step(unsigned x, int k);  // defined in step.cu

extern "C" __global__ void iterate(const unsigned* in, unsigned* out, int n, int steps) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = in[i];
    for (int k = 0; k < steps; ++k) x = step(x, k);
    out[i] = x;
}
)";

constexpr const char* kStepUnit = R"(__device__ unsigned step(unsigned x, int k) {
    return x * 1664525u + 1013904223u + static_cast<unsigned>(k);
}
)";

// scaleBy<T> on 4099 elements data[i] = i % 1000 with factor 3: small integers, exact in T. A
// guard of lesson18::kGuardElements follows them: the last block runs 253 threads past the end,
// and the guard must come back unchanged (the kernel's bounds check).
template <typename T>
bool scaleExact(CUfunction scaleBy) {
    constexpr int kCount = 4099;
    constexpr std::size_t kBytes = (kCount + lesson18::kGuardElements) * sizeof(T);
    std::vector<T> data(kCount + lesson18::kGuardElements, static_cast<T>(lesson18::kGuardValue));
    for (int i = 0; i < kCount; ++i) data[i] = static_cast<T>(i % 1000);
    const std::vector<T> before = data;
    CUdeviceptr device = 0;
    CHECK_DRIVER(cuMemAlloc(&device, kBytes));
    CHECK_DRIVER(cuMemcpyHtoD(device, data.data(), kBytes));
    T factor = static_cast<T>(3);
    int count = kCount;
    void* params[] = {&device, &factor, &count};
    CHECK_DRIVER(cuLaunchKernel(scaleBy, (kCount + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    CHECK_DRIVER(cuMemcpyDtoH(data.data(), device, kBytes));
    CHECK_DRIVER(cuMemFree(device));
    for (int i = 0; i < kCount; ++i)
        if (data[i] != static_cast<T>(i % 1000) * factor) return false;
    return std::memcmp(data.data() + kCount, before.data() + kCount, lesson18::kGuardElements * sizeof(T)) == 0;
}

// Step 2: two instantiations named before the compile, their mangled names read after it and
// copied while the program lives: nvrtc.h says the name's memory "is released when the NVRTC
// program is destroyed by nvrtcDestroyProgram". The copies are used after it. No check shows the
// order: a copy made too late reads freed memory, which may still hold the old bytes, so such a
// mistake passes or fails by chance; the order is right by construction, not by a check.
void templateKernels(const lesson18::Target& target, course::Verdict& verdict) {
    const char* expressions[] = {"scaleBy<float>", "scaleBy<int>"};
    const std::string architecture = target.cubinOption();
    const char* options[] = {architecture.c_str()};
    nvrtcProgram program = nullptr;
    CHECK_NVRTC(nvrtcCreateProgram(&program, kTemplateSource, "scale_by.cu", 0, nullptr, nullptr));
    for (const char* expression : expressions) CHECK_NVRTC(nvrtcAddNameExpression(program, expression));
    const nvrtcResult compiled = nvrtcCompileProgram(program, 1, options);
    lesson18::printLog("program log", lesson18::programLog(program));
    if (!verdict.check("scale_by.cu compiles", compiled == NVRTC_SUCCESS)) {
        CHECK_NVRTC(nvrtcDestroyProgram(&program));  // a failed compile still leaves a program to free
        return;
    }
    const char* names[2] = {};  // NVRTC's memory, valid until nvrtcDestroyProgram
    for (int i = 0; i < 2; ++i) {
        CHECK_NVRTC(nvrtcGetLoweredName(program, expressions[i], &names[i]));
        std::printf("lowered name of %s: %s\n", expressions[i], names[i]);
    }
    const std::string lowered[2] = {names[0], names[1]};  // the copies, made while the program lives
    std::size_t bytes = 0;
    CHECK_NVRTC(nvrtcGetCUBINSize(program, &bytes));
    std::string cubin(bytes, '\0');
    CHECK_NVRTC(nvrtcGetCUBIN(program, cubin.data()));
    CHECK_NVRTC(nvrtcDestroyProgram(&program));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoadData(&module, cubin.data()));
    CUfunction bySourceName = nullptr;
    const CUresult found = REPORT_DRIVER(cuModuleGetFunction(&bySourceName, module, expressions[0]));
    std::printf("cuModuleGetFunction(\"%s\"): %s\n", expressions[0], course::driverErrorName(found));
    verdict.check("the source-level name is not a symbol of the module", found == CUDA_ERROR_NOT_FOUND);
    CUfunction scaleFloat = nullptr;
    CUfunction scaleInt = nullptr;
    const CUresult foundFloat = REPORT_DRIVER(cuModuleGetFunction(&scaleFloat, module, lowered[0].c_str()));
    const CUresult foundInt = REPORT_DRIVER(cuModuleGetFunction(&scaleInt, module, lowered[1].c_str()));
    std::printf("cuModuleGetFunction(lowered names): %s, %s\n", course::driverErrorName(foundFloat),
                course::driverErrorName(foundInt));
    verdict.check("scaleBy<float> scales floats exactly", foundFloat == CUDA_SUCCESS && scaleExact<float>(scaleFloat));
    verdict.check("scaleBy<int> scales ints exactly", foundInt == CUDA_SUCCESS && scaleExact<int>(scaleInt));
    CHECK_DRIVER(cuModuleUnload(module));
}

// One unit compiled for linking: relocatable CUBIN (-rdc=true) or LTO-IR (-dlto); exits with
// the log if it does not compile.
std::string compileUnit(const char* source, const char* name, const std::vector<std::string>& options,
                        lesson18::Output output) {
    const lesson18::Compiled unit = lesson18::compileSource(source, name, options, output);
    if (unit.result != NVRTC_SUCCESS || unit.image.empty()) {
        lesson18::printLog("program log", unit.log);
        std::fprintf(stderr, "%s did not compile: %s\n", name, nvrtcGetErrorString(unit.result));
        std::exit(EXIT_FAILURE);
    }
    std::printf("%s -> %zu bytes\n", name, unit.image.size());
    return unit.image;
}

// Step 3: the driver's linker joins two relocatable CUBINs; the linked image is loaded before
// cuLinkDestroy (cuda.h: "The cubin is owned by state, so it should be loaded before state is
// destroyed via cuLinkDestroy"). No check shows that order: an image read after cuLinkDestroy
// may still hold its old bytes, so such a mistake passes or fails by chance. The error log's
// buffer is declared first: cuda.h wants option values to stay valid as long as the link state
// lives. nullptr when the link fails (the check says so); the link state is destroyed on every
// path.
CUmodule linkWithDriver(const lesson18::Target& target, course::Verdict& verdict) {
    std::string kernel =
        compileUnit(kKernelUnit, "iterate.cu", {target.cubinOption(), "-rdc=true"}, lesson18::Output::Cubin);
    std::string step = compileUnit(kStepUnit, "step.cu", {target.cubinOption(), "-rdc=true"}, lesson18::Output::Cubin);
    std::vector<char> errorLog(8192, '\0');
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {errorLog.data(), reinterpret_cast<void*>(static_cast<std::uintptr_t>(errorLog.size()))};
    CUlinkState link = nullptr;
    CHECK_DRIVER(cuLinkCreate(2, options, values, &link));
    CHECK_DRIVER(
        cuLinkAddData(link, CU_JIT_INPUT_CUBIN, kernel.data(), kernel.size(), "iterate.cu", 0, nullptr, nullptr));
    CHECK_DRIVER(cuLinkAddData(link, CU_JIT_INPUT_CUBIN, step.data(), step.size(), "step.cu", 0, nullptr, nullptr));
    void* linked = nullptr;
    std::size_t linkedBytes = 0;
    const CUresult completed = REPORT_DRIVER(cuLinkComplete(link, &linked, &linkedBytes));
    if (!verdict.check("cuLink links the two units", completed == CUDA_SUCCESS)) {
        lesson18::printLog("link error log", errorLog.data());
        CHECK_DRIVER(cuLinkDestroy(link));
        return nullptr;
    }
    // The image belongs to the link state: looked at and loaded before cuLinkDestroy frees it.
    const bool elf = verdict.check("linked image is ELF", linkedBytes > 4 && std::memcmp(linked, "\177ELF", 4) == 0);
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoadData(&module, linked));
    CHECK_DRIVER(cuLinkDestroy(link));
    std::printf("cuLinkComplete: %zu bytes, an ELF file: %s, loaded before cuLinkDestroy\n", linkedBytes,
                elf ? "yes" : "NO");
    return module;
}

#if LESSON18_NVJITLINK
// The call instructions in a PTX text: the words "call" and "call.<modifier>" ("call.uni"),
// outside "//" comments (NVRTC's PTX has "// callseq" comments around each call).
int callsIn(const std::string& ptx) {
    int calls = 0;
    std::string word;
    bool inComment = false;
    for (std::size_t i = 0; i <= ptx.size(); ++i) {
        const char c = i < ptx.size() ? ptx[i] : '\n';
        const bool commentStarts = !inComment && c == '/' && i + 1 < ptx.size() && ptx[i + 1] == '/';
        const bool wordChar =
            !inComment && !commentStarts &&
            (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '$' || c == '%');
        if (wordChar) {
            word += c;
            continue;
        }
        if (word == "call" || word.rfind("call.", 0) == 0) ++calls;
        word.clear();
        if (commentStarts) inComment = true;
        if (c == '\n') inComment = false;
    }
    return calls;
}

// nvJitLink's error log, or "". nvJitLink.h says only that nvJitLinkGetErrorLogSize "gets the
// size of the error log": any NUL at the end is dropped here, whether the size counts one or not.
std::string errorLogOf(nvJitLinkHandle handle) {
    std::size_t bytes = 0;
    CHECK_NVJITLINK(nvJitLinkGetErrorLogSize(handle, &bytes));
    std::string log(bytes, '\0');
    if (bytes > 0) CHECK_NVJITLINK(nvJitLinkGetErrorLog(handle, log.data()));
    while (!log.empty() && log.back() == '\0') log.pop_back();
    return log;
}

// Step 4: both units as LTO-IR; first a link that lacks step.cu (its error log), then the link
// of both. -arch names the SASS the linked CUBIN holds; -lto optimises across the units. Then the
// same link once more with -ptx (nvJitLink.h: "Emit ptx after linking instead of cubin; only
// supported with -lto"), to read what the optimiser did with the call to step: the calls in the
// PTX of iterate.cu alone and in the linked PTX are printed, not checked (nvJitLink.h promises
// "Do link time optimization", not an inlining). nullptr when a link fails (the check says
// which); every handle is destroyed on every path.
CUmodule linkWithLto(const lesson18::Target& target, course::Verdict& verdict) {
    const std::string kernel =
        compileUnit(kKernelUnit, "iterate.cu", {target.ptxOption(), "-dlto"}, lesson18::Output::LtoIr);
    const std::string step = compileUnit(kStepUnit, "step.cu", {target.ptxOption(), "-dlto"}, lesson18::Output::LtoIr);
    const std::string arch = "-arch=sm_" + std::to_string(target.arch);
    const char* options[] = {"-lto", arch.c_str()};
    std::printf("nvJitLink options: -lto %s\n", arch.c_str());
    nvJitLinkHandle alone = nullptr;
    CHECK_NVJITLINK(nvJitLinkCreate(&alone, 2, options));
    CHECK_NVJITLINK(nvJitLinkAddData(alone, NVJITLINK_INPUT_LTOIR, kernel.data(), kernel.size(), "iterate.cu"));
    const nvJitLinkResult aloneResult = nvJitLinkComplete(alone);
    const std::string aloneLog = errorLogOf(alone);
    CHECK_NVJITLINK(nvJitLinkDestroy(&alone));
    std::printf("nvJitLinkComplete without step.cu: nvJitLinkResult %d\n", static_cast<int>(aloneResult));
    lesson18::printLog("error log", aloneLog);
    // _Z4stepji is step(unsigned int, int), mangled: what iterate.cu refers to.
    verdict.check("without step.cu the link fails and the log names step",
                  aloneResult != NVJITLINK_SUCCESS && aloneLog.find("_Z4stepji") != std::string::npos);

    nvJitLinkHandle handle = nullptr;
    CHECK_NVJITLINK(nvJitLinkCreate(&handle, 2, options));
    CHECK_NVJITLINK(nvJitLinkAddData(handle, NVJITLINK_INPUT_LTOIR, kernel.data(), kernel.size(), "iterate.cu"));
    CHECK_NVJITLINK(nvJitLinkAddData(handle, NVJITLINK_INPUT_LTOIR, step.data(), step.size(), "step.cu"));
    const nvJitLinkResult completed = nvJitLinkComplete(handle);
    if (!verdict.check("nvJitLink links the two units with -lto", completed == NVJITLINK_SUCCESS)) {
        lesson18::printLog("error log", errorLogOf(handle));
        CHECK_NVJITLINK(nvJitLinkDestroy(&handle));
        return nullptr;
    }
    std::size_t bytes = 0;
    CHECK_NVJITLINK(nvJitLinkGetLinkedCubinSize(handle, &bytes));
    std::string cubin(bytes, '\0');
    CHECK_NVJITLINK(nvJitLinkGetLinkedCubin(handle, cubin.data()));
    CHECK_NVJITLINK(nvJitLinkDestroy(&handle));  // the CUBIN is our copy: it outlives the handle
    std::printf("nvJitLinkComplete: %zu bytes\n", bytes);

    const lesson18::Compiled own =
        lesson18::compileSource(kKernelUnit, "iterate.cu", {target.ptxOption(), "-rdc=true"}, lesson18::Output::Ptx);
    std::printf("calls in the PTX of iterate.cu alone (-rdc=true): %d\n", callsIn(own.image));
    const char* ptxOptions[] = {"-lto", "-ptx", arch.c_str()};
    nvJitLinkHandle ptxLink = nullptr;
    CHECK_NVJITLINK(nvJitLinkCreate(&ptxLink, 3, ptxOptions));
    CHECK_NVJITLINK(nvJitLinkAddData(ptxLink, NVJITLINK_INPUT_LTOIR, kernel.data(), kernel.size(), "iterate.cu"));
    CHECK_NVJITLINK(nvJitLinkAddData(ptxLink, NVJITLINK_INPUT_LTOIR, step.data(), step.size(), "step.cu"));
    const nvJitLinkResult ptxCompleted = nvJitLinkComplete(ptxLink);
    std::string linkedPtx;
    if (ptxCompleted == NVJITLINK_SUCCESS) {
        std::size_t ptxBytes = 0;
        CHECK_NVJITLINK(nvJitLinkGetLinkedPtxSize(ptxLink, &ptxBytes));
        linkedPtx.assign(ptxBytes, '\0');
        CHECK_NVJITLINK(nvJitLinkGetLinkedPtx(ptxLink, linkedPtx.data()));
        while (!linkedPtx.empty() && linkedPtx.back() == '\0') linkedPtx.pop_back();
    } else {
        lesson18::printLog("error log", errorLogOf(ptxLink));
    }
    CHECK_NVJITLINK(nvJitLinkDestroy(&ptxLink));
    const bool hasIterate = linkedPtx.find(".entry iterate") != std::string::npos;
    std::printf("nvJitLink -lto -ptx: %zu bytes of PTX, the iterate kernel in it: %s\n", linkedPtx.size(),
                hasIterate ? "yes" : "NO");
    std::printf("calls in the linked PTX: %d\n", callsIn(linkedPtx));

    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoadData(&module, cubin.data()));
    return module;
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;

    course::printStep(1, "the GPU and the compiler");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", args.deviceOrdinal(), name);
    const std::optional<lesson18::Target> target = lesson18::chooseTarget(device);
    if (!target) return course::kExitNotApplicable;
    if (!target->cubinRuns) {
        std::printf("Result = SKIP (this NVRTC makes no SASS this GPU runs; every step here loads SASS)\n");
        return course::kExitNotApplicable;
    }
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    course::Verdict verdict;

    course::printStep(2, "a templated kernel by name (nvrtcAddNameExpression, nvrtcGetLoweredName)");
    templateKernels(*target, verdict);

    course::printStep(3, "two units, relocatable CUBINs linked by the driver (-rdc=true, cuLink*)");
    CUmodule driverLinked = linkWithDriver(*target, verdict);

    course::printStep(4, "the same two units as LTO-IR linked by nvJitLink (-dlto, -lto)");
    CUmodule ltoLinked = nullptr;
#if LESSON18_NVJITLINK
    ltoLinked = linkWithLto(*target, verdict);
#else
    std::printf("section link-time optimisation: SKIP (built without nvJitLink: the toolkit has no libnvJitLink)\n");
#endif

    // Step 5: the same kernel, linked two ways. The checks decide what holds whatever the
    // compilers do: both results exact. Registers, local memory and time are printed, not
    // checked: they are the compilers' choice, like the inlining step 4 printed.
    course::printStep(5, "what link-time optimisation changed");
    lesson18::IterateRun plain;
    if (driverLinked != nullptr) {
        plain = lesson18::runIterate(driverLinked);
        std::printf("iterate, cuLink: %d registers, %d bytes local memory, %.3f ms\n", plain.registers,
                    plain.localBytes, plain.milliseconds);
        verdict.check("the cuLink kernel matches the host", plain.exact);
    }
    if (ltoLinked != nullptr) {
        const lesson18::IterateRun lto = lesson18::runIterate(ltoLinked);
        std::printf("iterate, nvJitLink -lto: %d registers, %d bytes local memory, %.3f ms\n", lto.registers,
                    lto.localBytes, lto.milliseconds);
        if (driverLinked != nullptr) std::printf("time cuLink / LTO: %.1f x\n", plain.milliseconds / lto.milliseconds);
        verdict.check("the LTO kernel matches the host", lto.exact);
    }

    course::printStep(6, "release everything, newest first");
    if (ltoLinked != nullptr) CHECK_DRIVER(cuModuleUnload(ltoLinked));
    if (driverLinked != nullptr) CHECK_DRIVER(cuModuleUnload(driverLinked));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: the linked modules, the primary context\n");
    return verdict.finish();
}
