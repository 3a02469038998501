// Lesson 07, program 1 — which context a runtime call runs in.
//
// libcudart (cuda_runtime_api.h: cudaMalloc, cudaMemcpy, <<<>>>) is a library built
// on libcuda: its calls operate on the driver context current to the calling thread,
// "with some exceptions" that cuda_runtime_api.h lists (cudaSetDevice, for one, makes the
// primary context current). This program makes a context current with the driver, lets
// the runtime allocate in it, reads the runtime's memory with the driver, and then shows
// a thread with no current context, where the runtime takes a primary context.
//
//   current_context [--device N]
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "interop.h"

using interop::yesNo;

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    // Step 1: the driver first, as in every lesson. The runtime needs no init call:
    // it starts itself on its first call, on top of the same libcuda.so.1.
    course::printStep(1, "initialise the driver, pick the device");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    int runtimeVersion = 0;
    CHECK_RUNTIME(cudaRuntimeGetVersion(&runtimeVersion));
    std::printf("device: %d\n", ordinal);
    std::printf("device name: %s\n", name);
    std::printf("driver CUDA version: %s\n", course::formatCudaVersion(driverVersion).c_str());
    std::printf("runtime CUDA version: %s (cudaRuntimeGetVersion = %d)\n",
                course::formatCudaVersion(runtimeVersion).c_str(), runtimeVersion);

    // Step 2: a context created and made current with the driver API. The runtime calls
    // below run in it; the primary context's active flag shows whether they started another.
    course::printStep(2, "a driver context becomes the runtime's context");
    course::Verdict verdict;
    CUcontext context = nullptr;
    CHECK_DRIVER(course::ctxCreate(&context, 0, device));  // created and pushed: current on this thread
    std::printf("driver context: %p (cuCtxCreate, current on this thread)\n", static_cast<void*>(context));
    const bool primaryActiveBefore = interop::primaryContextActive(device);
    std::printf("primary context active before runtime calls: %s\n", yesNo(primaryActiveBefore));

    int runtimeDevice = -1;
    CHECK_RUNTIME(cudaGetDevice(&runtimeDevice));
    std::printf("cudaGetDevice: %d\n", runtimeDevice);
    // With --device 0 this check is weak: a runtime that ignored the current context and
    // took a default device might answer 0 too. Only --device N with N != 0 tells them apart.
    verdict.check("cudaGetDevice names the current context's device", runtimeDevice == ordinal);
    constexpr int kCount = 4096;
    constexpr size_t kBytes = kCount * sizeof(float);
    void* runtimeBuffer = nullptr;
    CHECK_RUNTIME(cudaMalloc(&runtimeBuffer, kBytes));
    // The driver can say which context an allocation belongs to.
    CUcontext owner = nullptr;
    CHECK_DRIVER(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, interop::asDriverAddress(runtimeBuffer)));
    const bool runtimeUsedDriverContext = owner == context;
    std::printf("cudaMalloc memory belongs to: %s\n", runtimeUsedDriverContext ? "driver context" : "another context");
    verdict.check("cudaMalloc memory belongs to the driver context", runtimeUsedDriverContext);
    CUcontext current = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    const bool unchangedAfterRuntime = current == context;
    std::printf("current context after runtime calls: %s\n",
                unchangedAfterRuntime ? "driver context (unchanged)" : "CHANGED");
    verdict.check("runtime calls leave the current context unchanged", unchangedAfterRuntime);
    const bool primaryActiveAfter = interop::primaryContextActive(device);
    std::printf("primary context active after runtime calls: %s\n", yesNo(primaryActiveAfter));
    verdict.check("runtime calls in the driver context leave the primary context inactive", !primaryActiveAfter);

    // Step 3: the runtime writes its own allocation; the driver reads it back
    // through the same address as a CUdeviceptr.
    course::printStep(3, "runtime memory read by the driver");
    std::vector<float> hostR(kCount);
    for (int i = 0; i < kCount; ++i) hostR[i] = 3.0f * static_cast<float>(i);
    CHECK_RUNTIME(cudaMemcpy(runtimeBuffer, hostR.data(), kBytes, cudaMemcpyHostToDevice));
    std::vector<float> readBack(kCount);
    CHECK_DRIVER(cuMemcpyDtoH(readBack.data(), interop::asDriverAddress(runtimeBuffer), kBytes));
    const int readBackOk = interop::countMatching(readBack, hostR);
    std::printf("cuMemcpyDtoH from cudaMalloc memory: %d of %d correct\n", readBackOk, kCount);
    verdict.check("driver reads what the runtime wrote", readBackOk == kCount);

    // Step 4: a context is current per thread. A new thread starts with none, even though
    // this one has the driver context. cudaMalloc needs an active context, so on that thread
    // the runtime selects a device's primary context, makes it current and initialises it
    // (cuda_runtime_api.h, "Initialization and Tear-Down"). Which device: the worker asks
    // cudaGetDevice; with no cudaSetDevice on this thread "a default device is selected"
    // (cuda_runtime_api.h, cudaSetDeviceFlags), whatever device other threads use. The
    // worker does not use CHECK_DRIVER (std::exit from a worker thread): it records the
    // first failed call, main reports it.
    course::printStep(4, "a new thread: the runtime takes the primary context");
    struct WorkerView {
        CUcontext before = nullptr;
        CUcontext after = nullptr;
        CUcontext primary = nullptr;
        int runtimeDevice = -1;
        int primaryActive = 0;
        interop::WorkerStatus status;
    } worker;
    std::thread thread([&worker] {
        interop::WorkerStatus& s = worker.status;
        if (!s.driver(cuCtxGetCurrent(&worker.before), "cuCtxGetCurrent")) return;
        void* scratch = nullptr;  // no cudaSetDevice first: the runtime picks the context itself
        if (!s.runtime(cudaMalloc(&scratch, sizeof(float)), "cudaMalloc")) return;
        CUdevice runtimeDevice = 0;
        unsigned int flags = 0;
        // The active flag is read before this thread retains anything: only the runtime can
        // have set it. Retaining makes the primary context active (cuda.h) but not current.
        if (s.driver(cuCtxGetCurrent(&worker.after), "cuCtxGetCurrent") &&
            s.runtime(cudaGetDevice(&worker.runtimeDevice), "cudaGetDevice") &&
            s.driver(cuDeviceGet(&runtimeDevice, worker.runtimeDevice), "cuDeviceGet") &&
            s.driver(cuDevicePrimaryCtxGetState(runtimeDevice, &flags, &worker.primaryActive),
                     "cuDevicePrimaryCtxGetState") &&
            s.driver(cuDevicePrimaryCtxRetain(&worker.primary, runtimeDevice), "cuDevicePrimaryCtxRetain"))
            s.driver(cuDevicePrimaryCtxRelease(runtimeDevice), "cuDevicePrimaryCtxRelease");
        s.runtime(cudaFree(scratch), "cudaFree");  // freed on every path after the allocation
    });
    thread.join();
    if (worker.status.failedCall != nullptr)
        std::printf("worker thread: %s failed with %s\n", worker.status.failedCall, worker.status.error);
    if (!verdict.check("worker thread's calls succeed", worker.status.failedCall == nullptr)) {
        CHECK_RUNTIME(cudaFree(runtimeBuffer));
        CHECK_DRIVER(cuCtxDestroy(context));
        return verdict.finish();
    }
    const bool workerStartedEmpty = worker.before == nullptr;
    const bool workerGotPrimary = worker.after != nullptr && worker.after == worker.primary;
    std::printf("worker thread, current context at start: %s\n", workerStartedEmpty ? "none" : "SOME");
    verdict.check("worker thread starts with no current context", workerStartedEmpty);
    std::printf("worker thread, runtime device (cudaGetDevice): %d\n", worker.runtimeDevice);
    std::printf("worker thread, current context after cudaMalloc: %s\n",
                workerGotPrimary ? "primary context (same handle as cuDevicePrimaryCtxRetain)" : "NOT the primary");
    verdict.check("runtime on the worker thread takes the primary context", workerGotPrimary);
    std::printf("worker thread, same as the main thread's driver context: %s\n", yesNo(worker.after == context));
    std::printf("primary context active after the worker's cudaMalloc, before any retain: %s\n",
                yesNo(worker.primaryActive != 0));
    verdict.check("the worker's runtime call initialised the primary context", worker.primaryActive != 0);
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    const bool mainUnchanged = current == context;
    std::printf("main thread, current context: %s\n", mainUnchanged ? "driver context (unchanged)" : "CHANGED");
    verdict.check("main thread's context unchanged by the worker", mainUnchanged);

    // Step 5: release in reverse order. The runtime's state in the driver context goes
    // with the context; the primary context stays active until a cudaDeviceReset or the
    // process ends (cuda_runtime_api.h: "Primary contexts will remain active until they are
    // explicitly deinitialized using cudaDeviceReset()").
    course::printStep(5, "release");
    CHECK_RUNTIME(cudaFree(runtimeBuffer));
    CHECK_DRIVER(cuCtxDestroy(context));  // also pops it from this thread
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    std::printf("current context after cuCtxDestroy: %s\n", current == nullptr ? "none" : "SOME");
    verdict.check("no current context after cuCtxDestroy", current == nullptr);

    // Step 6: the runtime used the context the driver made current, and a primary
    // context where there was none (documented behaviour, measured here): each check above
    // printed its line where the program learnt the answer; the verdict collects them.
    course::printStep(6, "check");
    return verdict.finish();
}
