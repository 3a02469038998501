// stream_consumer.cpp — the consumer end of lesson 10's EGLStream (see stream_roles.h).
// Runs on the consumer's thread: it makes the shared context current, works on a
// stream of its own, and gives both back before it returns.
#include "stream_roles.h"

#if LESSON10_HAVE_EGL
#include <cstdint>

#include "../common/check_driver.h"

std::vector<SeenFrame> consumeFrames(const StreamEnd& end, unsigned int count, unsigned int timeoutUs) {
    CHECK_DRIVER(cuCtxPushCurrent(end.context));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr result = 0;  // checkAcquiredFrame's {frame number, mismatched pixels}
    CHECK_DRIVER(cuMemAlloc(&result, 2 * sizeof(unsigned int)));
    std::vector<SeenFrame> seen;
    while (seen.size() < count) {
        // Acquire enqueues, on this stream, a wait for the producer's work on the frame:
        // the CPU does not block for the GPU here, only for a frame to be presented.
        CUgraphicsResource resource = nullptr;
        const CUresult acquired = end.cuda->consumerAcquireFrame(end.connection, &resource, &stream, timeoutUs);
        if (acquired == CUDA_ERROR_LAUNCH_TIMEOUT) break;  // no new frame within the timeout: an answer
        CHECK_DRIVER(acquired);
        SeenFrame frame{};
        CHECK_DRIVER(end.cuda->getMappedEglFrame(&frame.frame, resource, 0, 0));
        // Checked in place: the kernel reads the memory the stream handed over (no copy).
        CUdeviceptr base = reinterpret_cast<std::uintptr_t>(frame.frame.frame.pPitch[0]);
        unsigned int pitch = frame.frame.pitch, width = frame.frame.width, height = frame.frame.height;
        CHECK_DRIVER(cuMemsetD32Async(result, 0, 2, stream));
        void* params[] = {&base, &pitch, &width, &height, &result};
        CHECK_DRIVER(cuLaunchKernel(end.kernel, (width + 15) / 16, (height + 15) / 16, 1, 16, 16, 1, 0, stream, params,
                                    nullptr));
        // The release is ordered after the check on this stream: the frame is not given back
        // while the kernel still reads it. Reading or writing it after the release is undefined.
        CHECK_DRIVER(end.cuda->consumerReleaseFrame(end.connection, resource, &stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
        unsigned int counts[2] = {};
        CHECK_DRIVER(cuMemcpyDtoH(counts, result, sizeof(counts)));
        frame.frameNumber = counts[0];
        frame.mismatches = counts[1];
        seen.push_back(frame);
    }
    CHECK_DRIVER(cuMemFree(result));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuCtxPopCurrent(nullptr));
    return seen;
}
#endif
