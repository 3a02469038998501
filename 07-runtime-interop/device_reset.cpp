// Lesson 07, program 3 — what cudaDeviceReset does under driver code.
//
// cudaDeviceReset acts on the context current on the calling thread. This program
// measures both cases: a context from cuCtxCreate (the reset leaves it, its memory
// and its settings alone), and the primary context that driver code retained and
// configured (the reset tears it down under that code). Then it does the same to
// the primary context with the driver's cuDevicePrimaryCtxReset and compares.
//
//   device_reset [--device N]
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "interop.h"
#include "scale_kernel.h"

using interop::yesNo;

namespace {

enum class Reset { Runtime, Driver };

// What driver code that holds a reference sees when the primary context is reset.
struct ResetSeen {
    bool retainLeftNoneCurrent = false;
    bool activeAfterReset = true;
    CUresult limitAfterReset = CUDA_SUCCESS;
    CUresult oldRelease = CUDA_ERROR_UNKNOWN;
    bool settingLost = false;
    bool sameHandle = false;
};

// Driver code (a plug-in, say) retains the primary context and configures it; then
// the primary context is reset, by the runtime or by the driver. This step changes a
// setting, not memory: an allocation the reset frees is reported as leaked by memcheck.
ResetSeen resetRetainedPrimary(CUdevice device, int ordinal, Reset how) {
    ResetSeen seen;
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    CUcontext current = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    seen.retainLeftNoneCurrent = current == nullptr;
    std::printf("current context after cuDevicePrimaryCtxRetain: %s\n",
                seen.retainLeftNoneCurrent ? "none (retaining does not make it current)" : "SOME");
    CHECK_DRIVER(cuCtxSetCurrent(primary));
    size_t defaultFifo = 0;
    CHECK_DRIVER(cuCtxGetLimit(&defaultFifo, CU_LIMIT_PRINTF_FIFO_SIZE));
    CHECK_DRIVER(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 2 * defaultFifo));
    size_t configuredFifo = 0;
    CHECK_DRIVER(cuCtxGetLimit(&configuredFifo, CU_LIMIT_PRINTF_FIFO_SIZE));
    std::printf("driver code: printf FIFO of the primary context set to %zu bytes (default %zu bytes)\n",
                configuredFifo, defaultFifo);

    if (how == Reset::Runtime) {
        CHECK_RUNTIME(cudaSetDevice(ordinal));  // the runtime's device: its current context is the primary
        CHECK_RUNTIME(cudaDeviceReset());
        std::printf("cudaDeviceReset: done\n");
    } else {
        CHECK_DRIVER(cuDevicePrimaryCtxReset(device));
        std::printf("cuDevicePrimaryCtxReset: done\n");
    }
    seen.activeAfterReset = interop::primaryContextActive(device);
    std::printf("primary context active after the reset: %s\n", yesNo(seen.activeAfterReset));
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    std::printf("current context after the reset: %s\n", current == primary
                                                             ? "the primary context's handle (still current)"
                                                             : (current == nullptr ? "none" : "another context"));
    // What the driver code sees when it next uses its context: measured, not assumed.
    size_t fifoAfterReset = 0;
    seen.limitAfterReset = REPORT_DRIVER(cuCtxGetLimit(&fifoAfterReset, CU_LIMIT_PRINTF_FIFO_SIZE));
    std::printf("driver code, cuCtxGetLimit after the reset: %s\n", course::driverErrorName(seen.limitAfterReset));

