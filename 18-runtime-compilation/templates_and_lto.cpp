// Lesson 18, program 2 of 3 — a templated kernel by name, and link-time optimisation.
//
// A template kernel has no symbol until it is instantiated, and then its symbol is a mangled C++
// name. nvrtcAddNameExpression asks NVRTC to instantiate "scaleBy<float>"; nvrtcGetLoweredName
// gives the mangled name that cuModuleGetFunction needs. Then two translation units: a kernel
// that calls step(), and the unit that defines step(). Compiled apart (-rdc=true) and linked by
// the driver (cuLink*, as in lesson 06) the call stays a call: neither compile saw both halves.
// Compiled to LTO-IR (-dlto) and linked by nvJitLink with -lto, the optimiser sees both and can
// inline it. The program compares the two kernels: result, registers, local memory, time.
//
//   templates_and_lto [--device N]
#include <cuda.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

constexpr const char* kKernelUnit = R"(__device__ float step(float x, int k);  // defined in step.cu

extern "C" __global__ void iterate(const float* in, float* out, int n, int steps) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    for (int k = 0; k < steps; ++k) x = step(x, k);
    out[i] = x;
}
)";

constexpr const char* kStepUnit = R"(__device__ float step(float x, int k) {
    return x * 0.5f + static_cast<float>(k & 3);
}
)";

