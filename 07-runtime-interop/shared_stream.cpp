// Lesson 07, program 2 — one stream, its events and driver memory, used by both APIs.
//
// CUstream is cudaStream_t and CUevent is cudaEvent_t, and a CUdeviceptr is the
// runtime's device pointer: so driver copies, a kernel launched with <<<>>> and a
// cuBLAS call run in order on one stream, on memory from cuMemAlloc. The events around
// the two launches show what the first <<<>>> in a context spans.
//
//   shared_stream [--device N]
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "interop.h"
#include "scale_kernel.h"

// cuBLAS reports cublasStatus_t: the same fail-fast form, with its own codes.
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

// Not a multiple of the kernel's 256-thread blocks: the last block is partial, so a grid
// that rounds down leaves values unscaled.
constexpr int kCount = 4000;
constexpr size_t kBytes = kCount * sizeof(float);

// Milliseconds between two events recorded on a stream that has since been synchronised.
float elapsedMs(CUevent start, CUevent stop) {
    float ms = 0.0f;
    CHECK_RUNTIME(cudaEventElapsedTime(&ms, start, stop));  // CUevents, timed by the runtime
    return ms;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;

    // Step 1: a driver context, current on this thread: the runtime calls below run in it.
    course::printStep(1, "initialise the driver, create a context");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device name: %s\n", name);
    CUcontext context = nullptr;
    CHECK_DRIVER(course::ctxCreate(&context, 0, device));

    // Step 2: on one stream: driver copies and two <<<>>> launches on the cuMemAlloc buffer x.
    // The first launch runs alone and is waited for: the first <<<>>> in a context may set up
    // the runtime there and load the kernel (lazy loading, the default on Linux since CUDA 12.2:
    // Programming Guide §4.7). Then the copy of x, the warm launch and the copy back. Work sent
    // to another stream by mistake (stream 0 for this one) would go unnoticed here: nothing
    // else runs, so it would finish in time and give the same values.
    course::printStep(2, "one stream and its events, driver memory in a <<<>>> kernel");
    static_assert(std::is_same_v<CUstream, cudaStream_t>, "CUstream and cudaStream_t are the same type");
    static_assert(std::is_same_v<CUevent, cudaEvent_t>, "CUevent and cudaEvent_t are the same type");
    std::printf("CUstream is cudaStream_t: yes (same type)\n");
    std::printf("CUevent is cudaEvent_t: yes (same type)\n");
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));  // no implicit order with stream 0
    CUdeviceptr x = 0;
    CHECK_DRIVER(cuMemAlloc(&x, kBytes));
    float* xPointer = interop::asRuntimePointer(x);
    std::printf("CUdeviceptr as float*: 0x%llx -> %p\n", static_cast<unsigned long long>(x),
                static_cast<void*>(xPointer));
    void* pinned = nullptr;  // [0, kCount): what x receives; [kCount, 2 kCount): what x gives back
    CHECK_DRIVER(cuMemAllocHost(&pinned, 2 * kBytes));
    float* hostX = static_cast<float*>(pinned);
    float* hostScaled = hostX + kCount;
    for (int i = 0; i < kCount; ++i) hostX[i] = static_cast<float>(i);

    CUevent events[4] = {};
    for (CUevent& event : events) CHECK_DRIVER(cuEventCreate(&event, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuMemsetD32Async(x, 0x3f800000u, kCount, stream));  // x = 1.0f (its bit pattern)
    CHECK_DRIVER(cuEventRecord(events[0], stream));
    CHECK_RUNTIME(launchScale(xPointer, 2.0f, kCount, stream));  // first launch: x = 2
    CHECK_DRIVER(cuEventRecord(events[1], stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    CHECK_DRIVER(cuMemcpyHtoDAsync(x, hostX, kBytes, stream));  // x = i
    CHECK_DRIVER(cuEventRecord(events[2], stream));
    CHECK_RUNTIME(launchScale(xPointer, 3.0f, kCount, stream));  // warm launch: x = 3i
    CHECK_DRIVER(cuEventRecord(events[3], stream));
    CHECK_DRIVER(cuMemcpyDtoHAsync(hostScaled, x, kBytes, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    course::Verdict verdict;
    const float firstLaunchMs = elapsedMs(events[0], events[1]);
    const float kernelMs = elapsedMs(events[2], events[3]);
    const float sinceFirstMs = elapsedMs(events[1], events[3]);
    for (int i = 3; i >= 0; --i) CHECK_DRIVER(cuEventDestroy(events[i]));

    std::vector<float> scaled(hostScaled, hostScaled + kCount);
    std::vector<float> expectedScaled(kCount);
    for (int i = 0; i < kCount; ++i) expectedScaled[i] = 3.0f * static_cast<float>(i);
    const int scaledOk = interop::countMatching(scaled, expectedScaled);
    std::printf("<<<>>> kernel on cuMemAlloc memory: %d of %d correct\n", scaledOk, kCount);
    verdict.check("<<<>>> kernel on driver memory exact", scaledOk == kCount);
    std::printf("first launch, events[0] to events[1]: %.3f ms\n", firstLaunchMs);
    std::printf("warm launch, events[2] to events[3]: %.3f ms\n", kernelMs);
    std::printf("first launch's end to warm launch's end, events[1] to events[3]: %.3f ms\n", sinceFirstMs);
    verdict.check("warm launch timed after the first launch ended", kernelMs <= sinceFirstMs);

    // Step 3: cuBLAS is a runtime library: cublasCreate runs with the driver context current,
    // and the handle is destroyed before that context. cuBLAS works on the stream
    // cublasSetStream gave it, and says which one (cublasGetStream).
    course::printStep(3, "cuBLAS on driver memory");
    cublasHandle_t blas = nullptr;
    CHECK_CUBLAS(cublasCreate(&blas));
    CUcontext current = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    const bool unchangedAfterCublas = current == context;
    std::printf("current context after cublasCreate: %s\n",
                unchangedAfterCublas ? "driver context (unchanged)" : "CHANGED");
    verdict.check("cublasCreate leaves the current context unchanged", unchangedAfterCublas);
    CHECK_CUBLAS(cublasSetStream(blas, stream));
    cudaStream_t blasStream = nullptr;
    CHECK_CUBLAS(cublasGetStream(blas, &blasStream));
    std::printf("cublasGetStream: %s\n", blasStream == stream ? "the CUstream" : "ANOTHER stream");
    verdict.check("cuBLAS works on the CUstream", blasStream == stream);
    CUdeviceptr y = 0;
    CHECK_DRIVER(cuMemAlloc(&y, kBytes));
    std::vector<float> hostY(kCount, 1.0f);
    CHECK_DRIVER(cuMemcpyHtoDAsync(y, hostY.data(), kBytes, stream));
    const float alpha = 2.0f;
    // y = alpha * x + y, where x holds 3i from step 2: y[i] = 6i + 1.
    CHECK_CUBLAS(cublasSaxpy(blas, kCount, &alpha, xPointer, 1, interop::asRuntimePointer(y), 1));
    std::vector<float> saxpy(kCount);
    CHECK_DRIVER(cuMemcpyDtoHAsync(saxpy.data(), y, kBytes, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    std::vector<float> expectedSaxpy(kCount);
    for (int i = 0; i < kCount; ++i) expectedSaxpy[i] = 6.0f * static_cast<float>(i) + 1.0f;
    const int saxpyOk = interop::countMatching(saxpy, expectedSaxpy);
    std::printf("cublasSaxpy on cuMemAlloc memory: %d of %d correct\n", saxpyOk, kCount);
    verdict.check("cublasSaxpy on driver memory exact", saxpyOk == kCount);

    // Step 4: release in reverse order; the handle before the context it belongs to.
    course::printStep(4, "release");
    CHECK_DRIVER(cuMemFree(y));
    CHECK_CUBLAS(cublasDestroy(blas));
    CHECK_DRIVER(cuMemFreeHost(pinned));
    CHECK_DRIVER(cuMemFree(x));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuCtxDestroy(context));  // also pops it from this thread
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    std::printf("current context after cuCtxDestroy: %s\n", current == nullptr ? "none" : "SOME");
    verdict.check("no current context after cuCtxDestroy", current == nullptr);

    // Step 5: each crossing gave the host's answer (each check above printed its line).
    course::printStep(5, "check");
    return verdict.finish();
}