    // Recovery: drop the old reference (documented as safe after a reset, and measured
    // here) and retain again, which initialises a fresh primary context.
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    seen.oldRelease = REPORT_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("driver code, releasing its old reference: %s\n", course::driverErrorName(seen.oldRelease));
    CUcontext primaryAgain = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primaryAgain, device));
    CHECK_DRIVER(cuCtxSetCurrent(primaryAgain));
    size_t fifoAfterRetain = 0;
    CHECK_DRIVER(cuCtxGetLimit(&fifoAfterRetain, CU_LIMIT_PRINTF_FIFO_SIZE));
    seen.settingLost = configuredFifo != defaultFifo && fifoAfterRetain == defaultFifo;
    std::printf("driver code, after release + retain: printf FIFO %zu bytes (%s)\n", fifoAfterRetain,
                seen.settingLost ? "back to the default: the setting was lost" : "UNEXPECTED");
    seen.sameHandle = primaryAgain == primary;
    std::printf("primary context handle after retaining again: %s\n", seen.sameHandle ? "same handle" : "a new handle");
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context active at the end: %s\n", yesNo(interop::primaryContextActive(device)));
    return seen;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "initialise the driver, pick the device");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device name: %s\n", name);

    // Step 2: a cuCtxCreate context with memory, a setting and the runtime's state (a
    // <<<>>> launch) in it. No cudaSetDevice here: it would make the primary current.
    course::printStep(2, "cudaDeviceReset with a cuCtxCreate context current");
    course::Verdict verdict;
    CUcontext context = nullptr;
    CHECK_DRIVER(course::ctxCreate(&context, 0, device));
    size_t defaultFifo = 0;
    CHECK_DRIVER(cuCtxGetLimit(&defaultFifo, CU_LIMIT_PRINTF_FIFO_SIZE));
    CHECK_DRIVER(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 2 * defaultFifo));
    constexpr int kCount = 4096;
    constexpr size_t kBytes = kCount * sizeof(float);
    CUdeviceptr x = 0;
    CHECK_DRIVER(cuMemAlloc(&x, kBytes));
    std::vector<float> values(kCount);
    for (int i = 0; i < kCount; ++i) values[i] = static_cast<float>(i);
    CHECK_DRIVER(cuMemcpyHtoD(x, values.data(), kBytes));
    CHECK_RUNTIME(launchScale(interop::asRuntimePointer(x), 2.0f, kCount, nullptr));  // x = 2i
    CHECK_DRIVER(cuCtxSynchronize());

    CHECK_RUNTIME(cudaDeviceReset());
    std::printf("cudaDeviceReset: done\n");
    CUcontext current = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    const bool stillCurrent = current == context;
    std::printf("current context after the reset: %s\n", stillCurrent ? "driver context (unchanged)" : "CHANGED");
    verdict.check("created context still current after cudaDeviceReset", stillCurrent);
    CUcontext owner = nullptr;
    CHECK_DRIVER(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, x));
    const bool memoryKept = owner == context;
    std::printf("cuMemAlloc buffer still belongs to the driver context: %s\n", yesNo(memoryKept));
    verdict.check("created context keeps its buffer", memoryKept);
    size_t fifoAfterReset = 0;
    CHECK_DRIVER(cuCtxGetLimit(&fifoAfterReset, CU_LIMIT_PRINTF_FIFO_SIZE));
    const bool settingKept = fifoAfterReset == 2 * defaultFifo;
    std::printf("printf FIFO after the reset: %zu bytes (%s)\n", fifoAfterReset,
                settingKept ? "still the configured value" : "CHANGED");
    verdict.check("created context keeps its printf FIFO setting", settingKept);
    std::printf("primary context active after the reset: %s\n", yesNo(interop::primaryContextActive(device)));
    CHECK_RUNTIME(launchScale(interop::asRuntimePointer(x), 0.5f, kCount, nullptr));  // x = i again
    std::vector<float> back(kCount);
    CHECK_DRIVER(cuMemcpyDtoH(back.data(), x, kBytes));
    const int relaunchOk = interop::countMatching(back, values);
    std::printf("<<<>>> launch after the reset, on the same buffer: %d of %d correct\n", relaunchOk, kCount);
    verdict.check("<<<>>> launch after the reset exact", relaunchOk == kCount);
    CHECK_DRIVER(cuMemFree(x));
    CHECK_DRIVER(cuCtxDestroy(context));
    const bool createdContextUntouched = stillCurrent && memoryKept && settingKept && relaunchOk == kCount;
    std::printf("cuCtxCreate context untouched by cudaDeviceReset: %s\n", yesNo(createdContextUntouched));

    // Step 3: the primary context, retained and configured by driver code, reset by the runtime.
    course::printStep(3, "cudaDeviceReset under driver code that retained the primary context");
    const ResetSeen byRuntime = resetRetainedPrimary(device, ordinal, Reset::Runtime);
    verdict.check("retaining the primary context leaves no context current", byRuntime.retainLeftNoneCurrent);
    verdict.check("cudaDeviceReset loses the primary context's setting", byRuntime.settingLost);

    // Step 4: the same sequence with the driver's own reset of the primary context.
    course::printStep(4, "cuDevicePrimaryCtxReset, for comparison");
    const ResetSeen byDriver = resetRetainedPrimary(device, ordinal, Reset::Driver);
    verdict.check("cuDevicePrimaryCtxReset loses the primary context's setting", byDriver.settingLost);
    const bool sameEffect =
        byRuntime.activeAfterReset == byDriver.activeAfterReset &&
        byRuntime.limitAfterReset == byDriver.limitAfterReset && byRuntime.oldRelease == byDriver.oldRelease &&
        byRuntime.settingLost == byDriver.settingLost && byRuntime.sameHandle == byDriver.sameHandle;
    std::printf("cudaDeviceReset and cuDevicePrimaryCtxReset, same observations: %s\n", yesNo(sameEffect));
    verdict.check("both resets give the same observations", sameEffect);

    // Step 5: the reset spared the created context, and tore down the retained primary
    // context's setting, the same way the driver's reset does (each check above printed its line).
    course::printStep(5, "check");
    return verdict.finish();
}
