// Lesson 07 — the runtime API and the driver API in one program.
//
// libcudart (cuda_runtime_api.h, cudaMalloc, <<<>>>) is a library built on
// libcuda: every runtime call runs in the driver context that is current on the
// calling thread. This lesson shows which context that is, passes memory, a
// stream and events between the two APIs (a <<<>>> kernel and cuBLAS working on
// cuMemAlloc memory), and ends with the two traps: a thread with no current
// context, and cudaDeviceReset under driver code.
//
//   07-runtime-interop [--device N]
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <type_traits>
#include <vector>

#include "scale_kernel.h"
#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"

// The runtime reports cudaError_t and cuBLAS cublasStatus_t, not CUresult: the same
// fail-fast form as CHECK_DRIVER, with each library's own codes.
#define CHECK_RUNTIME(call)                                                                                          \
    do {                                                                                                             \
        const cudaError_t checkRuntimeResult_ = (call);                                                              \
        if (checkRuntimeResult_ != cudaSuccess) {                                                                    \
            std::fflush(stdout);                                                                                     \
            std::fprintf(stderr, "CUDA runtime call failed: %s\n  error: %s (code %d): %s\n  at:    %s:%d\n", #call, \
                         cudaGetErrorName(checkRuntimeResult_), static_cast<int>(checkRuntimeResult_),               \
                         cudaGetErrorString(checkRuntimeResult_), __FILE__, __LINE__);                               \
            std::exit(EXIT_FAILURE);                                                                                 \
        }                                                                                                            \
    } while (0)

