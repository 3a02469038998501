// Lesson 07, program 3 — what cudaDeviceReset does under driver code.
//
// cuda_runtime_api.h says two things: cudaDeviceReset "will deinitialize the primary
// context for the calling thread's current device", and "If a non-primary CUcontext is
// current to the thread, cudaDeviceReset() will destroy only the internal CUDA RT state
// for that CUcontext". This program measures three cases: a cuCtxCreate context current
// (the reset leaves it, its memory and its settings alone), the same with the primary
// context active beside it (does the reset destroy the primary context although it is not
// current? the run prints what it saw), and the primary context current, retained and
// configured by driver code (the reset tears it down under that code). Then it does the
// last to the primary context with the driver's cuDevicePrimaryCtxReset and compares.
//
//   device_reset [--device N]
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/check_driver.h"
#include "../common/context_flags.h"
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
// the primary context is reset, by the runtime or by the driver. What the reset loses is
// a setting, not memory: reading a setting back needs no pointer the reset may have freed.
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
        std::printf("cudaSetDevice + cudaDeviceReset: done\n");
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

    // Recovery. The old reference is still held (cuda.h: "Resetting the primary context does
    // not release it"), and retaining again makes the primary context active. With both
    // references held, no last release can have reset the context in between: a setting
    // found back at its default was lost to the reset itself.
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CUcontext primaryAgain = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primaryAgain, device));
    CHECK_DRIVER(cuCtxSetCurrent(primaryAgain));
    size_t fifoAfterRetain = 0;
    CHECK_DRIVER(cuCtxGetLimit(&fifoAfterRetain, CU_LIMIT_PRINTF_FIFO_SIZE));
    seen.settingLost = configuredFifo != defaultFifo && fifoAfterRetain == defaultFifo;
    std::printf("driver code, retained again while holding the old reference: printf FIFO %zu bytes (%s)\n",
                fifoAfterRetain, seen.settingLost ? "back to the default: the setting was lost" : "KEPT");
    seen.sameHandle = primaryAgain == primary;
    std::printf("primary context handle after retaining again: %s\n", seen.sameHandle ? "same handle" : "a new handle");
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));  // the new reference
    // The old one: cuda.h: "it is safe for other modules to call cuDevicePrimaryCtxRelease()
    // even after resetting the device"; what it returns is printed.
    seen.oldRelease = REPORT_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("driver code, releasing its old reference: %s\n", course::driverErrorName(seen.oldRelease));
    std::printf("primary context active at the end: %s\n", yesNo(interop::primaryContextActive(device)));
    return seen;
}

// What the program sees when cudaDeviceReset runs with a cuCtxCreate context current
// while the primary context of the same device is active: retained, with memory in it.
struct ResetBeside {
    bool activeBefore = false;
    unsigned int flagsBefore = 0;  // cuDevicePrimaryCtxGetState's flags word before the reset
    bool activeAfter = false;
    bool createdStillCurrent = false;  // and cuCtxSynchronize succeeds in it
    bool primaryMemoryFound = false;   // cuMemGetAddressRange, with the primary context current
    bool primaryMemoryIntact = false;  // found, and it reads back what was written
};

// cuDevicePrimaryCtxGetState, printed: the active flag and the flags word (also to *flags).
bool primaryActive(CUdevice device, const char* moment, unsigned int* flags) {
    const bool active = interop::primaryContextActive(device, flags);
    std::printf("primary context %s: active %s, flags 0x%x (%s)\n", moment, yesNo(active), *flags,
                course::describeContextFlags(*flags).c_str());
    return active;
}