// scaleBy<T> on 4099 elements data[i] = i % 1000 with factor 3: small integers, exact in T.
template <typename T>
bool scaleExact(CUfunction scaleBy) {
    constexpr int kCount = 4099;
    std::vector<T> data(kCount);
    for (int i = 0; i < kCount; ++i) data[i] = static_cast<T>(i % 1000);
    CUdeviceptr device = 0;
    CHECK_DRIVER(cuMemAlloc(&device, kCount * sizeof(T)));
    CHECK_DRIVER(cuMemcpyHtoD(device, data.data(), kCount * sizeof(T)));
    T factor = static_cast<T>(3);
    int count = kCount;
    void* params[] = {&device, &factor, &count};
    CHECK_DRIVER(cuLaunchKernel(scaleBy, (kCount + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    CHECK_DRIVER(cuMemcpyDtoH(data.data(), device, kCount * sizeof(T)));
    CHECK_DRIVER(cuMemFree(device));
    for (int i = 0; i < kCount; ++i)
        if (data[i] != static_cast<T>(i % 1000) * factor) return false;
    return true;
}

// Step 2: two instantiations named before the compile, their mangled names read after it.
void templateKernels(const lesson18::Target& target, course::Verdict& verdict) {
    const char* expressions[] = {"scaleBy<float>", "scaleBy<int>"};
    const std::string architecture = target.cubinOption();
    const char* options[] = {architecture.c_str()};
    nvrtcProgram program = nullptr;
    CHECK_NVRTC(nvrtcCreateProgram(&program, kTemplateSource, "scale_by.cu", 0, nullptr, nullptr));
    for (const char* expression : expressions) CHECK_NVRTC(nvrtcAddNameExpression(program, expression));
    const nvrtcResult compiled = nvrtcCompileProgram(program, 1, options);
    lesson18::printLog("program log", lesson18::programLog(program));
    if (!verdict.check("scale_by.cu compiles", compiled == NVRTC_SUCCESS)) std::exit(verdict.finish());
    std::string lowered[2];
    for (int i = 0; i < 2; ++i) {
        const char* name = nullptr;
        CHECK_NVRTC(nvrtcGetLoweredName(program, expressions[i], &name));
        lowered[i] = name;  // a copy: NVRTC frees the name with the program
        std::printf("lowered name of %s: %s\n", expressions[i], lowered[i].c_str());
    }
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
    CHECK_DRIVER(cuModuleGetFunction(&scaleFloat, module, lowered[0].c_str()));
    CHECK_DRIVER(cuModuleGetFunction(&scaleInt, module, lowered[1].c_str()));
    verdict.check("scaleBy<float> scales floats exactly", scaleExact<float>(scaleFloat));
    verdict.check("scaleBy<int> scales ints exactly", scaleExact<int>(scaleInt));
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
// cuLinkDestroy, which frees it. The error log's buffer is declared first: cuda.h wants option
// values to stay valid as long as the link state lives.
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
        std::exit(verdict.finish());
    }
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoadData(&module, linked));
    CHECK_DRIVER(cuLinkDestroy(link));
    std::printf("cuLinkComplete: %zu bytes, loaded before cuLinkDestroy\n", linkedBytes);
    return module;
}

#if LESSON18_NVJITLINK
// nvJitLink's error log, or "" (its size, like NVRTC's, counts a NUL).
std::string errorLogOf(nvJitLinkHandle handle) {
    std::size_t bytes = 0;
    CHECK_NVJITLINK(nvJitLinkGetErrorLogSize(handle, &bytes));
    std::string log(bytes, '\0');
    if (bytes > 0) CHECK_NVJITLINK(nvJitLinkGetErrorLog(handle, log.data()));
    while (!log.empty() && log.back() == '\0') log.pop_back();
    return log;
}

// Step 4: both units as LTO-IR; first a link that lacks step.cu (its error log), then the link
// of both. -arch names the SASS the linked CUBIN holds; -lto optimises across the units.
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
    // _Z4stepfi is step(float, int), mangled: what iterate.cu refers to.
    verdict.check("without step.cu the link fails and the log names step",
                  aloneResult != NVJITLINK_SUCCESS && aloneLog.find("_Z4stepfi") != std::string::npos);

    nvJitLinkHandle handle = nullptr;
    CHECK_NVJITLINK(nvJitLinkCreate(&handle, 2, options));
    CHECK_NVJITLINK(nvJitLinkAddData(handle, NVJITLINK_INPUT_LTOIR, kernel.data(), kernel.size(), "iterate.cu"));
    CHECK_NVJITLINK(nvJitLinkAddData(handle, NVJITLINK_INPUT_LTOIR, step.data(), step.size(), "step.cu"));
    const nvJitLinkResult completed = nvJitLinkComplete(handle);
    if (!verdict.check("nvJitLink links the two units with -lto", completed == NVJITLINK_SUCCESS)) {
        lesson18::printLog("error log", errorLogOf(handle));
        std::exit(verdict.finish());
    }
    std::size_t bytes = 0;
    CHECK_NVJITLINK(nvJitLinkGetLinkedCubinSize(handle, &bytes));
    std::string cubin(bytes, '\0');
    CHECK_NVJITLINK(nvJitLinkGetLinkedCubin(handle, cubin.data()));
    CHECK_NVJITLINK(nvJitLinkDestroy(&handle));  // the CUBIN is our copy: it outlives the handle
    std::printf("nvJitLinkComplete: %zu bytes\n", bytes);
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
    std::printf("section link-time optimisation: SKIP (built without nvJitLink, which came with CUDA 12.0)\n");
#endif

    // Step 5: the same kernel, linked two ways. The checks decide what holds whatever the
    // compilers do: both results exact, and LTO no worse in local memory. Registers and time
    // are printed, not checked: they are the compilers' choice.
    course::printStep(5, "what link-time optimisation changed");
    const lesson18::IterateRun plain = lesson18::runIterate(driverLinked);
    std::printf("iterate, cuLink: %d registers, %d bytes local memory, %.3f ms\n", plain.registers, plain.localBytes,
                plain.milliseconds);
    verdict.check("the cuLink kernel matches the host", plain.exact);
    if (ltoLinked != nullptr) {
        const lesson18::IterateRun lto = lesson18::runIterate(ltoLinked);
        std::printf("iterate, nvJitLink -lto: %d registers, %d bytes local memory, %.3f ms\n", lto.registers,
                    lto.localBytes, lto.milliseconds);
        std::printf("time cuLink / LTO: %.1f x\n", plain.milliseconds / lto.milliseconds);
        verdict.check("the LTO kernel matches the host", lto.exact);
        verdict.check("the LTO kernel uses no more local memory", lto.localBytes <= plain.localBytes);
    }

    course::printStep(6, "release everything, newest first");
    if (ltoLinked != nullptr) CHECK_DRIVER(cuModuleUnload(ltoLinked));
    CHECK_DRIVER(cuModuleUnload(driverLinked));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: the linked modules, the primary context\n");
    return verdict.finish();
}
