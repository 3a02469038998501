// Lesson 06 — modules and kernel launch.
//
// Device code reaches the driver as a module: PTX text (compiled by the driver's JIT),
// a cubin (SASS for one GPU family) or a fatbin (several cubins plus PTX). This lesson
// loads the same kernels four ways, reads the JIT's logs, breaks a PTX on purpose, links
// two PTX files at run time, writes a module global from the host, and launches kernels
// with both argument styles of cuLaunchKernel: an array of pointers and one packed buffer.
//
//   06-module-and-launch [--device N]           the lesson (a few seconds)
//   06-module-and-launch [--device N] --bench   also: vector-add bandwidth, launch cost,
//                                               module load times
#include <cuda.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "param_buffer.h"
#include "param_types.h"
#include "runtime_launch.h"
#include "../common/check_driver.h"
#include "../common/course_util.h"

// The SM that kernels/*.cubin was built for: lesson.mk passes the Makefile's CUBIN_ARCH.
#ifndef LESSON06_CUBIN_ARCH
#define LESSON06_CUBIN_ARCH 90
#endif

namespace {

using Clock = std::chrono::steady_clock;

double microsecondsBetween(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::micro>(to - from).count();
}

// The JIT options this lesson passes when the driver compiles or links PTX. Each option
// has a slot in `values`: IN values are set here, OUT values are written there by the
// driver (a log size as unsigned int, the wall time as float, in the slot's first bytes).
struct JitOptions {
    static constexpr unsigned int kLogBytes = 16384;
    JitOptions() = default;
    JitOptions(const JitOptions&) = delete;  // `values` points into this object's own buffers
    JitOptions& operator=(const JitOptions&) = delete;

    std::vector<char> infoLog = std::vector<char>(kLogBytes, '\0');
    std::vector<char> errorLog = std::vector<char>(kLogBytes, '\0');
    std::array<CUjit_option, 7> names = {
        CU_JIT_INFO_LOG_BUFFER,              // char*: informational messages (ptxas info ...)
        CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,   // IN: buffer size; OUT: bytes written
        CU_JIT_ERROR_LOG_BUFFER,             // char*: errors, with the PTX line they are on
        CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,  // IN: buffer size; OUT: bytes written
        CU_JIT_LOG_VERBOSE,                  // int 1: registers, spills, stack per function
        CU_JIT_WALL_TIME,                    // OUT: float milliseconds spent compiling and linking
        CU_JIT_TARGET_FROM_CUCONTEXT,        // no value: compile for the current context's GPU
    };
    std::array<void*, 7> values = {
        infoLog.data(),
        reinterpret_cast<void*>(std::uintptr_t{kLogBytes}),
        errorLog.data(),
        reinterpret_cast<void*>(std::uintptr_t{kLogBytes}),
        reinterpret_cast<void*>(std::uintptr_t{1}),
        nullptr,
        nullptr,
    };

