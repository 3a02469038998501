// Lesson 06, program 6 of 6 — what loading and launching cost.
//
// The plain run times a module load, cuModuleGetFunction and a kernel's first and second
// launch, and asks the driver whether the kernel was loaded before its first launch.
// With --bench it measures, every ratio against a number taken in this same run:
//   - vector add bandwidth against the device's theoretical DRAM bandwidth (from its memory
//     clock and bus width) and against a cuMemcpyDtoD of the same arrays, timed just before;
//   - launch cost, driver API against <<<>>> in one context and one stream: the host's
//     submission time per launch apart from the end-to-end time per launch;
//   - module load time for PTX (JIT), cubin and fatbin.
//
//   launch_bench [--device N] [--bench]
#include <cuda.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/dram_peak.h"
#include "cubin_arch.h"
#include "driver_env.h"
#include "launch_timing.h"
#include "runtime_launch.h"

namespace {

using course::median;
using lesson06::Clock;
using lesson06::microsecondsBetween;

// Vector add on 256 Mi floats (3 arrays of 1 GiB), against (a) the DRAM's theoretical peak
// and (b) cuMemcpyDtoD of one array, timed just before on the same buffers. Both kernels and
// copies are timed with events around 20 runs after 3 warm-ups. Bytes moved: vector add
// reads 2 arrays and writes 1; the copy reads 1 and writes 1.
void benchVectorAdd(CUdevice device, CUfunction vectorAdd, course::Verdict& verdict) {
    constexpr unsigned long long kCount = 256ull << 20;
    constexpr std::size_t kBytes = kCount * sizeof(float);
    constexpr int kWarmUp = 3;
    constexpr int kTimed = 20;
    std::size_t freeBytes = 0;
    std::size_t totalBytes = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &totalBytes));
    if (freeBytes < 3 * kBytes + (std::size_t{256} << 20)) {
        std::printf("section vector add bench: SKIP (needs 3 GiB + 256 MiB free, the device has %zu MiB)\n",
                    freeBytes >> 20);
        return;
    }
    // (a) CUDA 13 removed memoryClockRate from the runtime's cudaDeviceProp; the driver
    // attribute is still there (and not marked deprecated in cuda.h 13.0).
    int memoryClockKHz = 0;
    int busWidthBits = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&memoryClockKHz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&busWidthBits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, device));
    const double peakGBs = course::dramPeakGBs(memoryClockKHz, busWidthBits);

    CUdeviceptr a = 0;
    CUdeviceptr b = 0;
    CUdeviceptr c = 0;
    CHECK_DRIVER(cuMemAlloc(&a, kBytes));
    CHECK_DRIVER(cuMemAlloc(&b, kBytes));
    CHECK_DRIVER(cuMemAlloc(&c, kBytes));
    // cuMemsetD32 fills 32-bit words: the bit patterns of 1.0f and 2.0f.
    CHECK_DRIVER(cuMemsetD32(a, std::bit_cast<unsigned int>(1.0f), kCount));
    CHECK_DRIVER(cuMemsetD32(b, std::bit_cast<unsigned int>(2.0f), kCount));
    CUevent start = nullptr;
    CUevent stop = nullptr;
    CHECK_DRIVER(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    auto millisecondsPerRun = [&](const auto& enqueue) {
        for (int i = 0; i < kWarmUp; ++i) enqueue();
        CHECK_DRIVER(cuEventRecord(start, nullptr));
        for (int i = 0; i < kTimed; ++i) enqueue();
        CHECK_DRIVER(cuEventRecord(stop, nullptr));
        CHECK_DRIVER(cuEventSynchronize(stop));
        float milliseconds = 0.0f;
        CHECK_DRIVER(cuEventElapsedTime(&milliseconds, start, stop));
        return static_cast<double>(milliseconds) / kTimed;
    };
    // (b) A device-to-device copy gives no host-side synchronization; the events order it.
    const double copyMs = millisecondsPerRun([&] { CHECK_DRIVER(cuMemcpyDtoD(c, a, kBytes)); });
    int gridBlocks = 0;
    int blockThreads = 0;
    CHECK_DRIVER(cuOccupancyMaxPotentialBlockSize(&gridBlocks, &blockThreads, vectorAdd, nullptr, 0, 0));
    unsigned long long count = kCount;
    void* params[] = {&a, &b, &c, &count};
    const double addMs = millisecondsPerRun([&] {
        CHECK_DRIVER(cuLaunchKernel(vectorAdd, gridBlocks, 1, 1, blockThreads, 1, 1, 0, nullptr, params, nullptr));
    });
    const double copyGBs = 2.0 * static_cast<double>(kBytes) / (copyMs / 1e3) / 1e9;
    const double addGBs = 3.0 * static_cast<double>(kBytes) / (addMs / 1e3) / 1e9;

    std::printf("memory clock: %d kHz, bus width: %d bits\n", memoryClockKHz, busWidthBits);
    std::printf("vector add launch shape: %d blocks x %d threads, %d timed launches\n", gridBlocks, blockThreads,
                kTimed);
    if (peakGBs > 0.0)
        std::printf("bench: DRAM peak (2 x memory clock x bus width / 8) = %.1f GB/s\n", peakGBs);
    else
        std::printf("DRAM peak: n/a (the driver reports no memory clock or bus width for this device)\n");
    std::printf("bench: cuMemcpyDtoD 1 GiB (read + write) = %.1f GB/s\n", copyGBs);
    std::printf("bench: vector add 256 Mi floats = %.1f GB/s\n", addGBs);
    if (peakGBs > 0.0) std::printf("bench: vector add share of DRAM peak = %.1f %%\n", 100.0 * addGBs / peakGBs);
    std::printf("bench: vector add share of cuMemcpyDtoD = %.1f %%\n", 100.0 * addGBs / copyGBs);

    std::vector<float> result(kCount);
    CHECK_DRIVER(cuMemcpyDtoH(result.data(), c, kBytes));
    const bool exact = std::all_of(result.begin(), result.end(), [](float v) { return v == 3.0f; });
    std::printf("vector add 256 Mi floats result: %s\n", exact ? "exact" : "WRONG");
    verdict.check("vector add result exact", exact);
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    CHECK_DRIVER(cuMemFree(c));
    CHECK_DRIVER(cuMemFree(b));
    CHECK_DRIVER(cuMemFree(a));
}

