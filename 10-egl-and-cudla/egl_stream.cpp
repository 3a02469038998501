// Lesson 10, program 1 — an EGLStream with CUDA at both ends, producer and consumer on
// two threads.
//
// EGL is the hub through which CUDA shares frames with cameras, codecs, OpenGL and
// the DLA on Jetson. This program opens a headless EGL display on the CUDA device,
// connects a CUDA consumer and a CUDA producer to one EGLStream, and lets two threads
// pass pitch-linear ARGB frames through it: the app note's "the producer never gets
// its last frame back" trap, its cure (EGL_SUPPORT_REUSE_NV = EGL_FALSE), and the
// mailbox and FIFO modes. The producer's side is in stream_producer.cpp, the
// consumer's in stream_consumer.cpp.
//
//   egl_stream [--device N]
#include "egl_config.h"

#if LESSON10_HAVE_EGL
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <cuda.h>
#include <cudaEGL.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "cuda_egl.h"
#include "egl_display.h"
#include "stream_roles.h"

namespace {

constexpr unsigned int kAcquireTimeoutUs = 1000000;  // a presented frame is on its way: 1 s is plenty
constexpr unsigned int kDrainTimeoutUs = 50000;      // "is there another new frame?"
constexpr int kAttemptsAfterRelease = 20;            // ReturnFrame tries, 1 ms apart

const char* streamStateName(EGLint state) {
    switch (state) {
        case EGL_STREAM_STATE_CREATED_KHR: return "EGL_STREAM_STATE_CREATED_KHR";
        case EGL_STREAM_STATE_CONNECTING_KHR: return "EGL_STREAM_STATE_CONNECTING_KHR";
        case EGL_STREAM_STATE_EMPTY_KHR: return "EGL_STREAM_STATE_EMPTY_KHR";
        case EGL_STREAM_STATE_NEW_FRAME_AVAILABLE_KHR: return "EGL_STREAM_STATE_NEW_FRAME_AVAILABLE_KHR";
        case EGL_STREAM_STATE_OLD_FRAME_AVAILABLE_KHR: return "EGL_STREAM_STATE_OLD_FRAME_AVAILABLE_KHR";
        case EGL_STREAM_STATE_DISCONNECTED_KHR: return "EGL_STREAM_STATE_DISCONNECTED_KHR";
        default: return "(unknown state)";
    }
}

// One EGLStream and both of its CUDA connections.
struct ConnectedStream {
    EGLStreamKHR stream = EGL_NO_STREAM_KHR;
    CUeglStreamConnection consumer = nullptr;
    CUeglStreamConnection producer = nullptr;
};

// The consumer must connect first: the producer's connect fails on a stream with no consumer.
ConnectedStream connectStream(EGLDisplay display, const CudaEglStream& cuda, const EGLint* attributes) {
    auto createStream = reinterpret_cast<PFNEGLCREATESTREAMKHRPROC>(eglGetProcAddress("eglCreateStreamKHR"));
    ConnectedStream ends;
    ends.stream = createStream(display, attributes);
    if (ends.stream == EGL_NO_STREAM_KHR) {
        reportEglError("eglCreateStreamKHR(display, attributes)");
        std::exit(EXIT_FAILURE);
    }
    CHECK_DRIVER(cuda.consumerConnect(&ends.consumer, ends.stream));
    CHECK_DRIVER(cuda.producerConnect(&ends.producer, ends.stream, kFrameWidth, kFrameHeight));
    return ends;
}

// Disconnecting the producer takes back every frame it presented; only then may the
// frame memory be freed or painted again.
void disconnectStream(EGLDisplay display, const CudaEglStream& cuda, ConnectedStream& ends) {
    auto destroyStream = reinterpret_cast<PFNEGLDESTROYSTREAMKHRPROC>(eglGetProcAddress("eglDestroyStreamKHR"));
    CHECK_DRIVER(cuda.producerDisconnect(&ends.producer));
    CHECK_DRIVER(cuda.consumerDisconnect(&ends.consumer));
    if (!destroyStream(display, ends.stream)) reportEglError("eglDestroyStreamKHR(display, stream)");
}

// Step 2's lookups: one "driver entry point" line each; true when every one was found.
bool resolveStreamFunctions(CudaEglStream& cuda) {
    bool found = course::resolveDriverFunction("cuEGLStreamConsumerConnect", 7000, cuda.consumerConnect);
    found = course::resolveDriverFunction("cuEGLStreamConsumerDisconnect", 7000, cuda.consumerDisconnect) && found;
    found = course::resolveDriverFunction("cuEGLStreamConsumerAcquireFrame", 7000, cuda.consumerAcquireFrame) && found;
    found = course::resolveDriverFunction("cuEGLStreamConsumerReleaseFrame", 7000, cuda.consumerReleaseFrame) && found;
    found = course::resolveDriverFunction("cuGraphicsResourceGetMappedEglFrame", 7000, cuda.getMappedEglFrame) && found;
    found = course::resolveDriverFunction("cuEGLStreamProducerConnect", 7000, cuda.producerConnect) && found;
    found = course::resolveDriverFunction("cuEGLStreamProducerDisconnect", 7000, cuda.producerDisconnect) && found;
    found = course::resolveDriverFunction("cuEGLStreamProducerPresentFrame", 7000, cuda.producerPresentFrame) && found;
    found = course::resolveDriverFunction("cuEGLStreamProducerReturnFrame", 7000, cuda.producerReturnFrame) && found;
    return found;
}

// Prints the display extensions the stream needs; returns why streams cannot run here, or "".
std::string whyNoStreams(const DeviceDisplay& display, bool functionsFound) {
    if (!display.unavailable.empty()) return display.unavailable;
    for (const char* extension : {"EGL_KHR_stream", "EGL_NV_stream_reset", "EGL_KHR_stream_fifo"})
        std::printf("display extension %s: %s\n", extension, yesNo(hasExtension(display.extensions, extension)));
    if (!hasExtension(display.extensions, "EGL_KHR_stream")) return "the display lacks EGL_KHR_stream";
    if (!functionsFound) return "this driver lacks a cuEGLStream* function (see step 2)";
    if (!hasExtension(display.extensions, "EGL_NV_stream_reset"))
        return "the display lacks EGL_NV_stream_reset, which steps 5 and 6 need";
    return "";
}

// What the consumer thread reported about one frame, and whether it read the producer's own memory.
void printSeenFrame(const SeenFrame& seen, const CUeglFrame& presented) {
    std::printf("consumer thread saw frame %u, mismatched pixels: %u\n", seen.frameNumber, seen.mismatches);
    std::printf("consumer frame: %ux%u, pitch %u, type %s, format %s\n", seen.frame.width, seen.frame.height,
                seen.frame.pitch, seen.frame.frameType == CU_EGL_FRAME_TYPE_PITCH ? "PITCH" : "ARRAY",
                seen.frame.eglColorFormat == CU_EGL_COLOR_FORMAT_ARGB ? "ARGB" : "other");
    std::printf("consumer reads the producer's memory (no copy): %s\n",
                yesNo(seen.frame.frame.pPitch[0] == presented.frame.pPitch[0]));
}

// The worker threads' report (they print nothing and must not exit): the first failed call
// of each, then one check. After a failure the program stops (see ThreadStatus).
bool threadsSucceeded(const ThreadStatus& consumer, const ThreadStatus& producer, course::Verdict& verdict) {
    for (const auto& [who, status] : {std::pair{"consumer", &consumer}, std::pair{"producer", &producer}})
        if (!status->ok())
            std::printf("%s thread: %s failed with %s\n", who, status->failedCall,
                        course::driverErrorName(status->error));
    return verdict.check("worker threads' driver calls succeed", consumer.ok() && producer.ok());
}

const char* streamState(EGLDisplay display, const ConnectedStream& ends) {
    auto queryStream = reinterpret_cast<PFNEGLQUERYSTREAMKHRPROC>(eglGetProcAddress("eglQueryStreamKHR"));
    EGLint state = 0;
    if (!queryStream(display, ends.stream, EGL_STREAM_STATE_KHR, &state))
        reportEglError("eglQueryStreamKHR(display, stream, EGL_STREAM_STATE_KHR, &state)");
    return streamStateName(state);
}

// Step 4's threads on a stream connected with default attributes. The consumer thread
// acquires, checks and releases frame 0; only after that does the producer thread ask for
// it back. False when a worker thread's call failed: the program then stops.
bool askBackTheLastFrame(EGLDisplay display, const ConnectedStream& ends, const StreamEnd& producerEnd,
                         const StreamEnd& consumerEnd, const CUeglFrame& frame, course::Verdict& verdict) {
    std::vector<SeenFrame> seen;
    CUresult stuck = CUDA_SUCCESS;
    ThreadStatus consumerStatus, producerStatus;  // each written by its own thread only
    {
        std::promise<void> released;
        std::thread consumer([&] { seen = consumeFrames(consumerEnd, 1, kAcquireTimeoutUs, consumerStatus); });
        std::thread producer([&] {
            stuck =
                presentThenAskBack(producerEnd, frame, 0, released.get_future(), kAttemptsAfterRelease, producerStatus);
        });
        consumer.join();  // the consumer has released frame 0: say what it saw, then let the producer ask
        if (seen.empty()) std::printf("consumer thread saw: nothing within the timeout\n");
        for (const SeenFrame& seenFrame : seen) printSeenFrame(seenFrame, frame);
        std::printf("stream state after the consumer released: %s\n", streamState(display, ends));
        released.set_value();
        producer.join();
    }
    if (!threadsSucceeded(consumerStatus, producerStatus, verdict)) return false;
    verdict.check("consumer saw frame 0 intact",
                  seen.size() == 1 && seen[0].frameNumber == 0 && seen[0].mismatches == 0);
    // EGL_SUPPORT_REUSE_NV is EGL_TRUE by default: the stream keeps the last frame so the
    // consumer can acquire it again, so it never returns to the producer while connected.
    std::printf(
        "producer thread, frame back with EGL_SUPPORT_REUSE_NV = EGL_TRUE (default), %d attempts: %s (code %d)\n",
        kAttemptsAfterRelease, course::driverErrorName(stuck), static_cast<int>(stuck));
    verdict.check("the stream keeps the last frame while reuse is on", stuck == CUDA_ERROR_LAUNCH_TIMEOUT);
    return true;
}

// Step 5's threads on a stream without reuse: frames 0 .. kRoundTrips-1 through one buffer.
// False when a worker thread's call failed.
bool roundTripFrames(const StreamEnd& producerEnd, const StreamEnd& consumerEnd, const CUeglFrame& frame,
                     course::Verdict& verdict) {
    constexpr unsigned int kRoundTrips = 4;
    std::vector<SeenFrame> seen;
    std::vector<ReturnedFrame> trips;
    ThreadStatus consumerStatus, producerStatus;
    {
        std::thread consumer(
            [&] { seen = consumeFrames(consumerEnd, kRoundTrips, kAcquireTimeoutUs, consumerStatus); });
        std::thread producer([&] { trips = presentRoundTrips(producerEnd, frame, kRoundTrips, producerStatus); });
        consumer.join();
        producer.join();
    }
    if (!threadsSucceeded(consumerStatus, producerStatus, verdict)) return false;
    unsigned int roundTrips = 0;
    for (unsigned int n = 0; n < kRoundTrips && n < seen.size() && n < trips.size(); ++n) {
        std::printf(
            "frame %u: consumer saw frame %u, mismatched pixels %u, returned to producer: %s, same buffer: %s\n", n,
            seen[n].frameNumber, seen[n].mismatches, course::driverErrorName(trips[n].result),
            yesNo(trips[n].sameBuffer));
        roundTrips += seen[n].frameNumber == n && seen[n].mismatches == 0 && trips[n].sameBuffer;
    }
    std::printf("round trips: %u of %u\n", roundTrips, kRoundTrips);
    verdict.check("every frame round-trips through one buffer", roundTrips == kRoundTrips);
    return true;
}

// Step 6's threads for one mode: the producer presents frames 10 and 11 before the consumer
// looks, then takes both buffers back. False when a worker thread's call failed.
bool presentTwoThenConsume(bool fifo, const StreamEnd& producerEnd, const StreamEnd& consumerEnd,
                           const CUeglFrame& frameA, const CUeglFrame& frameB, course::Verdict& verdict) {
    const char* mode = fifo ? "fifo" : "mailbox";
    std::vector<SeenFrame> seen;
    int back = 0;
    ThreadStatus consumerStatus, producerStatus;
    {
        std::promise<void> presented;
        std::shared_future<void> bothPresented = presented.get_future().share();
        std::thread consumer([&] {
            bothPresented.wait();
            seen = consumeFrames(consumerEnd, 2, kDrainTimeoutUs, consumerStatus);
        });
        std::thread producer([&] {
            back = presentAllThenCollect(producerEnd, {frameA, frameB}, {10, 11}, presented, producerStatus);
        });
        consumer.join();
        producer.join();
    }
    if (!threadsSucceeded(consumerStatus, producerStatus, verdict)) return false;
    std::string seenList;
    for (const SeenFrame& frame : seen) seenList += " " + std::to_string(frame.frameNumber);
    std::printf("%s: presented frames 10 11, consumer saw%s\n", mode, seenList.empty() ? " nothing" : seenList.c_str());
    std::printf("%s: frames back at the producer: %d of 2\n", mode, back);
    // Both modes deliver intact frames in order, ending with the newest, and give both
    // buffers back; whether frame 10 was seen is what the modes differ in.
    const bool intact = std::all_of(seen.begin(), seen.end(), [](const SeenFrame& f) { return f.mismatches == 0; });
    const bool inOrder = seen.size() < 2 || seen[0].frameNumber < seen[1].frameNumber;
    const std::string m = mode;
    verdict.check((m + " delivers intact frames in order, the newest last").c_str(),
                  intact && inOrder && !seen.empty() && seen.back().frameNumber == 11);
    verdict.check((m + " gives both buffers back").c_str(), back == 2);
    verdict.check(fifo ? "fifo delivers both frames" : "mailbox delivers only the newest frame",
                  fifo ? seen.size() == 2 : seen.size() == 1);
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;

    // Step 1: CUDA first. Connections and frames belong to the context that made them;
    // both threads below make this one context current for themselves.
    course::printStep(1, "device, context, kernels");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device name: %s\n", name);
    CUcontext context = nullptr;
    CHECK_DRIVER(course::ctxCreate(&context, 0, device));
    const auto fatbin = course::readFile(course::kernelPath("frames.fatbin"));
    if (!fatbin) return EXIT_FAILURE;
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoadData(&module, fatbin->data()));
    CUfunction writeFrame = nullptr, checkAcquiredFrame = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&writeFrame, module, "writeFrame"));
    CHECK_DRIVER(cuModuleGetFunction(&checkAcquiredFrame, module, "checkAcquiredFrame"));

    // Step 2: the CUDA side of the stream, from the driver at run time (cuda_egl.h says why).
    course::printStep(2, "resolve the CUDA-EGL stream functions with cuGetProcAddress");
    CudaEglStream cuda;
    const bool found = resolveStreamFunctions(cuda);

    // Step 3: a display on this GPU with no window system (egl_display.cpp).
    course::printStep(3, "EGL display on the device platform");
    DeviceDisplay display = openDeviceDisplay(device);
    const std::string unavailable = whyNoStreams(display, found);
    if (!unavailable.empty()) {
        std::printf("section EGLStream: SKIP (%s)\n", unavailable.c_str());
        closeDeviceDisplay(display);
        CHECK_DRIVER(cuModuleUnload(module));
        CHECK_DRIVER(cuCtxDestroy(context));
        std::printf("Result = SKIP (%s)\n", unavailable.c_str());
        return course::kExitNotApplicable;
    }
    // Frame memory: two pitch-linear 64x64 ARGB buffers, owned by the producer.
    CUdeviceptr bufferA = 0, bufferB = 0;
    size_t pitch = 0;
    CHECK_DRIVER(cuMemAllocPitch(&bufferA, &pitch, kFrameWidth * 4, kFrameHeight, 4));
    CHECK_DRIVER(cuMemAllocPitch(&bufferB, &pitch, kFrameWidth * 4, kFrameHeight, 4));
    const CUeglFrame frameA = describeFrame(bufferA, pitch), frameB = describeFrame(bufferB, pitch);
    course::Verdict verdict;

    // Step 4: the app note's flow with default attributes: the producer thread asks for its
    // last frame back after the consumer thread released it.
    course::printStep(4, "default attributes: the producer's last frame never comes back");
    std::printf("frame: %ux%u ARGB, pitch-linear, pitch %zu bytes\n", kFrameWidth, kFrameHeight, pitch);
    const EGLint defaultAttributes[] = {EGL_NONE};
    ConnectedStream ends = connectStream(display.display, cuda, defaultAttributes);
    std::printf("stream state after both ends connect: %s\n", streamState(display.display, ends));
    // Each thread's end of whichever stream `ends` holds: steps 5 and 6 reconnect it.
    const StreamEnd producerEnd{context, &cuda, &ends.producer, writeFrame};
    const StreamEnd consumerEnd{context, &cuda, &ends.consumer, checkAcquiredFrame};
    if (!askBackTheLastFrame(display.display, ends, producerEnd, consumerEnd, frameA, verdict)) return verdict.finish();
    disconnectStream(display.display, cuda, ends);

    // Step 5: the cure (EGL_NV_stream_reset): with EGL_SUPPORT_REUSE_NV = EGL_FALSE the last
    // frame leaves the stream once released, so one buffer carries every frame.
    course::printStep(5, "EGL_SUPPORT_REUSE_NV = EGL_FALSE: frames round-trip between the threads");
    const EGLint noReuse[] = {EGL_SUPPORT_REUSE_NV, EGL_FALSE, EGL_NONE};
    ends = connectStream(display.display, cuda, noReuse);
    if (!roundTripFrames(producerEnd, consumerEnd, frameA, verdict)) return verdict.finish();
    disconnectStream(display.display, cuda, ends);

    // Step 6: mailbox (the default) keeps only the newest frame; FIFO (EGL_KHR_stream_fifo)
    // queues them. The producer presents two frames before the consumer looks.
    course::printStep(6, "EGLStream modes: mailbox vs FIFO");
    for (const bool fifo : {false, true}) {
        if (fifo && !hasExtension(display.extensions, "EGL_KHR_stream_fifo")) {
            std::printf("section EGLStream fifo: SKIP (the display lacks EGL_KHR_stream_fifo)\n");
            continue;
        }
        const EGLint fifoAttributes[] = {EGL_SUPPORT_REUSE_NV, EGL_FALSE, EGL_STREAM_FIFO_LENGTH_KHR, 4, EGL_NONE};
        ends = connectStream(display.display, cuda, fifo ? fifoAttributes : noReuse);
        if (!presentTwoThenConsume(fifo, producerEnd, consumerEnd, frameA, frameB, verdict)) return verdict.finish();
        disconnectStream(display.display, cuda, ends);
    }

    // Step 7: release in reverse order of creation, then the verdict.
    course::printStep(7, "release and check");
    CHECK_DRIVER(cuMemFree(bufferB));
    CHECK_DRIVER(cuMemFree(bufferA));
    closeDeviceDisplay(display);
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuCtxDestroy(context));
    return verdict.finish();
}
#else
int main(int argc, char** argv) {
    return skipWithoutEgl(argc, argv, "[--device N]");
}
#endif
