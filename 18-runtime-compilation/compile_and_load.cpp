// Lesson 18, program 1 of 3 — NVRTC: a CUDA C++ source compiled at run time for this GPU.
//
// NVRTC is a library (libnvrtc): it takes a source string and compile options and gives back
// PTX for a virtual architecture (compute_XX: the driver compiles it to SASS for this GPU when
// the module's code is loaded: at the load with eager loading; with lazy loading, cuda.h's
// CUDA_MODULE_LOADING, when a function is first needed) or a CUBIN for a real one (sm_XX: SASS,
// loaded as it is). This program reads the log of
// a source that does not compile, compiles kernels/saxpy.cu (the very file nvcc builds for the
// course) to both, loads the CUBIN as a library before any context exists and the PTX as a
// module of the primary context, and checks what both kernels compute.
//
//   compile_and_load [--device N]
#include <cuda.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "rtc_helpers.h"

namespace {

// A kernel with one mistake: undefinedFactor is declared nowhere. The raw string starts with the
// first line of the source, so its line numbers are the ones NVRTC reports.
constexpr const char* kBrokenSource = R"(extern "C" __global__ void scale(float* data, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = undefinedFactor * data[i];
}
)";

// The 1-based line of `text` on which `needle` first appears (0 if it does not).
int lineOf(const std::string& text, const std::string& needle) {
    const std::size_t at = text.find(needle);
    if (at == std::string::npos) return 0;
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

// Step 2: the compile fails and says why in the program log: "name(line): error: message",
// the source line, a caret under the spot. The name is the one given to nvrtcCreateProgram.
void compileBroken(const lesson18::Target& target, course::Verdict& verdict) {
    const std::string architecture = target.ptxOption();
    const char* options[] = {architecture.c_str()};
    nvrtcProgram program = nullptr;
    CHECK_NVRTC(nvrtcCreateProgram(&program, kBrokenSource, "broken.cu", 0, nullptr, nullptr));
    const nvrtcResult result = nvrtcCompileProgram(program, 1, options);
    const std::string log = lesson18::programLog(program);
    CHECK_NVRTC(nvrtcDestroyProgram(&program));
    std::printf("nvrtcCompileProgram(broken.cu): %s\n", nvrtcGetErrorString(result));
    lesson18::printLog("program log", log);
    const std::string where = "broken.cu(" + std::to_string(lineOf(kBrokenSource, "undefinedFactor")) + "): error";
    const bool named = log.find(where) != std::string::npos && log.find("\"undefinedFactor\"") != std::string::npos;
    std::printf("log names %s and the identifier: %s\n", where.c_str(), named ? "yes" : "NO");
    verdict.check("broken source refused with NVRTC_ERROR_COMPILATION", result == NVRTC_ERROR_COMPILATION);
    verdict.check("the log names the file, the line and the identifier", named);
}

// The value of the first PTX directive `name` (".version" -> "9.0"), or "(none)".
std::string ptxDirective(const std::string& ptx, const std::string& name) {
    const std::size_t at = ptx.find("\n" + name + " ");
    if (at == std::string::npos) return "(none)";
    const std::size_t from = at + name.size() + 2;
    return ptx.substr(from, ptx.find('\n', from) - from);
}

// A function's SASS architecture (CU_FUNC_ATTRIBUTE_BINARY_VERSION, 90 for sm_90) and registers.
void printFunction(const char* label, CUfunction function) {
    int binary = 0;
    int registers = 0;
    CHECK_DRIVER(cuFuncGetAttribute(&binary, CU_FUNC_ATTRIBUTE_BINARY_VERSION, function));
    CHECK_DRIVER(cuFuncGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS, function));
    std::printf("%s: SASS for sm_%d, %d registers per thread\n", label, binary, registers);
}

#if CUDA_VERSION >= 12000
// Step 7: a library's __device__ array and free device memory. cuLibraryGetGlobal returns the
// array's address "for the requested library and the current context"; cuda.h says nothing of
// when its memory is taken or given back: that free memory fell after cuLibraryGetGlobal and rose
// after cuLibraryUnload is what the H200 showed. 64 MiB, so that the change stands out of what
// other processes may allocate meanwhile; a quarter of it is the margin.
constexpr std::size_t kBufferBytes = std::size_t{64} << 20;
constexpr const char* kBufferSource = R"(__device__ char gBuffer[64 << 20];
extern "C" __global__ void touch() { gBuffer[threadIdx.x] = 1; }
)";