// Launch cost, cuLaunchKernel against <<<>>>, in one context and one stream: 9 runs of each,
// taken in turn, of 1000 launches; medians. "submission" stops the clock when the loop has
// queued its launches (the host's cost per launch, as long as the queue does not fill);
// "end-to-end" after one cuStreamSynchronize (the throughput of launch and execution).
void benchLaunchCost(CUfunction emptyKernel, CUcontext context, int deviceOrdinal, course::Verdict& verdict) {
    constexpr int kRuns = 9;
    constexpr int kLaunches = 1000;
    // cudaSetDevice makes the device's primary context current; memory the runtime then
    // allocates belongs to that context (CU_POINTER_ATTRIBUTE_CONTEXT: "the CUcontext in which
    // ptr was allocated"). It must be the context this program retained: were it one of its
    // own (cuCtxCreate), the runtime would work in another context than the driver calls.
    CUcontext owner = nullptr;
    const CUdeviceptr runtimeBuffer =
        lesson06::runtimeUseDevice(deviceOrdinal) ? lesson06::runtimeAllocate(256) : CUdeviceptr{0};
    bool ok = runtimeBuffer != 0;
    if (ok) {
        CHECK_DRIVER(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, runtimeBuffer));
        ok = lesson06::runtimeFree(runtimeBuffer);
    }
    CHECK_DRIVER(cuCtxSetCurrent(context));  // this program's context again, whichever cudaSetDevice chose
    std::printf("runtime's cudaMalloc allocated in the lesson's primary context: %s\n",
                owner == context ? "yes" : "NO");
    if (!verdict.check("runtime allocates in the lesson's primary context", owner == context)) return;
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_DEFAULT));
    // The warm-up runs are not counted: the runtime loads its own module on the first <<<>>>.
    if (ok) ok = lesson06::runtimeEmptyLaunches(stream, kLaunches).totalMicroseconds >= 0.0;
    lesson06::driverEmptyLaunches(emptyKernel, stream, kLaunches);
    std::vector<double> driverSubmit, driverTotal, runtimeSubmit, runtimeTotal;
    for (int run = 0; ok && run < kRuns; ++run) {
        const lesson06::LaunchTimes driver = lesson06::driverEmptyLaunches(emptyKernel, stream, kLaunches);
        const lesson06::LaunchTimes runtime = lesson06::runtimeEmptyLaunches(stream, kLaunches);
        ok = runtime.totalMicroseconds >= 0.0;
        driverSubmit.push_back(driver.submitMicroseconds);
        driverTotal.push_back(driver.totalMicroseconds);
        runtimeSubmit.push_back(runtime.submitMicroseconds);
        runtimeTotal.push_back(runtime.totalMicroseconds);
    }
    CHECK_DRIVER(cuStreamDestroy(stream));
    if (!verdict.check("runtime launches succeed", ok)) return;
    std::printf("launch cost: %d runs x %d launches of an empty kernel, one stream, medians\n", kRuns, kLaunches);
    std::printf("bench: cuLaunchKernel empty kernel submission = %.2f µs\n", median(driverSubmit));
    std::printf("bench: runtime <<<>>> empty kernel submission = %.2f µs\n", median(runtimeSubmit));
    std::printf("bench: cuLaunchKernel empty kernel end-to-end = %.2f µs\n", median(driverTotal));
    std::printf("bench: runtime <<<>>> empty kernel end-to-end = %.2f µs\n", median(runtimeTotal));
    std::printf("bench: launch submission driver / runtime = %.2f x\n", median(driverSubmit) / median(runtimeSubmit));
    std::printf("bench: launch end-to-end driver / runtime = %.2f x\n", median(driverTotal) / median(runtimeTotal));
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const bool bench = args.has("--bench");

    // Step 1: the module files sit next to the executable (kernels/), found through /proc/self/exe.
    course::printStep(1, "find the module files");
    const std::optional<std::string> fatbinImage = course::readFile(course::kernelPath("vector_ops.fatbin"));
    const std::optional<std::string> cubinImage = course::readFile(course::kernelPath("vector_ops.cubin"));
    const std::optional<std::string> ptxImage = course::readFile(course::kernelPath("vector_ops.ptx"));
    if (!fatbinImage || !cubinImage || !ptxImage) {
        std::fprintf(stderr, "The lesson's module files are built next to its programs: run make build-06.\n");
        return EXIT_FAILURE;
    }
    std::printf("module file: kernels/vector_ops.fatbin (%zu bytes)\n", fatbinImage->size());

    // Step 2: --bench asks for eager loading, so that a timed module load does all its work,
    // and (unless the user chose) turns the JIT cache off, so that a PTX load really compiles.
    // Both are set before cuInit (the check below shows whether the driver followed).
    course::printStep(2, "driver, device and the primary context");
    if (bench) {
        // Overwrites a CUDA_MODULE_LOADING of the user's: a timed load must do all its work.
        const char* user = std::getenv("CUDA_MODULE_LOADING");
        const std::string before = user != nullptr ? user : "not set";  // copied: setenv may replace it
        setenv("CUDA_MODULE_LOADING", "EAGER", 1);
        std::printf("CUDA_MODULE_LOADING chosen by: --bench (was %s)\n", before.c_str());
        lesson06::disableJitCacheUnlessChosen();
    }
    lesson06::printDriverEnvironment();
    CHECK_DRIVER(cuInit(0));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    int ccMajor = 0;
    int ccMinor = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&ccMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&ccMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    const char* loadingMode = "unknown (cuModuleGetLoadingMode needs CUDA 11.7)";
    bool modeKnown = false;
