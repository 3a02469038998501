// stream_roles.h — the two ends of lesson 10's EGLStream, each worked by its own thread,
// as a camera thread and an inference thread would: the producer (stream_producer.cpp)
// paints frames and presents them; the consumer (stream_consumer.cpp) acquires each
// frame, checks it where the stream put it, and releases it. egl_stream.cpp connects
// the ends, starts the threads and prints what they report (threads print nothing, so
// the output keeps its order), a failed call included: see ThreadStatus.
#pragma once

#include "egl_config.h"

#if LESSON10_HAVE_EGL
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <cuda.h>
#include <cudaEGL.h>
#include <cudaEGLTypedefs.h>

#include <future>
#include <vector>

constexpr unsigned int kFrameWidth = 64;  // pixels; the producer connects with this size
constexpr unsigned int kFrameHeight = 64;

// The CUDA-EGL stream functions, resolved with cuGetProcAddress (egl_stream.cpp, step 2).
struct CudaEglStream {
    PFN_cuEGLStreamConsumerConnect_v7000 consumerConnect = nullptr;
    PFN_cuEGLStreamConsumerDisconnect_v7000 consumerDisconnect = nullptr;
    PFN_cuEGLStreamConsumerAcquireFrame_v7000 consumerAcquireFrame = nullptr;
    PFN_cuEGLStreamConsumerReleaseFrame_v7000 consumerReleaseFrame = nullptr;
    PFN_cuGraphicsResourceGetMappedEglFrame_v7000 getMappedEglFrame = nullptr;
    PFN_cuEGLStreamProducerConnect_v7000 producerConnect = nullptr;
    PFN_cuEGLStreamProducerDisconnect_v7000 producerDisconnect = nullptr;
    PFN_cuEGLStreamProducerPresentFrame_v7000 producerPresentFrame = nullptr;
    PFN_cuEGLStreamProducerReturnFrame_v7000 producerReturnFrame = nullptr;
};

// What a worker thread reports to main instead of exiting. CHECK_DRIVER ends the process
// with std::exit, which must not be called on a worker thread: the process's exit handlers
// would run while other threads still use CUDA. A thread records its first failed call here
// and skips its remaining calls (THREAD_DRIVER), its clean-up included; main prints the call
// and its error, fails a check and ends the program, and cuCtxDestroy or the end of the
// process frees what the thread left behind.
struct ThreadStatus {
    const char* failedCall = nullptr;  // nullptr while every call succeeded
    CUresult error = CUDA_SUCCESS;
    bool ok() const { return failedCall == nullptr; }
    // Keeps the first failure; returns whether this call succeeded.
    bool record(CUresult result, const char* call) {
        if (result != CUDA_SUCCESS && ok()) {
            failedCall = call;
            error = result;
        }
        return result == CUDA_SUCCESS;
    }
};
// The worker thread's CHECK_DRIVER: runs `call` only while every earlier call succeeded.
#define THREAD_DRIVER(status, call)                                  \
    do {                                                             \
        if ((status).ok()) static_cast<void>((status).record((call), #call)); \
    } while (0)

// What a thread needs to work one end of a connected stream. The context is shared by
// both threads; each makes it current for itself, because a context is current per thread.
struct StreamEnd {
    CUcontext context;
    const CudaEglStream* cuda;
    CUeglStreamConnection* connection;
    CUfunction kernel;  // writeFrame for the producer, checkAcquiredFrame for the consumer
};

// ---- producer (stream_producer.cpp) ----
// A pitch-linear 64x64 ARGB frame in `buffer` (memory the producer owns).
CUeglFrame describeFrame(CUdeviceptr buffer, size_t pitch);
struct ReturnedFrame {
    CUresult result;  // of cuEGLStreamProducerReturnFrame, after retries
    bool sameBuffer;  // the frame that came back is the one presented
};
// Presents frame `number` once, waits until the consumer says it has released it, then
// asks for it back `attempts` times, 1 ms apart; returns the last answer.
CUresult presentThenAskBack(const StreamEnd& end, const CUeglFrame& frame, unsigned int number,
                            std::shared_future<void> released, int attempts, ThreadStatus& status);
// Frames 0 .. count-1 through one buffer: paint, present, wait for it to come back, repeat.
std::vector<ReturnedFrame> presentRoundTrips(const StreamEnd& end, const CUeglFrame& frame, unsigned int count,
                                             ThreadStatus& status);
// Presents numbers[i] in frames[i] back to back, says so through `presented`, then takes
// every frame back; returns how many came back. `presented` is set on every path, a failed
// call included, so that the consumer never waits for it forever.
int presentAllThenCollect(const StreamEnd& end, const std::vector<CUeglFrame>& frames,
                          const std::vector<unsigned int>& numbers, std::promise<void>& presented,
                          ThreadStatus& status);

// ---- consumer (stream_consumer.cpp) ----
struct SeenFrame {
    unsigned int frameNumber;  // read from the frame's pixel (0, 0)
    unsigned int mismatches;   // pixels that break the pattern for that number
    CUeglFrame frame;          // as cuGraphicsResourceGetMappedEglFrame described it
};
// Acquires frames until `count` were seen or none arrives within `timeoutUs`; checks each
// one in place with the checkAcquiredFrame kernel, then releases it.
std::vector<SeenFrame> consumeFrames(const StreamEnd& end, unsigned int count, unsigned int timeoutUs,
                                     ThreadStatus& status);
#endif
