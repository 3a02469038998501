// Lesson 07, program 2 — one stream, its events and driver memory, used by both APIs.
//
// CUstream is cudaStream_t and CUevent is cudaEvent_t, and a CUdeviceptr is the
// runtime's device pointer: so driver copies, a kernel launched with <<<>>> and a
// cuBLAS call run in order on one stream, on memory from cuMemAlloc. The events
// around the kernel also show what the first <<<>>> launch in a context costs.
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

    // Step 1: a driver context, current on this thread: every runtime call below runs in it.
    course::printStep(1, "initialise the driver, create a context");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device name: %s\n", name);
    CUcontext context = nullptr;
    CHECK_DRIVER(course::ctxCreate(&context, 0, device));

    // Step 2: on one stream: a driver copy, a <<<>>> kernel on the cuMemAlloc buffer,
    // a driver copy back. The kernel is launched twice between driver events: the
    // first <<<>>> in a context also makes the runtime set itself up there and load
    // its module (lazily, at first use, by default since CUDA 12.2). That happens on
    // the host inside the launch call, between the two cuEventRecord calls, so the
    // first interval measures launch latency, not the kernel; the second launch
    // finds everything loaded.
    course::printStep(2, "one stream and its events, driver memory in a <<<>>> kernel");
    static_assert(std::is_same_v<CUstream, cudaStream_t>, "CUstream and cudaStream_t are the same type");
    static_assert(std::is_same_v<CUevent, cudaEvent_t>, "CUevent and cudaEvent_t are the same type");
    std::printf("CUstream is cudaStream_t: yes (same type)\n");
    std::printf("CUevent is cudaEvent_t: yes (same type)\n");
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    constexpr int kCount = 4096;
    constexpr size_t kBytes = kCount * sizeof(float);
    CUdeviceptr x = 0;
    CHECK_DRIVER(cuMemAlloc(&x, kBytes));
    float* xPointer = interop::asRuntimePointer(x);
    std::printf("CUdeviceptr as float*: 0x%llx -> %p\n", static_cast<unsigned long long>(x),
                static_cast<void*>(xPointer));

    std::vector<float> hostX(kCount);
    for (int i = 0; i < kCount; ++i) hostX[i] = static_cast<float>(i);
    CUevent events[4] = {};
    for (CUevent& event : events) CHECK_DRIVER(cuEventCreate(&event, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuMemcpyHtoDAsync(x, hostX.data(), kBytes, stream));
    CHECK_DRIVER(cuEventRecord(events[0], stream));
    CHECK_RUNTIME(launchScale(xPointer, 2.0f, kCount, stream));  // first launch: x = 2i
    CHECK_DRIVER(cuEventRecord(events[1], stream));
    CHECK_DRIVER(cuEventRecord(events[2], stream));
    CHECK_RUNTIME(launchScale(xPointer, 1.0f, kCount, stream));  // warm launch: x stays 2i
    CHECK_DRIVER(cuEventRecord(events[3], stream));
    std::vector<float> scaled(kCount);
    CHECK_DRIVER(cuMemcpyDtoHAsync(scaled.data(), x, kBytes, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const float firstLaunchMs = elapsedMs(events[0], events[1]);
    const float kernelMs = elapsedMs(events[2], events[3]);
    for (int i = 3; i >= 0; --i) CHECK_DRIVER(cuEventDestroy(events[i]));

    std::vector<float> expectedScaled(kCount);
    for (int i = 0; i < kCount; ++i) expectedScaled[i] = 2.0f * static_cast<float>(i);
    const int scaledOk = interop::countMatching(scaled, expectedScaled);
    std::printf("<<<>>> kernel on cuMemAlloc memory: %d of %d correct\n", scaledOk, kCount);
    course::Verdict verdict;
    verdict.check("<<<>>> kernel on driver memory exact", scaledOk == kCount);
    std::printf("first launch in this context (includes the runtime's module load): %.3f ms\n", firstLaunchMs);
    std::printf("kernel time (cuEventRecord, cudaEventElapsedTime): %.3f ms\n", kernelMs);

    // Step 3: cuBLAS is a runtime library. Its handle belongs to the context current
    // when cublasCreate runs, so create it with the driver context current and destroy
    // it before that context.
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
    CUdeviceptr y = 0;
    CHECK_DRIVER(cuMemAlloc(&y, kBytes));
    std::vector<float> hostY(kCount, 1.0f);
    CHECK_DRIVER(cuMemcpyHtoDAsync(y, hostY.data(), kBytes, stream));
    const float alpha = 0.5f;
    // y = alpha * x + y, where x holds 2i from step 2: y[i] = i + 1.
    CHECK_CUBLAS(cublasSaxpy(blas, kCount, &alpha, xPointer, 1, interop::asRuntimePointer(y), 1));
    std::vector<float> saxpy(kCount);
    CHECK_DRIVER(cuMemcpyDtoHAsync(saxpy.data(), y, kBytes, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    std::vector<float> expectedSaxpy(kCount);
    for (int i = 0; i < kCount; ++i) expectedSaxpy[i] = static_cast<float>(i) + 1.0f;
    const int saxpyOk = interop::countMatching(saxpy, expectedSaxpy);
    std::printf("cublasSaxpy on cuMemAlloc memory: %d of %d correct\n", saxpyOk, kCount);
    verdict.check("cublasSaxpy on driver memory exact", saxpyOk == kCount);

    // Step 4: release in reverse order; the handle before the context it belongs to.
    course::printStep(4, "release");
    CHECK_DRIVER(cuMemFree(y));
    CHECK_CUBLAS(cublasDestroy(blas));
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