#if CUDA_VERSION >= 11070
    if (driverVersion >= 11070) {
        CUmoduleLoadingMode mode{};
        CHECK_DRIVER(cuModuleGetLoadingMode(&mode));
        // cuda.h names two modes; any other value is not one of them.
        loadingMode = mode == CU_MODULE_LAZY_LOADING ? "LAZY" : mode == CU_MODULE_EAGER_LOADING ? "EAGER" : "neither";
        modeKnown = true;
    }
#endif
    std::printf("module loading mode: %s\n", loadingMode);
    // Where CUDA_MODULE_LOADING names a mode (--bench sets EAGER), the mode the driver reports
    // must be the one it names: the variable was set before cuInit.
    course::Verdict verdict;
    const char* chosen = std::getenv("CUDA_MODULE_LOADING");
    const std::string chosenMode = chosen != nullptr ? chosen : "";
    if (modeKnown && (chosenMode == "EAGER" || chosenMode == "LAZY"))
        verdict.check("module loading mode follows CUDA_MODULE_LOADING", chosenMode == loadingMode);

    // Step 3: what loading and a first launch cost. cuda.h says only that CUDA_MODULE_LOADING
    // controls the loading mode; the Programming Guide's lazy loading section describes LAZY
    // as loading a kernel when it is first needed. cuFuncIsLoaded says where this kernel is;
    // the timings are printed, not judged: they vary from run to run.
    course::printStep(3, "lazy loading and the first launch");
    CUmodule module = nullptr;
    const Clock::time_point loadStart = Clock::now();
    CHECK_DRIVER(cuModuleLoadData(&module, fatbinImage->data()));
    const Clock::time_point loaded = Clock::now();
    CUfunction emptyKernel = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&emptyKernel, module, "emptyKernel"));
    const Clock::time_point gotFunction = Clock::now();
    const char* loadedBeforeLaunch = nullptr;  // cuFuncIsLoaded (CUDA 12.4+): is its code on the GPU yet?
