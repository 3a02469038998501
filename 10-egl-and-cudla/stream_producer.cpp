// stream_producer.cpp — the producer end of lesson 10's EGLStream (see stream_roles.h).
// Each function runs on the producer's thread: it makes the shared context current,
// works on a stream of its own, and gives both back before it returns.
#include "stream_roles.h"

#if LESSON10_HAVE_EGL
#include <chrono>
#include <cstdint>
#include <thread>

#include "../common/check_driver.h"

namespace {

// Paints frame `number` (B = x, G = y, R = number, A = 255) and presents it. Both are
// enqueued on the producer's stream: PresentFrame does not wait for the kernel, the
// stream carries that order to the consumer, whose acquire waits for it on the GPU.
// THREAD_DRIVER, not CHECK_DRIVER, everywhere here: this is a worker thread (stream_roles.h).
void paintAndPresent(const StreamEnd& end, CUstream stream, const CUeglFrame& frame, unsigned int number,
                     ThreadStatus& status) {
    CUdeviceptr base = reinterpret_cast<std::uintptr_t>(frame.frame.pPitch[0]);
    unsigned int pitch = frame.pitch, width = frame.width, height = frame.height;
    void* params[] = {&base, &pitch, &width, &height, &number};
    THREAD_DRIVER(status, cuLaunchKernel(end.kernel, (width + 15) / 16, (height + 15) / 16, 1, 16, 16, 1, 0, stream,
                                         params, nullptr));
    THREAD_DRIVER(status, end.cuda->producerPresentFrame(end.connection, frame, &stream));
}

// ReturnFrame answers CUDA_ERROR_LAUNCH_TIMEOUT while no released frame is waiting for
// the producer; the reference says: try again. Any other code ends the attempts.
CUresult askBack(const StreamEnd& end, CUstream stream, CUeglFrame* returned, int attempts) {
    CUresult result = CUDA_ERROR_LAUNCH_TIMEOUT;
    for (int attempt = 0; attempt < attempts && result == CUDA_ERROR_LAUNCH_TIMEOUT; ++attempt) {
        if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        result = end.cuda->producerReturnFrame(end.connection, returned, &stream);
    }
    return result;
}

// A frame comes back once the consumer released it; 5 s covers a slow consumer
// (compute-sanitizer makes every kernel many times slower).
constexpr int kPatientAttempts = 5000;

}  // namespace

CUeglFrame describeFrame(CUdeviceptr buffer, size_t pitch) {
    CUeglFrame frame{};
    frame.frame.pPitch[0] = reinterpret_cast<void*>(static_cast<std::uintptr_t>(buffer));
    frame.width = kFrameWidth;  // in pixels: must match cuEGLStreamProducerConnect
    frame.height = kFrameHeight;
    frame.depth = 1;
    frame.pitch = static_cast<unsigned int>(pitch);  // in bytes
    frame.planeCount = 1;
    frame.numChannels = 4;
    frame.frameType = CU_EGL_FRAME_TYPE_PITCH;
    frame.eglColorFormat = CU_EGL_COLOR_FORMAT_ARGB;  // bytes B, G, R, A
    frame.cuFormat = CU_AD_FORMAT_UNSIGNED_INT8;
    return frame;
}

CUresult presentThenAskBack(const StreamEnd& end, const CUeglFrame& frame, unsigned int number,
                            std::shared_future<void> released, int attempts, ThreadStatus& status) {
    THREAD_DRIVER(status, cuCtxPushCurrent(end.context));
    CUstream stream = nullptr;
    THREAD_DRIVER(status, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    paintAndPresent(end, stream, frame, number, status);
    // Only after the consumer has released the frame does a timeout mean "the stream kept it".
    released.wait();
    CUeglFrame returned{};
    // Provoked on purpose (step 4 of egl_stream): reported, and handed back to act on.
    const CUresult result = status.ok() ? REPORT_DRIVER(askBack(end, stream, &returned, attempts)) : status.error;
    THREAD_DRIVER(status, cuStreamDestroy(stream));
    THREAD_DRIVER(status, cuCtxPopCurrent(nullptr));
    return result;
}

std::vector<ReturnedFrame> presentRoundTrips(const StreamEnd& end, const CUeglFrame& frame, unsigned int count,
                                             ThreadStatus& status) {
    THREAD_DRIVER(status, cuCtxPushCurrent(end.context));
    CUstream stream = nullptr;
    THREAD_DRIVER(status, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    std::vector<ReturnedFrame> trips;
    for (unsigned int number = 0; status.ok() && number < count; ++number) {
        paintAndPresent(end, stream, frame, number, status);
        if (!status.ok()) break;
        CUeglFrame returned{};
        const CUresult result = askBack(end, stream, &returned, kPatientAttempts);
        trips.push_back({result, result == CUDA_SUCCESS && returned.frame.pPitch[0] == frame.frame.pPitch[0]});
        if (!trips.back().sameBuffer) break;  // the next paint would write memory the stream still holds
    }
    THREAD_DRIVER(status, cuStreamDestroy(stream));
    THREAD_DRIVER(status, cuCtxPopCurrent(nullptr));
    return trips;
}

int presentAllThenCollect(const StreamEnd& end, const std::vector<CUeglFrame>& frames,
                          const std::vector<unsigned int>& numbers, std::promise<void>& presented,
                          ThreadStatus& status) {
    THREAD_DRIVER(status, cuCtxPushCurrent(end.context));
    CUstream stream = nullptr;
    THREAD_DRIVER(status, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    for (size_t i = 0; i < frames.size(); ++i) paintAndPresent(end, stream, frames[i], numbers[i], status);
    presented.set_value();  // also after a failure: the consumer waits for it
    // Every presented frame comes back: acquired and released, or (mailbox) replaced unseen.
    int back = 0;
    for (size_t i = 0; status.ok() && i < frames.size(); ++i) {
        CUeglFrame returned{};
        if (askBack(end, stream, &returned, kPatientAttempts) != CUDA_SUCCESS) break;
        for (const CUeglFrame& frame : frames) back += returned.frame.pPitch[0] == frame.frame.pPitch[0];
    }
    THREAD_DRIVER(status, cuStreamDestroy(stream));
    THREAD_DRIVER(status, cuCtxPopCurrent(nullptr));
    return back;
}
#endif