    unsigned int count() const { return static_cast<unsigned int>(names.size()); }
    template <class T>
    T outValue(std::size_t index) const {
        T value{};
        std::memcpy(&value, &values[index], sizeof(T));
        return value;
    }
    unsigned int infoBytes() const { return outValue<unsigned int>(1); }
    unsigned int errorBytes() const { return outValue<unsigned int>(3); }
    float wallMilliseconds() const { return outValue<float>(5); }
};

// Prints a log under a label, each of its lines indented with "  | ".
void printLog(const char* label, const char* text, unsigned int bytes) {
    std::printf("%s: %u bytes\n", label, bytes);
    const std::string log(text);
    std::size_t start = 0;
    while (start < log.size()) {
        std::size_t end = log.find('\n', start);
        if (end == std::string::npos) end = log.size();
        std::printf("  | %s\n", log.substr(start, end - start).c_str());
        start = end + 1;
    }
}

// The 1-based line of `text` on which `needle` first appears (0 if it does not).
int lineOf(const std::string& text, const std::string& needle) {
    const std::size_t at = text.find(needle);
    if (at == std::string::npos) return 0;
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

double median(std::vector<double> samples) {
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
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

// --bench: vector add on 256 Mi floats (3 arrays of 1 GiB), timed with events.
// Effective bandwidth counts what the kernel must move: 2 arrays read + 1 written.
bool benchVectorAdd(CUfunction vectorAdd, int gridBlocks, int blockThreads) {
    constexpr unsigned long long kCount = 256ull << 20;
    constexpr std::size_t kBytes = kCount * sizeof(float);
    constexpr int kWarmUp = 3;
    constexpr int kTimed = 20;
    constexpr double kReferenceGBs = 2980.0;  // H100 SXM: nvbandwidth device_local_copy, read + write

    std::size_t freeBytes = 0;
    std::size_t totalBytes = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &totalBytes));
    if (freeBytes < 3 * kBytes + (std::size_t{256} << 20)) {
        std::printf("section vector add bench: SKIP (needs 3 GiB + 256 MiB free, the device has %zu MiB)\n",
                    freeBytes >> 20);
        return true;
    }
    CUdeviceptr a = 0;
    CUdeviceptr b = 0;
    CUdeviceptr c = 0;
    CHECK_DRIVER(cuMemAlloc(&a, kBytes));
    CHECK_DRIVER(cuMemAlloc(&b, kBytes));
    CHECK_DRIVER(cuMemAlloc(&c, kBytes));
    // cuMemsetD32 fills 32-bit words: the bit patterns of 1.0f and 2.0f.
    CHECK_DRIVER(cuMemsetD32(a, std::bit_cast<unsigned int>(1.0f), kCount));
    CHECK_DRIVER(cuMemsetD32(b, std::bit_cast<unsigned int>(2.0f), kCount));
    CHECK_DRIVER(cuMemsetD32(c, 0, kCount));
    CUevent start = nullptr;
    CUevent stop = nullptr;
    CHECK_DRIVER(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuEventCreate(&stop, CU_EVENT_DEFAULT));

    unsigned long long count = kCount;
    void* params[] = {&a, &b, &c, &count};
    for (int i = 0; i < kWarmUp; ++i)
        CHECK_DRIVER(cuLaunchKernel(vectorAdd, gridBlocks, 1, 1, blockThreads, 1, 1, 0, nullptr, params, nullptr));
    CHECK_DRIVER(cuEventRecord(start, nullptr));
    for (int i = 0; i < kTimed; ++i)
        CHECK_DRIVER(cuLaunchKernel(vectorAdd, gridBlocks, 1, 1, blockThreads, 1, 1, 0, nullptr, params, nullptr));
    CHECK_DRIVER(cuEventRecord(stop, nullptr));
    CHECK_DRIVER(cuEventSynchronize(stop));
    float milliseconds = 0.0f;
    CHECK_DRIVER(cuEventElapsedTime(&milliseconds, start, stop));
    const double secondsPerKernel = milliseconds / 1e3 / kTimed;
    const double gbPerSecond = 3.0 * static_cast<double>(kBytes) / secondsPerKernel / 1e9;
    std::printf("vector add launch shape: %d blocks x %d threads, %d timed launches\n", gridBlocks, blockThreads,
                kTimed);
    std::printf("bench: vector add 256 Mi floats = %.1f GB/s\n", gbPerSecond);
    std::printf("bench: vector add share of 2980 GB/s (H100 reference) = %.1f %%\n",
                100.0 * gbPerSecond / kReferenceGBs);

    std::vector<float> result(kCount);
    CHECK_DRIVER(cuMemcpyDtoH(result.data(), c, kBytes));
    const bool exact = std::all_of(result.begin(), result.end(), [](float v) { return v == 3.0f; });
    std::printf("vector add 256 Mi floats result: %s\n", exact ? "exact" : "WRONG");

    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    CHECK_DRIVER(cuMemFree(c));
    CHECK_DRIVER(cuMemFree(b));
    CHECK_DRIVER(cuMemFree(a));
    return exact;
}

// --bench: host time per launch of the empty kernel, driver API against runtime <<<>>>.
// Both sides queue many launches and wait once at the end, on the same context and stream.
bool benchLaunchCost(CUfunction emptyKernel, CUcontext context, int deviceOrdinal) {
    constexpr int kWarmUp = 1000;
    constexpr int kLaunches = 10000;
    for (int i = 0; i < kWarmUp; ++i)
        CHECK_DRIVER(cuLaunchKernel(emptyKernel, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
    CHECK_DRIVER(cuCtxSynchronize());
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < kLaunches; ++i)
        CHECK_DRIVER(cuLaunchKernel(emptyKernel, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
    CHECK_DRIVER(cuCtxSynchronize());
    const double driverMicroseconds = microsecondsBetween(start, Clock::now()) / kLaunches;

    const double runtimeMicroseconds = lesson06::runtimeEmptyLaunchMicroseconds(deviceOrdinal, kWarmUp, kLaunches);
    if (runtimeMicroseconds < 0.0) return false;
    // The runtime adopted the current primary context instead of making its own.
    CUcontext current = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    const bool shared = current == context;
    std::printf("runtime used the lesson's primary context: %s\n", shared ? "yes" : "NO");
    std::printf("bench: cuLaunchKernel empty kernel = %.2f µs\n", driverMicroseconds);
    std::printf("bench: runtime <<<>>> empty kernel = %.2f µs\n", runtimeMicroseconds);
    std::printf("bench: launch cost driver / runtime = %.2f x\n", driverMicroseconds / runtimeMicroseconds);
    return shared;
}

// --bench: cuModuleLoadData time for each format, median of several loads (each unloaded).
// PTX is compiled by the JIT every time because main() disabled the JIT cache.
void benchModuleLoad(const char* format, const std::string& image) {
    constexpr int kLoads = 7;
    std::vector<double> samples;
    for (int i = 0; i < kLoads; ++i) {
        CUmodule module = nullptr;
        const Clock::time_point start = Clock::now();
        CHECK_DRIVER(cuModuleLoadData(&module, image.data()));
        samples.push_back(microsecondsBetween(start, Clock::now()) / 1e3);
        CHECK_DRIVER(cuModuleUnload(module));
    }
    std::printf("bench: module load %s = %.3f ms\n", format, median(samples));
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const bool bench = args.has("--bench");
    const int ordinal = args.deviceOrdinal();

    // Step 1: the module files sit next to the executable (build/06-module-and-launch/kernels/),
    // found through /proc/self/exe, so the program works from any working directory. They are
    // read now: a missing one is reported with its full path before any driver work.
    course::printStep(1, "find the module files");
    const std::string fatbinPath = course::kernelPath("vector_ops.fatbin");
    const std::optional<std::string> fatbinImage = course::readFile(fatbinPath);
    const std::optional<std::string> cubinImage = course::readFile(course::kernelPath("vector_ops.cubin"));
    const std::optional<std::string> ptxImage = course::readFile(course::kernelPath("vector_ops.ptx"));
    // cuLinkAddData takes a non-const pointer, so these two stay modifiable.
    std::optional<std::string> linkMainPtx = course::readFile(course::kernelPath("link_main.ptx"));
    std::optional<std::string> linkHelperPtx = course::readFile(course::kernelPath("link_helper.ptx"));
    if (!fatbinImage || !cubinImage || !ptxImage || !linkMainPtx || !linkHelperPtx) {
        std::fprintf(stderr, "The lesson's module files are built next to its executable: run make build-06.\n");
        return EXIT_FAILURE;
    }
    std::printf("module file: kernels/vector_ops.fatbin (%zu bytes)\n", fatbinImage->size());
    std::printf("module file: kernels/vector_ops.cubin (%zu bytes)\n", cubinImage->size());
    std::printf("module file: kernels/vector_ops.ptx (%zu bytes)\n", ptxImage->size());
    std::printf("module file: kernels/link_main.ptx (%zu bytes)\n", linkMainPtx->size());
    std::printf("module file: kernels/link_helper.ptx (%zu bytes)\n", linkHelperPtx->size());

    // Step 2: the driver reads its environment once, in cuInit, so variables that steer it
    // must be set before. CUDA_CACHE_DISABLE=1 turns off the JIT cache (~/.nv/ComputeCache):
    // every run then really compiles the PTX, and its logs and timings are the same each time.
    // Applications keep the cache on; it is what makes their second start fast.
    // --bench also asks for eager loading, so that a timed module load does all its work.
    course::printStep(2, "driver, device and the primary context");
    setenv("CUDA_CACHE_DISABLE", "1", 1);
    if (bench) setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    const char* loadingEnv = std::getenv("CUDA_MODULE_LOADING");
    std::printf("CUDA_CACHE_DISABLE: 1 (set by the program before cuInit)\n");
    std::printf("CUDA_MODULE_LOADING: %s\n", loadingEnv != nullptr ? loadingEnv : "(not set)");
    CHECK_DRIVER(cuInit(0));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("driver CUDA version: %s\n", course::formatCudaVersion(driverVersion).c_str());

    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    int ccMajor = 0;
    int ccMinor = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&ccMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&ccMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
    std::printf("device %d name: %s\n", ordinal, name);
    std::printf("device %d compute capability: %d.%d\n", ordinal, ccMajor, ccMinor);

    // The primary context is the one the CUDA runtime uses; working in it lets --bench
    // compare with <<<>>> launches in one shared context. Retaining it does not make it
    // current (a mistake in the seed notes): cuCtxSetCurrent does.
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    std::printf("primary context: retained and current\n");

    // Lazy loading (default since CUDA 12.2): a module's kernels are loaded onto the GPU
    // only when first needed. Step 10 shows what that does to the first launch.
    const char* loadingMode = "unknown (cuModuleGetLoadingMode needs CUDA 11.7)";
#if CUDA_VERSION >= 11070
    if (driverVersion >= 11070) {
        CUmoduleLoadingMode mode{};
        CHECK_DRIVER(cuModuleGetLoadingMode(&mode));
        loadingMode = mode == CU_MODULE_LAZY_LOADING ? "LAZY" : "EAGER";
    }
#endif
    std::printf("module loading mode: %s\n", loadingMode);

    // Step 3: way 1, cuModuleLoad from a file. The fatbin is the format to ship: the driver
    // takes the SASS built for this GPU, or JIT-compiles the PTX inside for a newer one.
    // A module belongs to the context that is current when it is loaded.
    course::printStep(3, "load a module from a file, get functions, pick a launch shape");
    CUmodule fileModule = nullptr;
    CHECK_DRIVER(cuModuleLoad(&fileModule, fatbinPath.c_str()));
    std::printf("cuModuleLoad(kernels/vector_ops.fatbin): loaded\n");
    CUfunction vectorAdd = nullptr;
    CUfunction saxpy = nullptr;
    CUfunction scaleByGlobal = nullptr;
    CUfunction echoParams = nullptr;
    CUfunction emptyKernel = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&vectorAdd, fileModule, "vectorAdd"));
    CHECK_DRIVER(cuModuleGetFunction(&saxpy, fileModule, "saxpy"));
    CHECK_DRIVER(cuModuleGetFunction(&scaleByGlobal, fileModule, "scaleByGlobal"));
    CHECK_DRIVER(cuModuleGetFunction(&echoParams, fileModule, "echoParams"));
    CHECK_DRIVER(cuModuleGetFunction(&emptyKernel, fileModule, "emptyKernel"));

    int registers = 0;
    int maxThreads = 0;
    CHECK_DRIVER(cuFuncGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS, vectorAdd));
    CHECK_DRIVER(cuFuncGetAttribute(&maxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, vectorAdd));
    std::printf("vectorAdd registers per thread: %d\n", registers);
    std::printf("vectorAdd max threads per block: %d\n", maxThreads);
    // The block size that gives the most resident threads per SM for this kernel, and the
    // number of such blocks that fills every SM once: all a grid-stride kernel needs.
    int fillGridBlocks = 0;
    int blockThreads = 0;
    CHECK_DRIVER(cuOccupancyMaxPotentialBlockSize(&fillGridBlocks, &blockThreads, vectorAdd, nullptr, 0, 0));
    std::printf("occupancy: %d threads per block, %d blocks fill the GPU\n", blockThreads, fillGridBlocks);

    // 1 Mi + 3 elements: the float4 loop covers 1 Mi, the scalar tail the last 3.
    constexpr int kCount = (1 << 20) + 3;
    constexpr std::size_t kBytes = kCount * sizeof(float);
    const int quadBlocks = (kCount / 4 + blockThreads - 1) / blockThreads;
    const int gridBlocks = std::min(fillGridBlocks, quadBlocks);
    std::printf("vectorAdd launch shape: %d blocks x %d threads for %d elements\n", gridBlocks, blockThreads, kCount);

    std::vector<float> hostX(kCount);
    std::vector<float> hostY(kCount);
    for (int i = 0; i < kCount; ++i) {
        hostX[i] = static_cast<float>(i) * 0.25f;
        hostY[i] = 1.0f / static_cast<float>(1 + i % 13);
    }
    CUdeviceptr x = 0;
    CUdeviceptr y = 0;
    CUdeviceptr z = 0;
    CHECK_DRIVER(cuMemAlloc(&x, kBytes));
    CHECK_DRIVER(cuMemAlloc(&y, kBytes));
    CHECK_DRIVER(cuMemAlloc(&z, kBytes));
    CHECK_DRIVER(cuMemcpyHtoD(x, hostX.data(), kBytes));
    CHECK_DRIVER(cuMemcpyHtoD(y, hostY.data(), kBytes));

    // z = x + y through any vectorAdd handle; the host computes the same float additions,
    // so the sums must be bit-for-bit equal.
    std::vector<float> hostZ(kCount);
    auto vectorAddIsExact = [&](CUfunction function, const char* how) {
        unsigned long long count = kCount;
        void* params[] = {&x, &y, &z, &count};
        CHECK_DRIVER(cuMemsetD32(z, 0, kCount));
        CHECK_DRIVER(cuLaunchKernel(function, gridBlocks, 1, 1, blockThreads, 1, 1, 0, nullptr, params, nullptr));
        CHECK_DRIVER(cuCtxSynchronize());
        CHECK_DRIVER(cuMemcpyDtoH(hostZ.data(), z, kBytes));
        int wrong = 0;
        for (int i = 0; i < kCount; ++i) wrong += hostZ[i] != hostX[i] + hostY[i];
        std::printf("vector add via %s: %s\n", how, wrong == 0 ? "exact" : "WRONG");
        return wrong == 0;
    };
    bool pass = vectorAddIsExact(vectorAdd, "cuModuleLoad (fatbin file)");

    // Step 4: the same kernels, loaded three more ways; each is checked, then unloaded.
    course::printStep(4, "three more ways to load the same kernels");
    // Way 2, cuModuleLoadData: an image already in memory (read from a file here; embedded
    // in the executable, downloaded or decrypted in real deployments). A cubin holds SASS
    // for one SM family: sm_XY runs on compute capability X.Y and X.(Y+1..), nothing else.
    constexpr int kCubinArch = LESSON06_CUBIN_ARCH;
    if (ccMajor == kCubinArch / 10 && ccMinor >= kCubinArch % 10) {
        CUmodule imageModule = nullptr;
        CHECK_DRIVER(cuModuleLoadData(&imageModule, cubinImage->data()));
        CUfunction imageVectorAdd = nullptr;
        CHECK_DRIVER(cuModuleGetFunction(&imageVectorAdd, imageModule, "vectorAdd"));
        pass = vectorAddIsExact(imageVectorAdd, "cuModuleLoadData (cubin image)") && pass;
        CHECK_DRIVER(cuModuleUnload(imageModule));
    } else {
        std::printf(
            "section cubin: SKIP (cubin built for sm_%d, device is sm_%d%d; rebuild with make clean && make "
            "ARCH=%d%d)\n",
            kCubinArch, ccMajor, ccMinor, ccMajor, ccMinor);
    }

    // Way 3, cuModuleLoadDataEx: PTX with JIT options. Use it when you load PTX and want to
    // see what the compiler said (or set its optimisation level, register limit, ...).
    {
        JitOptions jit;
        CUmodule jitModule = nullptr;
        CHECK_DRIVER(
            cuModuleLoadDataEx(&jitModule, ptxImage->c_str(), jit.count(), jit.names.data(), jit.values.data()));
        std::printf("cuModuleLoadDataEx(kernels/vector_ops.ptx): compiled for sm_%d%d\n", ccMajor, ccMinor);
        std::printf("JIT wall time: %.3f ms\n", jit.wallMilliseconds());
        printLog("JIT info log", jit.infoLog.data(), jit.infoBytes());
        CUfunction jitVectorAdd = nullptr;
        CHECK_DRIVER(cuModuleGetFunction(&jitVectorAdd, jitModule, "vectorAdd"));
        pass = vectorAddIsExact(jitVectorAdd, "cuModuleLoadDataEx (PTX, JIT)") && pass;
        CHECK_DRIVER(cuModuleUnload(jitModule));
    }

    // Way 4, cuLibraryLoadData (CUDA 12.0+): a context-independent library. The driver loads
    // it into every context that needs it (lazily: when one of its kernels is first used
    // there), so a library or plug-in can load its code once without owning a context.
    // A CUkernel may be passed to cuLaunchKernel cast to CUfunction, as the reference allows;
    // it then runs in the current context (cuKernelGetFunction gives that context's CUfunction).
#if CUDA_VERSION >= 12000
    if (driverVersion >= 12000) {
        CUlibrary library = nullptr;
        CHECK_DRIVER(cuLibraryLoadData(&library, fatbinImage->data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
        CUkernel libraryVectorAdd = nullptr;
        CHECK_DRIVER(cuLibraryGetKernel(&libraryVectorAdd, library, "vectorAdd"));
        pass = vectorAddIsExact(reinterpret_cast<CUfunction>(libraryVectorAdd), "cuLibraryLoadData (CUkernel)") && pass;
        CHECK_DRIVER(cuLibraryUnload(library));
    } else {
        std::printf("section library: SKIP (cuLibraryLoadData needs a CUDA 12.0 driver, this one is %s)\n",
                    course::formatCudaVersion(driverVersion).c_str());
    }
#else
    std::printf("section library: SKIP (cuLibraryLoadData needs CUDA 12.0; compiled with %s)\n",
                course::formatCudaVersion(CUDA_VERSION).c_str());
#endif

    // Step 5: a module global. cuModuleGetGlobal returns the device address and size of a
    // __device__ or __constant__ variable by name; ordinary copies then read and write it.
    course::printStep(5, "write a __constant__ global from the host");
    CUdeviceptr scaleAddress = 0;
    std::size_t scaleBytes = 0;
    CHECK_DRIVER(cuModuleGetGlobal(&scaleAddress, &scaleBytes, fileModule, "gScale"));
    float scale = 0.0f;
    CHECK_DRIVER(cuMemcpyDtoH(&scale, scaleAddress, sizeof(scale)));
    std::printf("gScale: %zu bytes, %g in the module image\n", scaleBytes, scale);
    scale = 3.0f;
    CHECK_DRIVER(cuMemcpyHtoD(scaleAddress, &scale, sizeof(scale)));
    float stored = 0.0f;
    CHECK_DRIVER(cuMemcpyDtoH(&stored, scaleAddress, sizeof(stored)));
    std::printf("gScale after cuMemcpyHtoD: %g\n", stored);
    {
        int count = kCount;
        void* params[] = {&x, &z, &count};
        CHECK_DRIVER(cuLaunchKernel(scaleByGlobal, (kCount + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
        CHECK_DRIVER(cuCtxSynchronize());
        CHECK_DRIVER(cuMemcpyDtoH(hostZ.data(), z, kBytes));
        int wrong = 0;
        for (int i = 0; i < kCount; ++i) wrong += hostZ[i] != scale * hostX[i];
        std::printf("scaleByGlobal used gScale = %g: %s\n", scale, wrong == 0 ? "exact" : "WRONG");
        pass = wrong == 0 && scaleBytes == sizeof(float) && stored == scale && pass;
    }

    // Step 6: kernelParams, the usual style: one pointer per kernel parameter, to a host
    // variable of the parameter's type. The driver knows each parameter's size and offset
    // from the module, and copies the values at launch; the variables may change afterwards.
    course::printStep(6, "launch with a kernelParams array");
    {
        // saxpy: y = a * x + y. The GPU may fuse a * x + y into one FMA (one rounding), the
        // host rounds twice; they differ by at most an ulp or so of the terms. Tolerance:
        // |gpu - host| <= 1e-6 * (|a * x| + |y|), about 8 float ulps.
        constexpr float kSaxpyTolerance = 1e-6f;
        float a = 1.7f;
        int count = kCount;
        void* params[] = {&a, &x, &y, &count};
        CHECK_DRIVER(cuLaunchKernel(saxpy, (kCount + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
        CHECK_DRIVER(cuCtxSynchronize());
        std::vector<float> hostResult(kCount);
        CHECK_DRIVER(cuMemcpyDtoH(hostResult.data(), y, kBytes));
        double worst = 0.0;
        for (int i = 0; i < kCount; ++i) {
            const float expected = a * hostX[i] + hostY[i];
            const double scaleOfTerms = std::fabs(a * hostX[i]) + std::fabs(hostY[i]);
            worst = std::max(worst, std::fabs(static_cast<double>(hostResult[i]) - expected) / scaleOfTerms);
        }
        std::printf("saxpy worst error / (|a*x| + |y|): %.2e (tolerance %.0e)\n", worst, kSaxpyTolerance);
        std::printf("saxpy within tolerance: %s\n", worst <= kSaxpyTolerance ? "yes" : "NO");
        pass = worst <= kSaxpyTolerance && pass;

        // A launch shape the function cannot take: one thread more per block than
        // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK. The driver refuses it at cuLaunchKernel,
        // before anything runs, so y is untouched.
        int saxpyMaxThreads = 0;
        CHECK_DRIVER(cuFuncGetAttribute(&saxpyMaxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, saxpy));
        const CUresult tooWide = REPORT_DRIVER(
            cuLaunchKernel(saxpy, 1, 1, 1, saxpyMaxThreads + 1, 1, 1, 0, nullptr, params, nullptr));
        std::printf("cuLaunchKernel with %d threads per block (max %d): %s\n", saxpyMaxThreads + 1,
                    saxpyMaxThreads, course::driverErrorName(tooWide));
        pass = tooWide == CUDA_ERROR_INVALID_VALUE && pass;
        CHECK_DRIVER(cuMemcpyHtoD(y, hostY.data(), kBytes));  // restore y for later steps
    }

    // echoParams takes a float, a float4, the padded struct, an int and a pointer, and
    // writes every value back: the test of whether each argument landed in the right place.
    constexpr int kEchoFloats = 11;
    float echoA = 1.5f;
    float4 echoV = {2.0f, 3.0f, 4.0f, 5.0f};
    FloatAndFloat4 echoS = {6.0f, {7.0f, 8.0f, 9.0f, 10.0f}};
    int echoN = 11;
    const std::array<float, kEchoFloats> echoExpected = {1.5f, 2.0f, 3.0f, 4.0f,  5.0f, 6.0f,
                                                         7.0f, 8.0f, 9.0f, 10.0f, 11.0f};
    CUdeviceptr echoOutArray = 0;
    CUdeviceptr echoOutBuffer = 0;
    CHECK_DRIVER(cuMemAlloc(&echoOutArray, kEchoFloats * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&echoOutBuffer, kEchoFloats * sizeof(float)));
    std::array<float, kEchoFloats> fromArray{};
    {
        void* params[] = {&echoA, &echoV, &echoS, &echoN, &echoOutArray};
        CHECK_DRIVER(cuLaunchKernel(echoParams, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
        CHECK_DRIVER(cuCtxSynchronize());
        CHECK_DRIVER(cuMemcpyDtoH(fromArray.data(), echoOutArray, sizeof(fromArray)));
        const bool echoed = fromArray == echoExpected;
        std::printf("echoParams via kernelParams: %s\n", echoed ? "every field arrived" : "WRONG");
        pass = echoed && pass;
    }

    // Step 7: the other style: all arguments packed into one buffer by the program, passed in
    // `extra`. Now the program must place each one at the offset the kernel expects.
    course::printStep(7, "launch with one parameter buffer");
    {
        lesson06::ParamBuffer buffer;
        const std::array<std::size_t, 5> offsets = {buffer.add(echoA), buffer.add(echoV), buffer.add(echoS),
                                                    buffer.add(echoN), buffer.add(echoOutBuffer)};
        const std::array<std::size_t, 5> sizes = {sizeof(echoA), sizeof(echoV), sizeof(echoS), sizeof(echoN),
                                                  sizeof(echoOutBuffer)};
        const std::array<std::size_t, 5> alignments = {alignof(float), alignof(float4), alignof(FloatAndFloat4),
                                                       alignof(int), alignof(CUdeviceptr)};
        const std::array<const char*, 5> labels = {"a (float)", "v (float4)", "s (FloatAndFloat4)", "n (int)",
                                                   "out (float*)"};
        // cuFuncGetParamInfo (CUDA 12.4+) reads the layout from the kernel's image: the check.
        bool driverKnowsLayout = false;
#if CUDA_VERSION >= 12040
        driverKnowsLayout = driverVersion >= 12040;
#endif
        for (std::size_t i = 0; i < offsets.size(); ++i) {
            std::printf("param %zu %s: offset %zu, size %zu, align %zu", i, labels[i], offsets[i], sizes[i],
                        alignments[i]);
#if CUDA_VERSION >= 12040
            if (driverKnowsLayout) {
                std::size_t driverOffset = 0;
                std::size_t driverSize = 0;
                CHECK_DRIVER(cuFuncGetParamInfo(echoParams, i, &driverOffset, &driverSize));
                const bool agree = driverOffset == offsets[i] && driverSize == sizes[i];
                std::printf("; driver: offset %zu, size %zu%s", driverOffset, driverSize, agree ? "" : " MISMATCH");
                pass = agree && pass;
            }
#endif
            std::printf("\n");
        }
        if (!driverKnowsLayout) std::printf("driver's layout: not shown (cuFuncGetParamInfo needs CUDA 12.4)\n");
        std::size_t bufferSize = buffer.size();
        std::printf("parameter buffer size: %zu bytes\n", bufferSize);

        void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &bufferSize,
                         CU_LAUNCH_PARAM_END};
        CHECK_DRIVER(cuLaunchKernel(echoParams, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, extra));
        CHECK_DRIVER(cuCtxSynchronize());
        std::array<float, kEchoFloats> fromBuffer{};
        CHECK_DRIVER(cuMemcpyDtoH(fromBuffer.data(), echoOutBuffer, sizeof(fromBuffer)));
        const bool echoed = fromBuffer == echoExpected;
        const bool same = std::memcmp(fromBuffer.data(), fromArray.data(), sizeof(fromBuffer)) == 0;
        std::printf("echoParams via parameter buffer: %s\n", echoed ? "every field arrived" : "WRONG");
        std::printf("parameter buffer launch equals kernelParams launch: %s\n", same ? "yes" : "NO");
        pass = echoed && same && pass;
    }
    {
        // The size is the end of the last parameter, not sizeof of a struct with the same
        // members: scaleByGlobal(const float*, float*, int) ends at 20 bytes, while such a
        // struct has 4 bytes of tail padding (24). What the driver says to 24 is printed.
        int count = kCount;
        lesson06::ParamBuffer buffer;
        buffer.add(x);
        buffer.add(z);
        buffer.add(count);
        std::size_t exactSize = buffer.size();
        std::size_t paddedSize = lesson06::alignUp(exactSize, alignof(CUdeviceptr));
        std::vector<unsigned char> paddedBuffer(paddedSize, 0);  // the same bytes, then the padding
        std::memcpy(paddedBuffer.data(), buffer.data(), exactSize);
        void* padded[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, paddedBuffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &paddedSize,
                          CU_LAUNCH_PARAM_END};
        const CUresult paddedResult = REPORT_DRIVER(
            cuLaunchKernel(scaleByGlobal, (kCount + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, nullptr, padded));
        if (paddedResult == CUDA_SUCCESS) CHECK_DRIVER(cuCtxSynchronize());
        std::printf("buffer size with tail padding: %zu bytes -> %s\n", paddedSize,
                    course::driverErrorName(paddedResult));

        CHECK_DRIVER(cuMemsetD32(z, 0, kCount));
        void* exact[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &exactSize,
                         CU_LAUNCH_PARAM_END};
        CHECK_DRIVER(cuLaunchKernel(scaleByGlobal, (kCount + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, nullptr, exact));
        CHECK_DRIVER(cuCtxSynchronize());
        CHECK_DRIVER(cuMemcpyDtoH(hostZ.data(), z, kBytes));
        int wrong = 0;
        for (int i = 0; i < kCount; ++i) wrong += hostZ[i] != scale * hostX[i];
        std::printf("buffer size to the end of the last parameter: %zu bytes -> %s\n", exactSize,
                    wrong == 0 ? "exact" : "WRONG");
        pass = wrong == 0 && pass;
    }
    CHECK_DRIVER(cuMemFree(echoOutBuffer));
    CHECK_DRIVER(cuMemFree(echoOutArray));

    // Step 8: PTX the JIT cannot compile. The load fails with CUDA_ERROR_INVALID_PTX and the
    // error log names the PTX line, the one thing that makes such failures debuggable: always
    // pass CU_JIT_ERROR_LOG_BUFFER when you load PTX. Then PTX newer than the driver.
    course::printStep(8, "PTX the JIT refuses: a typo, and a version from the future");
    {
        const int offendingLine = lineOf(kBrokenPtx, "mull.f32");
        std::printf("broken PTX offending line: %d\n", offendingLine);
        JitOptions jit;
        CUmodule brokenModule = nullptr;
        const CUresult broken = REPORT_DRIVER(
            cuModuleLoadDataEx(&brokenModule, kBrokenPtx, jit.count(), jit.names.data(), jit.values.data()));
        std::printf("cuModuleLoadDataEx(broken PTX): %s\n", course::driverErrorName(broken));
        printLog("JIT error log", jit.errorLog.data(), jit.errorBytes());
        const std::string errorLog(jit.errorLog.data());
        const bool namesLine = errorLog.find("line " + std::to_string(offendingLine)) != std::string::npos;
        std::printf("error log names line %d: %s\n", offendingLine, namesLine ? "yes" : "NO");
        if (broken == CUDA_SUCCESS) CHECK_DRIVER(cuModuleUnload(brokenModule));
        pass = broken == CUDA_ERROR_INVALID_PTX && namesLine && pass;
    }
    {
        // The same kernel, typo fixed, but declaring a PTX ISA from the future: what a driver
        // meets when the PTX comes from a toolkit newer than itself. The JIT refuses the
        // whole file before reading a single instruction.
        std::string futurePtx = kBrokenPtx;
        futurePtx.replace(futurePtx.find(".version 7.0"), 12, ".version 99.9");
        futurePtx.replace(futurePtx.find("mull.f32"), 8, "mul.f32");
        CUmodule futureModule = nullptr;
        const CUresult future = REPORT_DRIVER(cuModuleLoadData(&futureModule, futurePtx.c_str()));
        std::printf("cuModuleLoadData(PTX .version 99.9): %s\n", course::driverErrorName(future));
        if (future == CUDA_SUCCESS) CHECK_DRIVER(cuModuleUnload(futureModule));
        pass = future != CUDA_SUCCESS && pass;
    }

    // Step 9: run-time linking. link_main.ptx calls linkedTransform, which only
    // link_helper.ptx defines. Loaded alone, the call cannot be resolved; cuLink* compiles
    // both as relocatable code and links them into one cubin, like nvlink does offline.
    course::printStep(9, "link two PTX files with cuLink");
    {
        JitOptions jit;
        CUmodule aloneModule = nullptr;
        const CUresult alone = REPORT_DRIVER(
            cuModuleLoadDataEx(&aloneModule, linkMainPtx->c_str(), jit.count(), jit.names.data(), jit.values.data()));
        std::printf("cuModuleLoadDataEx(link_main.ptx alone): %s\n", course::driverErrorName(alone));
        printLog("JIT error log", jit.errorLog.data(), jit.errorBytes());
        if (alone == CUDA_SUCCESS) CHECK_DRIVER(cuModuleUnload(aloneModule));
        pass = alone != CUDA_SUCCESS && pass;
    }
    {
        // Log buffers and wall time go to cuLinkCreate (cuLinkAddData refuses them); the
        // option values are written during cuLinkComplete, so `jit` must outlive it.
        JitOptions jit;
        CUlinkState link = nullptr;
        CHECK_DRIVER(cuLinkCreate(jit.count(), jit.names.data(), jit.values.data(), &link));
        // PTX inputs must be NUL-terminated; the size given includes the terminator.
        CHECK_DRIVER(cuLinkAddData(link, CU_JIT_INPUT_PTX, linkMainPtx->data(), linkMainPtx->size() + 1,
                                   "link_main.ptx", 0, nullptr, nullptr));
        CHECK_DRIVER(cuLinkAddData(link, CU_JIT_INPUT_PTX, linkHelperPtx->data(), linkHelperPtx->size() + 1,
                                   "link_helper.ptx", 0, nullptr, nullptr));
        void* linkedCubin = nullptr;
        std::size_t linkedBytes = 0;
        CHECK_DRIVER(cuLinkComplete(link, &linkedCubin, &linkedBytes));
        // The cubin belongs to the link state and dies with it: load it first.
        CUmodule linkedModule = nullptr;
        CHECK_DRIVER(cuModuleLoadData(&linkedModule, linkedCubin));
        CHECK_DRIVER(cuLinkDestroy(link));
        std::printf("linked cubin: %zu bytes, loaded before cuLinkDestroy\n", linkedBytes);
        std::printf("link wall time: %.3f ms\n", jit.wallMilliseconds());
        printLog("link info log", jit.infoLog.data(), jit.infoBytes());

        CUfunction applyLinked = nullptr;
        CHECK_DRIVER(cuModuleGetFunction(&applyLinked, linkedModule, "applyLinked"));
        int count = kCount;
        void* params[] = {&x, &z, &count};
        CHECK_DRIVER(cuLaunchKernel(applyLinked, (kCount + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
        CHECK_DRIVER(cuCtxSynchronize());
        CHECK_DRIVER(cuMemcpyDtoH(hostZ.data(), z, kBytes));
        int wrong = 0;
        for (int i = 0; i < kCount; ++i) wrong += hostZ[i] != 2.0f * hostX[i] + 1.0f;
        std::printf("linked kernel applyLinked (2x + 1): %s\n", wrong == 0 ? "exact" : "WRONG");
        pass = wrong == 0 && pass;
        CHECK_DRIVER(cuModuleUnload(linkedModule));
    }

    // Step 10: the first launch of a kernel costs more than the next. With lazy loading the
    // driver uploads a kernel's code when it is first asked for (cuModuleGetFunction) rather
    // than in cuModuleLoad; and any first launch also sets up per-kernel launch state.
    // Run with CUDA_MODULE_LOADING=EAGER to move the loading back into cuModuleLoad.
    course::printStep(10, "lazy loading and the first launch");
    {
        CUmodule freshModule = nullptr;
        const Clock::time_point loadStart = Clock::now();
        CHECK_DRIVER(cuModuleLoadData(&freshModule, fatbinImage->data()));
        const Clock::time_point loaded = Clock::now();
        CUfunction freshEmpty = nullptr;
        CHECK_DRIVER(cuModuleGetFunction(&freshEmpty, freshModule, "emptyKernel"));
        const Clock::time_point gotFunction = Clock::now();
        // cuFuncIsLoaded (CUDA 12.4+): has the kernel's code reached the GPU yet?
        const char* loadedBeforeLaunch = nullptr;
#if CUDA_VERSION >= 12040
        if (driverVersion >= 12040) {
            CUfunctionLoadingState state{};
            CHECK_DRIVER(cuFuncIsLoaded(&state, freshEmpty));
            loadedBeforeLaunch = state == CU_FUNCTION_LOADING_STATE_LOADED ? "yes" : "no";
        }
#endif
        const Clock::time_point firstStart = Clock::now();
        CHECK_DRIVER(cuLaunchKernel(freshEmpty, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
        CHECK_DRIVER(cuCtxSynchronize());
        const Clock::time_point firstDone = Clock::now();
        CHECK_DRIVER(cuLaunchKernel(freshEmpty, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
        CHECK_DRIVER(cuCtxSynchronize());
        const Clock::time_point secondDone = Clock::now();
        std::printf("module loading mode: %s\n", loadingMode);
        std::printf("cuModuleLoadData of the fatbin: %.1f µs\n", microsecondsBetween(loadStart, loaded));
        std::printf("cuModuleGetFunction(emptyKernel): %.1f µs\n", microsecondsBetween(loaded, gotFunction));
        if (loadedBeforeLaunch != nullptr)
            std::printf("emptyKernel loaded before its first launch: %s\n", loadedBeforeLaunch);
        std::printf("first launch + synchronize: %.1f µs\n", microsecondsBetween(firstStart, firstDone));
        std::printf("second launch + synchronize: %.1f µs\n", microsecondsBetween(firstDone, secondDone));
        CHECK_DRIVER(cuModuleUnload(freshModule));
    }

    // Step 11: --bench only. The 256 Mi-float vector add needs 3 GiB of device memory.
    course::printStep(11, "benchmarks");
    if (!bench) {
        std::printf("benchmarks: not run (add --bench)\n");
    } else {
        pass = benchVectorAdd(vectorAdd, fillGridBlocks, blockThreads) && pass;
        pass = benchLaunchCost(emptyKernel, context, ordinal) && pass;
        benchModuleLoad("PTX (JIT, cache off)", *ptxImage);
        if (ccMajor == kCubinArch / 10 && ccMinor >= kCubinArch % 10) benchModuleLoad("cubin", *cubinImage);
        benchModuleLoad("fatbin", *fatbinImage);
    }

    // Step 12: release in reverse order of creation. Unloading a module frees its code and
    // globals; the primary context stays alive while anyone (the runtime too) retains it.
    course::printStep(12, "release and check");
    CHECK_DRIVER(cuMemFree(z));
    CHECK_DRIVER(cuMemFree(y));
    CHECK_DRIVER(cuMemFree(x));
    CHECK_DRIVER(cuModuleUnload(fileModule));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: 3 buffers, 1 module, the primary context\n");
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
