// stream_consumer.cpp — the consumer end of lesson 10's EGLStream (see stream_roles.h).
// Runs on the consumer's thread: it makes the shared context current, works on a
// stream of its own, and gives both back before it returns.
#include "stream_roles.h"

#if LESSON10_HAVE_EGL
#include <cstdint>


std::vector<SeenFrame> consumeFrames(const StreamEnd& end, unsigned int count, unsigned int timeoutUs,
                                     ThreadStatus& status) {
    // THREAD_DRIVER, not CHECK_DRIVER: this is a worker thread (stream_roles.h, ThreadStatus).
    THREAD_DRIVER(status, cuCtxPushCurrent(end.context));
    CUstream stream = nullptr;
    THREAD_DRIVER(status, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr result = 0;  // checkAcquiredFrame's {frame number, mismatched pixels}
    THREAD_DRIVER(status, cuMemAlloc(&result, 2 * sizeof(unsigned int)));
    std::vector<SeenFrame> seen;
    while (status.ok() && seen.size() < count) {
        // Acquire enqueues, on this stream, a wait for the producer's work on the frame:
        // the CPU does not block for the GPU here, only for a frame to be presented.
        CUgraphicsResource resource = nullptr;
        const CUresult acquired = end.cuda->consumerAcquireFrame(end.connection, &resource, &stream, timeoutUs);
        if (acquired == CUDA_ERROR_LAUNCH_TIMEOUT) break;  // no new frame within the timeout: an answer
        if (!status.record(acquired, "cuEGLStreamConsumerAcquireFrame")) break;
        SeenFrame frame{};
        THREAD_DRIVER(status, end.cuda->getMappedEglFrame(&frame.frame, resource, 0, 0));
        // Checked in place: the kernel reads the memory the stream handed over (no copy).
        CUdeviceptr base = reinterpret_cast<std::uintptr_t>(frame.frame.frame.pPitch[0]);
        unsigned int pitch = frame.frame.pitch, width = frame.frame.width, height = frame.frame.height;
        THREAD_DRIVER(status, cuMemsetD32Async(result, 0, 2, stream));
        void* params[] = {&base, &pitch, &width, &height, &result};
        THREAD_DRIVER(status, cuLaunchKernel(end.kernel, (width + 15) / 16, (height + 15) / 16, 1, 16, 16, 1, 0,
                                             stream, params, nullptr));
        // The release is ordered after the check on this stream: the frame is not given back
        // while the kernel still reads it. Reading or writing it after the release is undefined.
        THREAD_DRIVER(status, end.cuda->consumerReleaseFrame(end.connection, resource, &stream));
        THREAD_DRIVER(status, cuStreamSynchronize(stream));
        unsigned int counts[2] = {};
        THREAD_DRIVER(status, cuMemcpyDtoH(counts, result, sizeof(counts)));
        if (!status.ok()) break;
        frame.frameNumber = counts[0];
        frame.mismatches = counts[1];
        seen.push_back(frame);
    }
    THREAD_DRIVER(status, cuMemFree(result));
    THREAD_DRIVER(status, cuStreamDestroy(stream));
    THREAD_DRIVER(status, cuCtxPopCurrent(nullptr));
    return seen;
}
#endif