#define CHECK_CUBLAS(call)                                                                                       \
    do {                                                                                                         \
        const cublasStatus_t checkCublasStatus_ = (call);                                                        \
        if (checkCublasStatus_ != CUBLAS_STATUS_SUCCESS) {                                                       \
            std::fflush(stdout);                                                                                 \
            std::fprintf(stderr, "cuBLAS call failed: %s\n  status: %d (see cublasStatus_t)\n  at:     %s:%d\n", \
                         #call, static_cast<int>(checkCublasStatus_), __FILE__, __LINE__);                       \
            std::exit(EXIT_FAILURE);                                                                             \
        }                                                                                                        \
    } while (0)

namespace {

// The two APIs share one virtual address space (unified addressing, every 64-bit
// platform since CUDA 4), so a device address is the same number in both. The driver
// spells it as an integer (CUdeviceptr, 64 bits), the runtime as a typed pointer; the
// cast goes through uintptr_t, the integer type made to hold a pointer. Nothing is
// copied or translated: it is the same allocation.
float* asRuntimePointer(CUdeviceptr address) {
    return reinterpret_cast<float*>(static_cast<std::uintptr_t>(address));
}
CUdeviceptr asDriverAddress(const void* pointer) {
    return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(pointer));
}

// How many of the values match what the host computed. The values are small
// integers, exact in float, so the comparison is exact.
int countMatching(const std::vector<float>& got, const std::vector<float>& expected) {
    int matching = 0;
    for (size_t i = 0; i < got.size(); ++i) matching += got[i] == expected[i] ? 1 : 0;
    return matching;
}

bool primaryContextActive(CUdevice device) {
    unsigned int flags = 0;
    int active = 0;
    CHECK_DRIVER(cuDevicePrimaryCtxGetState(device, &flags, &active));
    return active != 0;
}

const char* yesNo(bool value) {
    return value ? "yes" : "no";
}

}  // namespace

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

    // Step 2: a context created and made current with the driver API. The runtime
    // creates nothing: its calls run in whatever context is current on the thread.
    course::printStep(2, "a driver context becomes the runtime's context");
    CUcontext context = nullptr;
    CHECK_DRIVER(course::ctxCreate(&context, 0, device));  // created and pushed: current on this thread
    std::printf("driver context: %p (cuCtxCreate, current on this thread)\n", static_cast<void*>(context));
    const bool primaryActiveBefore = primaryContextActive(device);
    std::printf("primary context active before runtime calls: %s\n", yesNo(primaryActiveBefore));

    int runtimeDevice = -1;
    CHECK_RUNTIME(cudaGetDevice(&runtimeDevice));
    std::printf("cudaGetDevice: %d\n", runtimeDevice);
    constexpr int kCount = 4096;
    constexpr size_t kBytes = kCount * sizeof(float);
    void* runtimeBuffer = nullptr;
    CHECK_RUNTIME(cudaMalloc(&runtimeBuffer, kBytes));
    // The driver can say which context an allocation belongs to.
    CUcontext owner = nullptr;
    CHECK_DRIVER(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, asDriverAddress(runtimeBuffer)));
    const bool runtimeUsedDriverContext = owner == context;
    std::printf("cudaMalloc memory belongs to: %s\n", runtimeUsedDriverContext ? "driver context" : "another context");

    CUcontext current = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    const bool unchangedAfterRuntime = current == context;
    std::printf("current context after runtime calls: %s\n",
                unchangedAfterRuntime ? "driver context (unchanged)" : "CHANGED");
    const bool primaryActiveAfter = primaryContextActive(device);
    std::printf("primary context active after runtime calls: %s\n", yesNo(primaryActiveAfter));

    // Step 3: CUstream and cudaStream_t are one type, as are CUevent and cudaEvent_t,
    // so one stream carries driver copies and a runtime kernel, in order, and events
    // recorded by the driver are timed by the runtime.
    course::printStep(3, "one stream and its events, driver memory in a <<<>>> kernel");
    static_assert(std::is_same_v<CUstream, cudaStream_t>, "CUstream and cudaStream_t are the same type");
    static_assert(std::is_same_v<CUevent, cudaEvent_t>, "CUevent and cudaEvent_t are the same type");
    std::printf("CUstream is cudaStream_t: yes (same type)\n");
    std::printf("CUevent is cudaEvent_t: yes (same type)\n");
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr x = 0;
    CHECK_DRIVER(cuMemAlloc(&x, kBytes));
    float* xPointer = asRuntimePointer(x);
    std::printf("CUdeviceptr as float*: 0x%llx -> %p\n", static_cast<unsigned long long>(x),
                static_cast<void*>(xPointer));

    std::vector<float> hostX(kCount);
    for (int i = 0; i < kCount; ++i) hostX[i] = static_cast<float>(i);
    CUevent start = nullptr;
    CUevent stop = nullptr;
    CHECK_DRIVER(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuMemcpyHtoDAsync(x, hostX.data(), kBytes, stream));
    CHECK_DRIVER(cuEventRecord(start, stream));
    CHECK_RUNTIME(launchScale(xPointer, 2.0f, kCount, stream));  // the CUstream, as a cudaStream_t
    CHECK_DRIVER(cuEventRecord(stop, stream));
    std::vector<float> scaled(kCount);
    CHECK_DRIVER(cuMemcpyDtoHAsync(scaled.data(), x, kBytes, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    float kernelMs = 0.0f;
    CHECK_RUNTIME(cudaEventElapsedTime(&kernelMs, start, stop));  // CUevents, timed by the runtime
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));

    std::vector<float> expectedScaled(kCount);
    for (int i = 0; i < kCount; ++i) expectedScaled[i] = 2.0f * static_cast<float>(i);
    const int scaledOk = countMatching(scaled, expectedScaled);
    std::printf("<<<>>> kernel on cuMemAlloc memory: %d of %d correct\n", scaledOk, kCount);
    std::printf("kernel time (cuEventRecord, cudaEventElapsedTime): %.3f ms\n", kernelMs);

    // Step 4: cuBLAS is a runtime library. Its handle belongs to the context current
    // when cublasCreate runs, so create it with the driver context current and destroy
    // it before that context.
    course::printStep(4, "cuBLAS on driver memory");
    cublasHandle_t blas = nullptr;
    CHECK_CUBLAS(cublasCreate(&blas));
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    const bool unchangedAfterCublas = current == context;
    std::printf("current context after cublasCreate: %s\n",
                unchangedAfterCublas ? "driver context (unchanged)" : "CHANGED");
    CHECK_CUBLAS(cublasSetStream(blas, stream));

    CUdeviceptr y = 0;
    CHECK_DRIVER(cuMemAlloc(&y, kBytes));
    std::vector<float> hostY(kCount, 1.0f);
    CHECK_DRIVER(cuMemcpyHtoDAsync(y, hostY.data(), kBytes, stream));
    const float alpha = 0.5f;
    // y = alpha * x + y, where x holds 2i from step 3: y[i] = i + 1.
    CHECK_CUBLAS(cublasSaxpy(blas, kCount, &alpha, xPointer, 1, asRuntimePointer(y), 1));
    std::vector<float> saxpy(kCount);
    CHECK_DRIVER(cuMemcpyDtoHAsync(saxpy.data(), y, kBytes, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    CHECK_CUBLAS(cublasDestroy(blas));
    CHECK_DRIVER(cuMemFree(y));

    std::vector<float> expectedSaxpy(kCount);
    for (int i = 0; i < kCount; ++i) expectedSaxpy[i] = static_cast<float>(i) + 1.0f;
    const int saxpyOk = countMatching(saxpy, expectedSaxpy);
    std::printf("cublasSaxpy on cuMemAlloc memory: %d of %d correct\n", saxpyOk, kCount);

    // Step 5: the other direction. The runtime writes its own allocation; the driver
    // reads it back through the same address as a CUdeviceptr.
    course::printStep(5, "runtime memory read by the driver");
    std::vector<float> hostR(kCount);
    for (int i = 0; i < kCount; ++i) hostR[i] = 3.0f * static_cast<float>(i);
    CHECK_RUNTIME(cudaMemcpy(runtimeBuffer, hostR.data(), kBytes, cudaMemcpyHostToDevice));
    std::vector<float> readBack(kCount);
    CHECK_DRIVER(cuMemcpyDtoH(readBack.data(), asDriverAddress(runtimeBuffer), kBytes));
    CHECK_RUNTIME(cudaFree(runtimeBuffer));
    const int readBackOk = countMatching(readBack, hostR);
    std::printf("cuMemcpyDtoH from cudaMalloc memory: %d of %d correct\n", readBackOk, kCount);

    // Step 6: a context is current per thread. A new thread starts with none, even
    // though this one has the driver context; the runtime then uses, and initialises,
    // the device's primary context. Without cudaSetDevice a new thread's runtime
    // device is 0, whatever the other threads chose.
    course::printStep(6, "a new thread: the runtime takes the primary context");
    struct WorkerView {
        CUcontext before = nullptr;
        CUcontext after = nullptr;
        CUcontext primary = nullptr;
        bool primaryActive = false;
    } worker;
    std::thread thread([&worker, ordinal, device] {
        CHECK_DRIVER(cuCtxGetCurrent(&worker.before));
        CHECK_RUNTIME(cudaSetDevice(ordinal));  // runtime and driver ordinals agree
        CHECK_RUNTIME(cudaFree(nullptr));       // the classic "start the runtime now" call
        CHECK_DRIVER(cuCtxGetCurrent(&worker.after));
        // Retaining only counts a reference; it does not make the context current.
        CHECK_DRIVER(cuDevicePrimaryCtxRetain(&worker.primary, device));
        worker.primaryActive = primaryContextActive(device);
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    });
    thread.join();
    const bool workerStartedEmpty = worker.before == nullptr;
    const bool workerGotPrimary = worker.after != nullptr && worker.after == worker.primary;
    std::printf("worker thread, current context at start: %s\n", workerStartedEmpty ? "none" : "SOME");
    std::printf("worker thread, current context after cudaSetDevice + cudaFree(0): %s\n",
                workerGotPrimary ? "primary context (same handle as cuDevicePrimaryCtxRetain)" : "NOT the primary");
    std::printf("worker thread, same as the main thread's driver context: %s\n", yesNo(worker.after == context));
    std::printf("primary context active: %s\n", yesNo(worker.primaryActive));
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    const bool mainUnchanged = current == context;
    std::printf("main thread, current context: %s\n", mainUnchanged ? "driver context (unchanged)" : "CHANGED");

    // Step 7: release this thread's resources in reverse order. The runtime's state in
    // the driver context (its module for scaleKernel) goes with the context.
    course::printStep(7, "release the driver context's resources");
    CHECK_DRIVER(cuMemFree(x));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuCtxDestroy(context));  // also pops it from this thread
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    std::printf("current context after cuCtxDestroy: %s\n", current == nullptr ? "none" : "SOME");

    // Step 8: the trap. Driver code (a plug-in, say) retains the primary context and
    // configures it; runtime code elsewhere calls cudaDeviceReset. The reset tears the
    // primary context down although the driver code still holds a reference: its
    // allocations, modules, streams and settings are gone. (This step changes a setting,
    // not memory: an allocation the reset frees is reported as leaked by memcheck.)
    course::printStep(8, "cudaDeviceReset under driver code that retained the primary context");
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    const bool retainLeftNoneCurrent = current == nullptr;
    std::printf("current context after cuDevicePrimaryCtxRetain: %s\n",
                retainLeftNoneCurrent ? "none (retaining does not make it current)" : "SOME");
    CHECK_DRIVER(cuCtxSetCurrent(primary));
    size_t defaultFifo = 0;
    CHECK_DRIVER(cuCtxGetLimit(&defaultFifo, CU_LIMIT_PRINTF_FIFO_SIZE));
    CHECK_DRIVER(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 2 * defaultFifo));
    size_t configuredFifo = 0;
    CHECK_DRIVER(cuCtxGetLimit(&configuredFifo, CU_LIMIT_PRINTF_FIFO_SIZE));
    std::printf("driver code: printf FIFO of the primary context set to %zu bytes (default %zu bytes)\n",
                configuredFifo, defaultFifo);

    // With the primary context current the reset acts on it. (With a cuCtxCreate
    // context current, cudaDeviceReset only drops the runtime's state in that context.)
    CHECK_RUNTIME(cudaSetDevice(ordinal));
    CHECK_RUNTIME(cudaDeviceReset());
    std::printf("cudaDeviceReset: done\n");
    std::printf("primary context active after cudaDeviceReset: %s\n", yesNo(primaryContextActive(device)));
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    std::printf("current context after cudaDeviceReset: %s\n", current == primary
                                                                   ? "the primary context's handle (still current)"
                                                                   : (current == nullptr ? "none" : "another context"));
    // What the driver code sees when it next uses its context: measured, not assumed.
    size_t fifoAfterReset = 0;
    const CUresult afterReset = REPORT_DRIVER(cuCtxGetLimit(&fifoAfterReset, CU_LIMIT_PRINTF_FIFO_SIZE));
    if (afterReset == CUDA_SUCCESS) {
        std::printf("driver code, cuCtxGetLimit after the reset: CUDA_SUCCESS, %zu bytes\n", fifoAfterReset);
    } else {
        std::printf("driver code, cuCtxGetLimit after the reset: %s\n", course::driverErrorName(afterReset));
    }

    // Recovery: drop the old reference (documented as safe after a reset, and measured
    // here) and retain again, which initialises a fresh primary context.
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    const CUresult oldRelease = REPORT_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("driver code, releasing its old reference: %s\n", course::driverErrorName(oldRelease));
    CUcontext primaryAgain = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primaryAgain, device));
    CHECK_DRIVER(cuCtxSetCurrent(primaryAgain));
    size_t fifoAfterRetain = 0;
    CHECK_DRIVER(cuCtxGetLimit(&fifoAfterRetain, CU_LIMIT_PRINTF_FIFO_SIZE));
    const bool settingLost = configuredFifo != defaultFifo && fifoAfterRetain == defaultFifo;
    std::printf("driver code, after release + retain: printf FIFO %zu bytes (%s)\n", fifoAfterRetain,
                settingLost ? "back to the default: the setting was lost" : "UNEXPECTED");
    std::printf("primary context handle after retaining again: %s\n",
                primaryAgain == primary ? "same handle" : "a new handle");
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context active at the end: %s\n", yesNo(primaryContextActive(device)));

    // Step 9: the lesson's own check: each crossing gave the host's answer, and the
    // runtime used the context the driver made current (documented behaviour).
    course::printStep(9, "check");
    const bool pass = runtimeDevice == ordinal && runtimeUsedDriverContext && unchangedAfterRuntime &&
                      scaledOk == kCount && unchangedAfterCublas && saxpyOk == kCount && readBackOk == kCount &&
                      workerStartedEmpty && workerGotPrimary && mainUnchanged && retainLeftNoneCurrent && settingLost;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