void libraryMemoryComesBack(const lesson18::Target& target, course::Verdict& verdict) {
    const lesson18::Compiled compiled =
        lesson18::compileSource(kBufferSource, "buffer.cu", {target.cubinOption()}, lesson18::Output::Cubin);
    if (!verdict.check("buffer.cu compiles to a CUBIN", compiled.result == NVRTC_SUCCESS)) return;
    std::size_t before = 0, withBuffer = 0, after = 0, total = 0;
    CHECK_DRIVER(cuMemGetInfo(&before, &total));
    CUlibrary library = nullptr;
    CHECK_DRIVER(cuLibraryLoadData(&library, compiled.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    CUdeviceptr buffer = 0;
    std::size_t bytes = 0;
    const CUresult found = REPORT_DRIVER(cuLibraryGetGlobal(&buffer, &bytes, library, "gBuffer"));
    CHECK_DRIVER(cuMemGetInfo(&withBuffer, &total));
    if (library != nullptr) CHECK_DRIVER(cuLibraryUnload(library));  // nothing to unload if the load failed
    CHECK_DRIVER(cuMemGetInfo(&after, &total));
    std::printf("cuLibraryGetGlobal(gBuffer): %s, %zu bytes\n", course::driverErrorName(found), bytes);
    verdict.check("the library's gBuffer is 64 MiB in this context", found == CUDA_SUCCESS && bytes == kBufferBytes);
    const std::size_t expected = kBufferBytes - kBufferBytes / 4;
    verdict.checkFreeMemory("free memory falls by gBuffer's size once the library is in this context",
                            before >= withBuffer + expected);
    verdict.checkFreeMemory("free memory rises by gBuffer's size after cuLibraryUnload",
                            after >= withBuffer + expected);
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const std::optional<std::string> source = lesson18::readKernelSource();
    if (!source) return EXIT_FAILURE;

    course::printStep(1, "the GPU and the compiler");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", args.deviceOrdinal(), name);
    std::printf("driver supports CUDA: %s\n", course::formatCudaVersion(driverVersion).c_str());
    const std::optional<lesson18::Target> target = lesson18::chooseTarget(device);
    if (!target) return course::kExitNotApplicable;
    course::Verdict verdict;

    course::printStep(2, "a source that does not compile: the program log");
    compileBroken(*target, verdict);

    // Step 3: each NVRTC call in turn. The program name ("saxpy.cu") is what logs call the source;
    // the options are strings, as on nvcc's command line.
    course::printStep(3, "kernels/saxpy.cu to PTX for compute_XX (nvrtcGetPTX)");
    std::printf("source: kernels/saxpy.cu (%zu bytes)\n", source->size());
    const std::string ptxArchitecture = target->ptxOption();
    const char* ptxOptions[] = {ptxArchitecture.c_str()};
    std::printf("options: %s\n", ptxArchitecture.c_str());
    nvrtcProgram program = nullptr;
    CHECK_NVRTC(nvrtcCreateProgram(&program, source->c_str(), "saxpy.cu", 0, nullptr, nullptr));
    const nvrtcResult compiled = nvrtcCompileProgram(program, 1, ptxOptions);
    lesson18::printLog("program log", lesson18::programLog(program));  // warnings too, even on success
    if (!verdict.check("saxpy.cu compiles", compiled == NVRTC_SUCCESS)) {
        CHECK_NVRTC(nvrtcDestroyProgram(&program));  // a failed compile still leaves a program to free
        return verdict.finish();
    }
    std::size_t ptxBytes = 0;
    CHECK_NVRTC(nvrtcGetPTXSize(program, &ptxBytes));  // counts the terminating NUL
    std::string ptx(ptxBytes, '\0');
    CHECK_NVRTC(nvrtcGetPTX(program, ptx.data()));
    std::size_t cubinBytesFromVirtual = 0;
    CHECK_NVRTC(nvrtcGetCUBINSize(program, &cubinBytesFromVirtual));
    CHECK_NVRTC(nvrtcDestroyProgram(&program));
    std::printf("PTX: %zu bytes, .version %s (the PTX ISA), .target %s\n", ptxBytes,
                ptxDirective(ptx, ".version").c_str(), ptxDirective(ptx, ".target").c_str());
    std::printf("CUBIN from the same compile: %zu bytes\n", cubinBytesFromVirtual);
    verdict.check("a virtual architecture gives PTX and no CUBIN", ptxBytes > 1 && cubinBytesFromVirtual == 0);

    // Step 4: the same source for sm_XX. NVRTC runs ptxas itself: the CUBIN is an ELF file.
    course::printStep(4, "the same source to a CUBIN for sm_XX (nvrtcGetCUBIN)");
    const lesson18::Compiled cubin =
        lesson18::compileSource(*source, "saxpy.cu", {target->cubinOption()}, lesson18::Output::Cubin);
    const bool elf = cubin.image.size() > 4 && cubin.image.compare(0, 4, "\177ELF") == 0;
    std::printf("options: %s\n", target->cubinOption().c_str());
    std::printf("CUBIN: %zu bytes, an ELF file: %s\n", cubin.image.size(), elf ? "yes" : "NO");
    if (!verdict.check("a real architecture gives a CUBIN", cubin.result == NVRTC_SUCCESS && elf))
        return verdict.finish();

    // Step 5: a library belongs to no context: it loads before any context exists. Its kernels run
    // in the context of the stream they are launched on, or, on the NULL stream, in the context
    // current at the launch. A module needs a current context. cuLibraryLoadData is in CUDA 12.4's
    // cuda.h, not in 11.8's; the driver version 12.0 below is NVIDIA's release notes', not the
    // header's.
    course::printStep(5, "the CUBIN as a library, before any context (cuLibraryLoadData)");
    CUcontext current = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    std::printf("current context: %s\n", current == nullptr ? "none" : "one (unexpected)");
    CUmodule orphan = nullptr;
    const CUresult withoutContext = REPORT_DRIVER(cuModuleLoadData(&orphan, cubin.image.data()));
    std::printf("cuModuleLoadData without a context: %s\n", course::driverErrorName(withoutContext));
    if (withoutContext == CUDA_SUCCESS) CHECK_DRIVER(cuModuleUnload(orphan));
    verdict.check("a module needs a current context", withoutContext == CUDA_ERROR_INVALID_CONTEXT);
    bool haveLibrary = false;
#if CUDA_VERSION >= 12000
    CUlibrary library = nullptr;
    CUkernel libraryKernel = nullptr;
    haveLibrary = driverVersion >= 12000 && target->cubinRuns;
    if (haveLibrary) {
        // The current context, asked right before and right after the load: no context may have
        // become current since the module's attempt above.
        CUcontext before = nullptr;
        CUcontext after = nullptr;
        CHECK_DRIVER(cuCtxGetCurrent(&before));
        CHECK_DRIVER(cuLibraryLoadData(&library, cubin.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
        CHECK_DRIVER(cuCtxGetCurrent(&after));
        CHECK_DRIVER(cuLibraryGetKernel(&libraryKernel, library, "saxpy"));
        std::printf("cuLibraryLoadData: CUDA_SUCCESS\n");
        std::printf("current context before and after cuLibraryLoadData: %s, %s\n", before == nullptr ? "none" : "one",
                    after == nullptr ? "none" : "one");
        verdict.check("a library loads with no context current",
                      before == nullptr && after == nullptr && library != nullptr);
    }
#endif
    if (!haveLibrary)
        std::printf(
            "section library: SKIP (no cuLibraryLoadData in these headers or this driver, or no CUBIN "
            "this GPU runs)\n");

    // Step 6: the primary context; the PTX loaded into it, which the driver's JIT compiles for this
    // GPU (at the load with eager loading, when saxpy is first needed with lazy loading).
    course::printStep(6, "the primary context: the PTX as a module (driver JIT), both kernels run");
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CUfunction fromPtx = nullptr;
    const CUresult jitted = REPORT_DRIVER(cuModuleLoadData(&module, ptx.c_str()));
    if (lesson18::ptxRefusal(jitted) != nullptr) {  // cuda.h's meaning of the result, printed
        std::printf("section PTX: SKIP (%s: %s)\n", course::driverErrorName(jitted), lesson18::ptxRefusal(jitted));
        module = nullptr;
    } else {
        CHECK_DRIVER(jitted);
        CHECK_DRIVER(cuModuleGetFunction(&fromPtx, module, "saxpy"));
        printFunction("saxpy from the PTX", fromPtx);
        verdict.check("the PTX kernel computes saxpy exactly", lesson18::saxpyExact(fromPtx));
    }
#if CUDA_VERSION >= 12000
    if (haveLibrary) {
        CUfunction fromCubin = nullptr;  // the kernel as a function of this context, for its attributes
        CHECK_DRIVER(cuKernelGetFunction(&fromCubin, libraryKernel));
        printFunction("saxpy from the CUBIN", fromCubin);
        // That function lies in the library's module for the current context (cuLibraryGetModule),
        // not in the PTX's module, though both hold a saxpy.
        CUmodule libraryModule = nullptr;
        CUmodule owner = nullptr;
        CHECK_DRIVER(cuLibraryGetModule(&libraryModule, library));
        CHECK_DRIVER(cuFuncGetModule(&owner, fromCubin));
        std::printf("saxpy from the CUBIN lies in the library's module of this context: %s\n",
                    owner == libraryModule ? "yes" : "NO");
        verdict.check("the CUBIN kernel's function lies in the library's module", owner == libraryModule);
        // A CUkernel is launched as a CUfunction; saxpyExact launches on the NULL stream, so it runs
        // in the current context.
        verdict.check("the CUBIN kernel computes saxpy exactly",
                      lesson18::saxpyExact(reinterpret_cast<CUfunction>(libraryKernel)));
    }
#endif

    course::printStep(7, "a library's __device__ array: its memory in this context, and back");
#if CUDA_VERSION >= 12000
    if (haveLibrary) libraryMemoryComesBack(*target, verdict);
#endif
    if (!haveLibrary) std::printf("section library memory: SKIP (as section library above)\n");

    course::printStep(8, "release everything, newest first");
    if (module != nullptr) CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
#if CUDA_VERSION >= 12000
    if (haveLibrary) CHECK_DRIVER(cuLibraryUnload(library));
#endif
    std::printf("released: the module, the primary context, the library\n");
    return verdict.finish();
}
