// Lesson 06, program 4 of 6 — the JIT: its options, its logs, its refusals, and cuLink.
//
// When the driver gets PTX it compiles it with its own ptxas (the JIT). Options passed with
// the load give that compiler's logs and timings; the error log is what makes a PTX failure
// debuggable. This program reads the logs of a good load, breaks a PTX on purpose, feeds the
// JIT PTX from a future toolkit, and links two PTX files into one cubin at run time.
//
//   jit_and_link [--device N]
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "driver_env.h"
#include "jit_options.h"

namespace {

using lesson06::JitOptions;

// Prints a log under a label, each of its lines indented with "  | ".
void printLog(const char* label, const char* text, unsigned int bytes) {
    std::printf("%s: %u bytes\n", label, bytes);
    const std::string log(text);
    for (std::size_t start = 0; start < log.size();) {
        std::size_t end = log.find('\n', start);
        if (end == std::string::npos) end = log.size();
        std::printf("  | %s\n", log.substr(start, end - start).c_str());
        start = end + 1;
    }
}

// An unexpected JIT failure: the error log first, then the failed check and the end of the
// program. CHECK_DRIVER would exit inside the failing call, before anyone could read what the
// compiler said.
[[noreturn]] void failAfterLog(const char* label, const JitOptions& jit, course::Verdict& verdict, const char* check) {
    printLog(label, jit.errorLog.data(), jit.errorBytes());
    verdict.check(check, false);
    std::exit(verdict.finish());
}

// The SM the JIT compiled for, as its info log says ("... for 'sm_90a'"): with
// CU_JIT_TARGET_FROM_CUCONTEXT the target comes from the context's GPU; on the H200 of the
// README's captured run the log named the architecture-specific sm_90a, not plain sm_90.
std::string jitTarget(const std::string& infoLog) {
    const std::size_t at = infoLog.find(" for 'sm_");
    if (at == std::string::npos) return "(not in the info log)";
    const std::size_t from = at + 6;
    return infoLog.substr(from, infoLog.find('\'', from) - from);
}

// The 1-based line of `text` on which `needle` first appears (0 if it does not).
int lineOf(const std::string& text, const std::string& needle) {
    const std::size_t at = text.find(needle);
    if (at == std::string::npos) return 0;
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

// A hand-written PTX kernel (it doubles one float) with one typo: `mull` is not a PTX
// instruction. The raw string starts with `.version`, so its line numbers are the JIT's.
constexpr const char* kBrokenPtx = R"(.version 7.0
.target sm_75
.address_size 64

.visible .entry doubleIt(.param .u64 data)
{
    .reg .b64 %rd<2>;
    .reg .f32 %f<3>;
    ld.param.u64 %rd1, [data];
    cvta.to.global.u64 %rd1, %rd1;
    ld.global.f32 %f1, [%rd1];
    mull.f32 %f2, %f1, 0f40000000;
    st.global.f32 [%rd1], %f2;
    ret;
}
)";

// The section's SKIP line when the driver refused to compile PTX at all.
bool jitDisabled(CUresult result, const char* section) {
    if (result != CUDA_ERROR_JIT_COMPILATION_DISABLED) return false;
    std::printf("section %s: SKIP (the driver refused the PTX with %s: CUDA_DISABLE_PTX_JIT is set)\n", section,
                course::driverErrorName(result));
    return true;
}

// Step 5: link_main.ptx (from memory) and link_helper.ptx (from its file) into one cubin, load
// it, run applyLinked on x.
void linkAndRun(std::string& mainPtx, const std::string& helperPath, CUdeviceptr x, CUdeviceptr y,
                const std::vector<float>& hostX, course::Verdict& verdict) {
    // cuda.h: optionValues must remain valid for the life of the CUlinkState, not only until
    // cuLinkComplete. `jit` is declared first, so it outlives the link state on every path.
    JitOptions jit;
    CUlinkState link = nullptr;
    CHECK_DRIVER(cuLinkCreate(jit.count(), jit.names.data(), jit.values.data(), &link));
    // PTX inputs must be NUL-terminated; the size given includes the terminator. The JIT
    // compiles each PTX input as it is added, so a PTX error shows up there. cuLinkAddFile reads
    // a file itself ("equivalent to invoking cuLinkAddData on the contents of the file").
    CUresult linked = REPORT_DRIVER(cuLinkAddData(link, CU_JIT_INPUT_PTX, mainPtx.data(), mainPtx.size() + 1,
                                                  "link_main.ptx", 0, nullptr, nullptr));
    if (linked == CUDA_SUCCESS)
        linked = REPORT_DRIVER(cuLinkAddFile(link, CU_JIT_INPUT_PTX, helperPath.c_str(), 0, nullptr, nullptr));
    void* linkedCubin = nullptr;
    std::size_t linkedBytes = 0;
    if (linked == CUDA_SUCCESS) linked = REPORT_DRIVER(cuLinkComplete(link, &linkedCubin, &linkedBytes));
    if (jitDisabled(linked, "cuLink")) {
        CHECK_DRIVER(cuLinkDestroy(link));
        return;
    }
    if (linked != CUDA_SUCCESS) failAfterLog("link error log", jit, verdict, "cuLink links the two PTX files");
    verdict.check("cuLink links the two PTX files", true);
    // The image and its size, as cuLinkComplete gives them: a cubin is an ELF file, whose 64-byte
    // header (ELF64) starts with 0x7f 'E' 'L' 'F'.
    const bool elf = linkedBytes >= 64 && std::memcmp(linkedCubin, "\177ELF", 4) == 0;
    std::printf("linked image: an ELF file of %zu bytes: %s\n", linkedBytes, elf ? "yes" : "NO");
    verdict.check("cuLinkComplete gives an ELF image and its size", elf);
    // The cubin belongs to the link state and dies with it: load it first.
    CUmodule linkedModule = nullptr;
    CHECK_DRIVER(cuModuleLoadData(&linkedModule, linkedCubin));
    CHECK_DRIVER(cuLinkDestroy(link));
    std::printf("linked cubin: %zu bytes, loaded before cuLinkDestroy\n", linkedBytes);
    std::printf("link wall time: %.3f ms\n", jit.wallMilliseconds());
    printLog("link info log", jit.infoLog.data(), jit.infoBytes());

    CUfunction applyLinked = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&applyLinked, linkedModule, "applyLinked"));
    int count = static_cast<int>(hostX.size());
    void* params[] = {&x, &y, &count};
    CHECK_DRIVER(cuLaunchKernel(applyLinked, (count + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    CHECK_DRIVER(cuCtxSynchronize());
    std::vector<float> result(hostX.size());
    CHECK_DRIVER(cuMemcpyDtoH(result.data(), y, result.size() * sizeof(float)));
    int wrong = 0;
    for (int i = 0; i < count; ++i) wrong += result[i] != 2.0f * hostX[i] + 1.0f;
    std::printf("linked kernel applyLinked (2x + 1): %s\n", wrong == 0 ? "exact" : "WRONG");
    verdict.check("linked kernel exact", wrong == 0);
    CHECK_DRIVER(cuModuleUnload(linkedModule));
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;

    // Step 1: the PTX files sit next to the executable (kernels/), found through /proc/self/exe.
    course::printStep(1, "find the PTX files");
    const std::optional<std::string> ptxImage = course::readFile(course::kernelPath("vector_ops.ptx"));
    // cuLinkAddData takes a non-const pointer, so link_main's text stays modifiable; cuLinkAddFile
    // reads link_helper.ptx itself (read here only to find it before cuInit).
    std::optional<std::string> linkMainPtx = course::readFile(course::kernelPath("link_main.ptx"));
    const std::string linkHelperPath = course::kernelPath("link_helper.ptx");
    const std::optional<std::string> linkHelperPtx = course::readFile(linkHelperPath);
    if (!ptxImage || !linkMainPtx || !linkHelperPtx) {
        std::fprintf(stderr, "The lesson's module files are built next to its programs: run make build-06.\n");
        return EXIT_FAILURE;
    }
    std::printf("module file: kernels/vector_ops.ptx (%zu bytes)\n", ptxImage->size());
    std::printf("module file: kernels/link_main.ptx (%zu bytes)\n", linkMainPtx->size());
    std::printf("module file: kernels/link_helper.ptx (%zu bytes)\n", linkHelperPtx->size());

    // Step 2: CUDA_CACHE_DISABLE=1 turns off the JIT cache (~/.nv/ComputeCache), so every run
    // really compiles and its logs are the same each time. The driver reads it in cuInit, so it
    // is set before, and only where the user has not chosen: applications keep the cache on,
    // it is what makes their second start fast. With the cache on, a load can be a cache hit:
    // no compilation, an empty info log.
    course::printStep(2, "driver, device and the primary context");
    lesson06::disableJitCacheUnlessChosen();
    lesson06::printDriverEnvironment();
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    std::vector<float> hostX(1027);
    for (std::size_t i = 0; i < hostX.size(); ++i) hostX[i] = static_cast<float>(i) * 0.5f;
    CUdeviceptr x = 0;
    CUdeviceptr y = 0;
    CHECK_DRIVER(cuMemAlloc(&x, hostX.size() * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&y, hostX.size() * sizeof(float)));
    CHECK_DRIVER(cuMemcpyHtoD(x, hostX.data(), hostX.size() * sizeof(float)));
    course::Verdict verdict;

    // Step 3: cuModuleLoadDataEx: PTX with JIT options. Use it whenever you load PTX: the logs
    // are the only place that says what the compiler did, or why it failed.
    course::printStep(3, "JIT-compile PTX with options: logs, wall time, target");
    {
        JitOptions jit;
        CUmodule jitModule = nullptr;
        const CUresult loaded = REPORT_DRIVER(
            cuModuleLoadDataEx(&jitModule, ptxImage->c_str(), jit.count(), jit.names.data(), jit.values.data()));
        if (!jitDisabled(loaded, "JIT options")) {
            if (loaded != CUDA_SUCCESS) failAfterLog("JIT error log", jit, verdict, "JIT compiles the PTX");
            verdict.check("JIT compiles the PTX", true);
            CUfunction vectorAdd = nullptr;
            CHECK_DRIVER(cuModuleGetFunction(&vectorAdd, jitModule, "vectorAdd"));
            int registers = 0;
            CHECK_DRIVER(cuFuncGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS, vectorAdd));
            std::printf("cuModuleLoadDataEx(kernels/vector_ops.ptx): compiled for %s\n",
                        jitTarget(jit.infoLog.data()).c_str());
            std::printf("vectorAdd registers per thread: %d\n", registers);
            std::printf("JIT wall time: %.3f ms\n", jit.wallMilliseconds());
            printLog("JIT info log", jit.infoLog.data(), jit.infoBytes());
            if (jit.infoBytes() == 0) std::printf("JIT info log empty: the module came from the JIT cache\n");
            CHECK_DRIVER(cuModuleUnload(jitModule));
        }
    }

    // Step 4: PTX the JIT cannot compile. The load fails with CUDA_ERROR_INVALID_PTX and the
    // error log names the PTX line. Then PTX newer than the driver: refused whole.
    course::printStep(4, "PTX the JIT refuses: a typo, and a version from the future");
    {
        const int offendingLine = lineOf(kBrokenPtx, "mull.f32");
        std::printf("broken PTX offending line: %d\n", offendingLine);
        JitOptions jit;
        CUmodule brokenModule = nullptr;
        const CUresult broken = REPORT_DRIVER(
            cuModuleLoadDataEx(&brokenModule, kBrokenPtx, jit.count(), jit.names.data(), jit.values.data()));
        if (!jitDisabled(broken, "broken PTX")) {
            std::printf("cuModuleLoadDataEx(broken PTX): %s\n", course::driverErrorName(broken));
            printLog("JIT error log", jit.errorLog.data(), jit.errorBytes());
            const std::string errorLog(jit.errorLog.data());
            const bool namesLine = errorLog.find("line " + std::to_string(offendingLine)) != std::string::npos;
            std::printf("error log names line %d: %s\n", offendingLine, namesLine ? "yes" : "NO");
            if (broken == CUDA_SUCCESS) CHECK_DRIVER(cuModuleUnload(brokenModule));
            verdict.check("broken PTX refused as invalid PTX", broken == CUDA_ERROR_INVALID_PTX);
            verdict.check("error log names the offending line", namesLine);
        }
        // The same kernel, typo fixed, declaring a PTX ISA from the future: what a driver meets
        // when the PTX comes from a toolkit newer than itself.
        std::string futurePtx = kBrokenPtx;
        futurePtx.replace(futurePtx.find(".version 7.0"), 12, ".version 99.9");
        futurePtx.replace(futurePtx.find("mull.f32"), 8, "mul.f32");
        CUmodule futureModule = nullptr;
        const CUresult future = REPORT_DRIVER(cuModuleLoadData(&futureModule, futurePtx.c_str()));
        if (!jitDisabled(future, "PTX from the future")) {
            std::printf("cuModuleLoadData(PTX .version 99.9): %s\n", course::driverErrorName(future));
            if (future == CUDA_SUCCESS) CHECK_DRIVER(cuModuleUnload(futureModule));
            verdict.check("PTX from the future refused as unsupported", future == CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
        }
    }

    // Step 5: run-time linking. link_main.ptx calls linkedTransform, which only link_helper.ptx
    // defines. Loaded alone, the call cannot be resolved; cuLink* compiles both as relocatable
    // code and links them into one cubin, as nvlink does offline.
    course::printStep(5, "link two PTX files with cuLink");
    {
        JitOptions jit;
        CUmodule aloneModule = nullptr;
        const CUresult alone = REPORT_DRIVER(
            cuModuleLoadDataEx(&aloneModule, linkMainPtx->c_str(), jit.count(), jit.names.data(), jit.values.data()));
        if (!jitDisabled(alone, "PTX with an unresolved call")) {
            std::printf("cuModuleLoadDataEx(link_main.ptx alone): %s\n", course::driverErrorName(alone));
            printLog("JIT error log", jit.errorLog.data(), jit.errorBytes());
            if (alone == CUDA_SUCCESS) CHECK_DRIVER(cuModuleUnload(aloneModule));
            // cuda.h names no code for this refusal: any of the three that say the image could
            // not become code (jit_options.h) is accepted, and the one the driver chose is printed.
            const bool asImageError = lesson06::refusedForTheImage(alone);
            std::printf("refused with a code cuda.h lists for an image that cannot load: %s\n",
                        asImageError ? "yes" : "NO");
            verdict.check("unresolved call refused as an image error", asImageError);
        }
    }
    linkAndRun(*linkMainPtx, linkHelperPath, x, y, hostX, verdict);

    // Step 6: release in reverse order of creation.
    course::printStep(6, "release and check");
    CHECK_DRIVER(cuMemFree(y));
    CHECK_DRIVER(cuMemFree(x));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: 2 buffers, the primary context\n");
    return verdict.finish();
}