// Library code keeps the primary context retained with memory in it; other code has its
// own cuCtxCreate context current; then cudaDeviceReset runs. Which context it acts on is
// observed, not assumed, and the clean-up is right for either outcome.
ResetBeside resetBesideActivePrimary(CUdevice device) {
    ResetBeside seen;
    constexpr int kCount = 4096;
    constexpr size_t kBytes = kCount * sizeof(float);
    std::vector<float> values(kCount);
    for (int i = 0; i < kCount; ++i) values[i] = static_cast<float>(3 * i + 1);
    // The library chooses how its context waits (not the default), so the flags word printed
    // below can be told from a word nobody read.
    CHECK_DRIVER(cuDevicePrimaryCtxSetFlags(device, CU_CTX_SCHED_BLOCKING_SYNC));
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));  // one reference: one release below
    CHECK_DRIVER(cuCtxPushCurrent(primary));
    CUdeviceptr inPrimary = 0;
    CHECK_DRIVER(cuMemAlloc(&inPrimary, kBytes));
    CHECK_DRIVER(cuMemcpyHtoD(inPrimary, values.data(), kBytes));
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    CUcontext created = nullptr;
    CHECK_DRIVER(course::ctxCreate(&created, 0, device));  // pushed: current on this thread
    seen.activeBefore = primaryActive(device, "before the reset", &seen.flagsBefore);

    CHECK_RUNTIME(cudaDeviceReset());
    std::printf("cudaDeviceReset with the created context current: done\n");
    unsigned int flagsAfter = 0;
    seen.activeAfter = primaryActive(device, "after the reset", &flagsAfter);
    CUcontext current = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    std::printf("current context after this reset: %s\n",
                current == created ? "the created context (unchanged)" : "CHANGED");
    const CUresult createdSync = REPORT_DRIVER(cuCtxSynchronize());
    std::printf("created context, cuCtxSynchronize after the reset: %s\n", course::driverErrorName(createdSync));
    seen.createdStillCurrent = current == created && createdSync == CUDA_SUCCESS;

    // The primary context's memory, asked with the primary context current. It is freed
    // only if it is still there: a reset that destroyed the context took the buffer with it.
    const CUresult pushed = REPORT_DRIVER(cuCtxPushCurrent(primary));
    std::printf("cuCtxPushCurrent(primary) after the reset: %s\n", course::driverErrorName(pushed));
    if (pushed == CUDA_SUCCESS) {
        CUdeviceptr base = 0;
        size_t size = 0;
        const CUresult range = REPORT_DRIVER(cuMemGetAddressRange(&base, &size, inPrimary));
        std::printf("primary context buffer, cuMemGetAddressRange after the reset: %s\n",
                    course::driverErrorName(range));
        seen.primaryMemoryFound = range == CUDA_SUCCESS && base == inPrimary;
        if (seen.primaryMemoryFound) {
            std::vector<float> back(kCount);
            CHECK_DRIVER(cuMemcpyDtoH(back.data(), inPrimary, kBytes));
            seen.primaryMemoryIntact = interop::countMatching(back, values) == kCount;
            CHECK_DRIVER(cuMemFree(inPrimary));
        }
        CHECK_DRIVER(cuCtxPopCurrent(&popped));
    }
    std::printf("primary context memory survives cudaDeviceReset with a created context current: %s\n",
                yesNo(seen.primaryMemoryIntact));
    // One retain, one release. cuda.h: "it is safe for other modules to call
    // cuDevicePrimaryCtxRelease() even after resetting the device."
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    CHECK_DRIVER(cuCtxDestroy(created));
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
    size_t configuredFifo = 0;  // the driver "is free to modify the requested value" (cuda.h)
    CHECK_DRIVER(cuCtxGetLimit(&configuredFifo, CU_LIMIT_PRINTF_FIFO_SIZE));
    constexpr int kCount = 4000;  // not a multiple of the kernel's 256-thread blocks
    constexpr size_t kBytes = kCount * sizeof(float);
    CUdeviceptr x = 0;
    CHECK_DRIVER(cuMemAlloc(&x, kBytes));
    std::vector<float> values(kCount);
    for (int i = 0; i < kCount; ++i) values[i] = static_cast<float>(i);
    CHECK_DRIVER(cuMemcpyHtoD(x, values.data(), kBytes));
    CHECK_RUNTIME(launchScale(interop::asRuntimePointer(x), 2.0f, kCount, nullptr));  // x = 2i
    // cuMemcpyDtoH is synchronous and goes to the stream the launch went to (stream 0), so
    // it returns after the kernel: no work of this context is running when the reset comes.
    std::vector<float> back(kCount);
    CHECK_DRIVER(cuMemcpyDtoH(back.data(), x, kBytes));
    std::vector<float> expected(kCount);
    for (int i = 0; i < kCount; ++i) expected[i] = 2.0f * values[i];
    const int launchOk = interop::countMatching(back, expected);
    std::printf("<<<>>> launch before the reset: %d of %d correct\n", launchOk, kCount);
    verdict.check("<<<>>> launch before the reset exact", launchOk == kCount);

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
    const bool settingKept = configuredFifo != defaultFifo && fifoAfterReset == configuredFifo;
    std::printf("printf FIFO after the reset: %zu bytes (%s)\n", fifoAfterReset,
                settingKept ? "still the configured value" : "CHANGED");
    verdict.check("created context keeps its printf FIFO setting", settingKept);
    const bool primaryStarted = interop::primaryContextActive(device);
    std::printf("primary context active after the reset: %s\n", yesNo(primaryStarted));
    verdict.check("the reset did not start the primary context", !primaryStarted);
    CHECK_RUNTIME(launchScale(interop::asRuntimePointer(x), 3.0f, kCount, nullptr));  // x = 6i
    CHECK_DRIVER(cuMemcpyDtoH(back.data(), x, kBytes));
    for (int i = 0; i < kCount; ++i) expected[i] = 6.0f * values[i];
    const int relaunchOk = interop::countMatching(back, expected);
    std::printf("<<<>>> launch after the reset, on the same buffer: %d of %d correct\n", relaunchOk, kCount);
    verdict.check("<<<>>> launch after the reset exact", relaunchOk == kCount);
    CHECK_DRIVER(cuMemFree(x));
    CHECK_DRIVER(cuCtxDestroy(context));
    const bool createdContextUntouched = stillCurrent && memoryKept && settingKept && relaunchOk == kCount;
    std::printf("cuCtxCreate context untouched by cudaDeviceReset: %s\n", yesNo(createdContextUntouched));

    // Step 3: the case that tells which context cudaDeviceReset acts on: a created context
    // current, the primary context of the same device active beside it. Its outcome is
    // printed; the checks hold whichever way it goes.
    course::printStep(3, "cudaDeviceReset with a created context current and the primary context active");
    const ResetBeside beside = resetBesideActivePrimary(device);
    verdict.check("primary context active before the reset", beside.activeBefore);
    verdict.check("primary context's flags word is the one the library set",
                  (beside.flagsBefore & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC);
    verdict.check("created context still current and synchronising after the reset", beside.createdStillCurrent);
    const bool agree = beside.activeAfter ? beside.primaryMemoryIntact : !beside.primaryMemoryFound;
    verdict.check("primary context's active flag agrees with its memory after the reset", agree);

    // Step 4: the primary context, retained and configured by driver code, reset by the runtime.
    course::printStep(4, "cudaDeviceReset under driver code that retained the primary context");
    const ResetSeen byRuntime = resetRetainedPrimary(device, ordinal, Reset::Runtime);
    verdict.check("retaining the primary context leaves no context current", byRuntime.retainLeftNoneCurrent);
    verdict.check("cudaDeviceReset loses the primary context's setting", byRuntime.settingLost);

    // Step 5: the same sequence with the driver's own reset of the primary context.
    course::printStep(5, "cuDevicePrimaryCtxReset, for comparison");
    const ResetSeen byDriver = resetRetainedPrimary(device, ordinal, Reset::Driver);
    verdict.check("cuDevicePrimaryCtxReset loses the primary context's setting", byDriver.settingLost);
    const bool sameEffect =
        byRuntime.activeAfterReset == byDriver.activeAfterReset &&
        byRuntime.limitAfterReset == byDriver.limitAfterReset && byRuntime.oldRelease == byDriver.oldRelease &&
        byRuntime.settingLost == byDriver.settingLost && byRuntime.sameHandle == byDriver.sameHandle;
    std::printf("cudaDeviceReset and cuDevicePrimaryCtxReset, same observations: %s\n", yesNo(sameEffect));
    verdict.check("both resets give the same observations", sameEffect);

    // Step 6: the reset spared the created context, and tore down the retained primary
    // context's setting, the same way the driver's reset does (each check above printed its line).
    course::printStep(6, "check");
    return verdict.finish();
}