#if CUDA_VERSION >= 12040
    if (driverVersion >= 12040) {
        CUfunctionLoadingState state{};
        CHECK_DRIVER(cuFuncIsLoaded(&state, emptyKernel));
        loadedBeforeLaunch = state == CU_FUNCTION_LOADING_STATE_LOADED ? "yes" : "no";
    }
#endif
    const Clock::time_point firstStart = Clock::now();
    CHECK_DRIVER(cuLaunchKernel(emptyKernel, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
    CHECK_DRIVER(cuCtxSynchronize());
    const Clock::time_point firstDone = Clock::now();
    CHECK_DRIVER(cuLaunchKernel(emptyKernel, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
    CHECK_DRIVER(cuCtxSynchronize());
    const Clock::time_point secondDone = Clock::now();
    std::printf("cuModuleLoadData of the fatbin: %.1f µs\n", microsecondsBetween(loadStart, loaded));
    std::printf("cuModuleGetFunction(emptyKernel): %.1f µs\n", microsecondsBetween(loaded, gotFunction));
    if (loadedBeforeLaunch != nullptr)
        std::printf("emptyKernel loaded before its first launch: %s\n", loadedBeforeLaunch);
    std::printf("first launch + synchronize: %.1f µs\n", microsecondsBetween(firstStart, firstDone));
    std::printf("second launch + synchronize: %.1f µs\n", microsecondsBetween(firstDone, secondDone));

    // Step 4: --bench only (the vector add needs 3 GiB of device memory).
    course::printStep(4, "benchmarks");
    if (!bench) {
        std::printf("benchmarks: not run (add --bench)\n");
    } else {
        CUfunction vectorAdd = nullptr;
        CHECK_DRIVER(cuModuleGetFunction(&vectorAdd, module, "vectorAdd"));
        benchVectorAdd(device, vectorAdd, verdict);
        benchLaunchCost(emptyKernel, context, args.deviceOrdinal(), verdict);
        const char* cache = std::getenv("CUDA_CACHE_DISABLE");
        const bool cacheOff = cache != nullptr && std::strcmp(cache, "1") == 0;
        lesson06::benchModuleLoad(cacheOff ? "PTX (JIT, cache off)" : "PTX (JIT, cache on)", *ptxImage, verdict);
        if (lesson06::cubinRunsOn(lesson06::kCubinArch, ccMajor, ccMinor))
            lesson06::benchModuleLoad("cubin", *cubinImage, verdict);
        else
            std::printf("section module load cubin: SKIP (cubin built for sm_%d, device is sm_%d%d)\n",
                        lesson06::kCubinArch, ccMajor, ccMinor);
        lesson06::benchModuleLoad("fatbin", *fatbinImage, verdict);
    }

    // Step 5: release in reverse order of creation.
    course::printStep(5, "release and check");
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: 1 module, the primary context\n");
    return verdict.finish();
}
