// Lesson 10, program 2 — EGLSync and EGLImage: fences and images shared through EGL.
//
// A frame handed from a producer to a consumer is only safe to read once the
// producer's GPU work on it is done. EGLSync carries that "done" between APIs: a CUDA
// event becomes an EGLSync (EGL_NV_cuda_event), and on Jetson an EGLSync becomes a
// CUDA event a stream can wait on (cuEventCreateFromEGLSync). To make the wait
// matter, the producer here is held at a gate (cuStreamWaitValue32) until the
// consumer's work is enqueued: a consumer that does not wait reads the old frame,
// one that waits on the GPU reads the new one. Where the EGL parts cannot run, the
// same experiment runs with the producer's own CUDA event, and each EGL part says why
// it skipped. EGLImage needs an image from another client API: it is explained only.
//
//   egl_sync [--device N]
#include "egl_config.h"

#if LESSON10_HAVE_EGL
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <cuda.h>
#include <cudaEGL.h>
#include <cudaEGLTypedefs.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "cuda_egl.h"
#include "egl_display.h"

namespace {

constexpr unsigned int kWidth = 64;  // one 64x64 ARGB frame, pitch-linear
constexpr unsigned int kHeight = 64;

// Paints frame `number` into `frame` on `stream` (kernels/frames.cu).
void paintFrame(CUfunction writeFrame, CUstream stream, CUdeviceptr frame, size_t pitch, unsigned int number) {
    unsigned int pitchU = static_cast<unsigned int>(pitch), width = kWidth, height = kHeight;
    void* params[] = {&frame, &pitchU, &width, &height, &number};
    CHECK_DRIVER(cuLaunchKernel(writeFrame, kWidth / 16, kHeight / 16, 1, 16, 16, 1, 0, stream, params, nullptr));
}

// Enqueues checkFrame on `stream`: result[0] = the frame number it read, result[1] = bad pixels.
void checkFrameAsync(CUfunction checkFrame, CUstream stream, CUdeviceptr frame, size_t pitch, CUdeviceptr result) {
    unsigned int pitchU = static_cast<unsigned int>(pitch), width = kWidth, height = kHeight;
    CHECK_DRIVER(cuMemsetD32Async(result, 0, 2, stream));
    void* params[] = {&frame, &pitchU, &width, &height, &result};
    CHECK_DRIVER(cuLaunchKernel(checkFrame, kWidth / 16, kHeight / 16, 1, 16, 16, 1, 0, stream, params, nullptr));
}

const char* waitResultName(EGLint result) {
    switch (result) {
        case EGL_CONDITION_SATISFIED: return "EGL_CONDITION_SATISFIED";
        case EGL_TIMEOUT_EXPIRED: return "EGL_TIMEOUT_EXPIRED";
        default: return "EGL_FALSE (failed)";
    }
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;

    // Step 1: one context; the producer, the consumer and the gate each get a stream.
    course::printStep(1, "device, context, kernels, streams");
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
    CUfunction writeFrame = nullptr, checkFrame = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&writeFrame, module, "writeFrame"));
    CHECK_DRIVER(cuModuleGetFunction(&checkFrame, module, "checkFrame"));
    CUstream producer = nullptr, consumer = nullptr, gateStream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&producer, CU_STREAM_NON_BLOCKING));
    CHECK_DRIVER(cuStreamCreate(&consumer, CU_STREAM_NON_BLOCKING));
    CHECK_DRIVER(cuStreamCreate(&gateStream, CU_STREAM_NON_BLOCKING));

    // Step 2: the CUDA side of EGLSync and EGLImage (cuda_egl.h says why at run time).
    course::printStep(2, "resolve the CUDA-EGL sync and image functions with cuGetProcAddress");
    PFN_cuEventCreateFromEGLSync_v9000 eventCreateFromEglSync = nullptr;
    PFN_cuGraphicsEGLRegisterImage_v7000 registerImage = nullptr;
    const bool fromSyncFound = course::resolveDriverFunction("cuEventCreateFromEGLSync", 9000, eventCreateFromEglSync);
    const bool registerImageFound = course::resolveDriverFunction("cuGraphicsEGLRegisterImage", 7000, registerImage);

    // Step 3: a display on this GPU (egl_display.cpp) and the display extensions used below.
    course::printStep(3, "EGL display on the device platform");
    DeviceDisplay display = openDeviceDisplay(device);
    if (display.unavailable.empty())
        for (const char* extension : {"EGL_KHR_fence_sync", "EGL_NV_cuda_event", "EGL_KHR_image_base"})
            std::printf("display extension %s: %s\n", extension, yesNo(hasExtension(display.extensions, extension)));
    // CUDA event -> EGLSync needs EGL_NV_cuda_event and EGL 1.5's eglCreateSync, whose EGLAttrib
    // list holds a 64-bit CUevent (eglCreateSyncKHR's EGLint list cannot).
    std::string syncUnavailable = display.unavailable;
    if (syncUnavailable.empty() && !hasExtension(display.extensions, "EGL_NV_cuda_event"))
        syncUnavailable = "the display lacks EGL_NV_cuda_event";
    if (syncUnavailable.empty() && display.major * 10 + display.minor < 15)
        syncUnavailable = "eglCreateSync needs EGL 1.5; this display is " + std::to_string(display.major) + "." +
                          std::to_string(display.minor);

    // Step 4: frame 1 is in the buffer. The producer's next frame waits at a gate, a word in
    // device memory that only the gate stream opens; until then frame 2 cannot be painted.
    course::printStep(4, "a producer held at a gate, and a consumer that does not wait");
    CUdeviceptr frame = 0, gate = 0, results = 0;  // results: {number, bad pixels} x 2 reads
    size_t pitch = 0;
    CHECK_DRIVER(cuMemAllocPitch(&frame, &pitch, kWidth * 4, kHeight, 4));
    CHECK_DRIVER(cuMemAlloc(&gate, sizeof(unsigned int)));
    CHECK_DRIVER(cuMemAlloc(&results, 4 * sizeof(unsigned int)));
    CHECK_DRIVER(cuMemsetD32(gate, 0, 1));
    paintFrame(writeFrame, producer, frame, pitch, 1);
    CHECK_DRIVER(cuStreamSynchronize(producer));
    CUevent painted = nullptr, oldRead = nullptr;
    CHECK_DRIVER(cuEventCreate(&painted, CU_EVENT_DISABLE_TIMING));
    CHECK_DRIVER(cuEventCreate(&oldRead, CU_EVENT_DISABLE_TIMING));
    CHECK_DRIVER(cuStreamWaitValue32(producer, gate, 1, CU_STREAM_WAIT_VALUE_GEQ));
    paintFrame(writeFrame, producer, frame, pitch, 2);
    CHECK_DRIVER(cuEventRecord(painted, producer));
    std::printf("frame in the buffer: 1; producer enqueued frame 2 behind a closed gate\n");
    // Nothing orders this read after the producer: it reads whatever the buffer holds.
    checkFrameAsync(checkFrame, consumer, frame, pitch, results);
    CHECK_DRIVER(cuEventRecord(oldRead, consumer));

    // Step 5: the GPU-side wait, enqueued before any CPU wait and while the producer is still
    // held. EGL path: CUDA event -> EGLSync -> CUDA event; elsewhere the producer's own event.
    course::printStep(5, "EGLSync: the consumer's stream waits on the producer's fence");
    EGLSync sync = EGL_NO_SYNC;
    CUevent fromSync = nullptr;
    // A part this machine offers must work: each one attempted is a check.
    course::Verdict verdict;
    if (!syncUnavailable.empty()) {
        std::printf("section EGLSync from a CUDA event: SKIP (%s)\n", syncUnavailable.c_str());
    } else {
        // The event is recorded (step 4) before the EGLSync is made from it, as the extension requires.
        const EGLAttrib attributes[] = {EGL_CUDA_EVENT_HANDLE_NV, reinterpret_cast<EGLAttrib>(painted), EGL_NONE};
        sync = eglCreateSync(display.display, EGL_SYNC_CUDA_EVENT_NV, attributes);
        if (sync == EGL_NO_SYNC) reportEglError("eglCreateSync(display, EGL_SYNC_CUDA_EVENT_NV, attributes)");
        std::printf("eglCreateSync from the producer's CUDA event: %s\n", sync != EGL_NO_SYNC ? "made" : "failed");
        verdict.check("eglCreateSync makes an EGLSync from the CUDA event", sync != EGL_NO_SYNC);
    }
    if (sync == EGL_NO_SYNC || !fromSyncFound) {
        std::printf("section CUDA event from an EGLSync: SKIP (%s)\n",
                    !fromSyncFound ? "cuEventCreateFromEGLSync is not exported by this driver: EGLSync-to-CUDA "
                                     "interop is Tegra-only, app note §5.3"
                                   : "no EGLSync to start from (see the line above)");
    } else {
        // Reported, not fatal: never run on Tegra hardware, so a refusal should say which code it was.
        const CUresult made = REPORT_DRIVER(eventCreateFromEglSync(&fromSync, sync, CU_EVENT_DEFAULT));
        std::printf("cuEventCreateFromEGLSync: %s\n", course::driverErrorName(made));
        if (made != CUDA_SUCCESS) fromSync = nullptr;
        verdict.check("cuEventCreateFromEGLSync makes a CUDA event", made == CUDA_SUCCESS);
    }
    std::printf("consumer waits on: %s\n", fromSync != nullptr ? "the CUDA event made from the EGLSync"
                                                               : "the producer's CUDA event (no EGL on this path)");
    CHECK_DRIVER(cuStreamWaitEvent(consumer, fromSync != nullptr ? fromSync : painted, 0));
    checkFrameAsync(checkFrame, consumer, frame, pitch, results + 2 * sizeof(unsigned int));
    // A CPU poll while the gate is closed: the fence must not be signalled yet.
    const EGLint early = sync != EGL_NO_SYNC ? eglClientWaitSync(display.display, sync, 0, 0) : EGL_TIMEOUT_EXPIRED;
    const CUresult earlyQuery = cuEventQuery(painted);  // NOT_READY is an answer; other errors end the program
    if (earlyQuery != CUDA_ERROR_NOT_READY) CHECK_DRIVER(earlyQuery);
    std::printf("producer's fence while the gate is closed: %s\n", course::driverErrorName(earlyQuery));
    verdict.check("producer's event not complete while the gate is closed", earlyQuery == CUDA_ERROR_NOT_READY);
    if (sync != EGL_NO_SYNC) {
        std::printf("eglClientWaitSync, timeout 0, gate closed: %s\n", waitResultName(early));
        verdict.check("EGLSync not signalled while the gate is closed", early == EGL_TIMEOUT_EXPIRED);
    }
    // Open the gate once the unordered read is done, so that it cannot see a half-painted frame.
    CHECK_DRIVER(cuStreamWaitEvent(gateStream, oldRead, 0));
    CHECK_DRIVER(cuStreamWriteValue32(gateStream, gate, 1, 0));

    // Step 6: the CPU side, now that the gate is open: EGL blocks until the fence signals.
    course::printStep(6, "results, and the CPU waiting on the EGLSync");
    const EGLint late =
        sync != EGL_NO_SYNC ? eglClientWaitSync(display.display, sync, 0, 1000000000) : EGL_CONDITION_SATISFIED;
    if (sync != EGL_NO_SYNC) {
        std::printf("eglClientWaitSync, timeout 1 s, gate open: %s\n", waitResultName(late));
        verdict.check("EGLSync signalled once the gate is open", late == EGL_CONDITION_SATISFIED);
    }
    CHECK_DRIVER(cuStreamSynchronize(consumer));
    unsigned int read[4] = {};
    CHECK_DRIVER(cuMemcpyDtoH(read, results, sizeof(read)));
    std::printf("consumer without a wait read frame: %u, mismatched pixels %u\n", read[0], read[1]);
    std::printf("consumer after the GPU-side wait read frame: %u, mismatched pixels %u\n", read[2], read[3]);
    verdict.check("consumer without a wait read the old frame intact", read[0] == 1 && read[1] == 0);
    verdict.check("consumer after the GPU-side wait read the new frame intact", read[2] == 2 && read[3] == 0);

    // Step 7: EGLImage (app note §5.2) maps an image that another client API made — a GL
    // texture through eglCreateImageKHR, or a dma-buf from NvBufSurface on Jetson — with
    // cuGraphicsEGLRegisterImage. This program has no such client API, so it only says so.
    course::printStep(7, "EGLImage");
    std::printf(
        "section EGLImage: SKIP (an EGLImage needs a source buffer from a client API: an OpenGL (ES) texture in a "
        "GL context, or a Jetson dma-buf (NvBufSurface); this program creates neither. cuGraphicsEGLRegisterImage "
        "%s)\n",
        registerImageFound ? "is exported by this driver" : "is not exported by this driver");

    // Step 8: release in reverse order of creation, then the verdict.
    course::printStep(8, "release and check");
    if (fromSync != nullptr) CHECK_DRIVER(cuEventDestroy(fromSync));
    if (sync != EGL_NO_SYNC && !eglDestroySync(display.display, sync)) reportEglError("eglDestroySync(display, sync)");
    CHECK_DRIVER(cuEventDestroy(oldRead));
    CHECK_DRIVER(cuEventDestroy(painted));
    CHECK_DRIVER(cuMemFree(results));
    CHECK_DRIVER(cuMemFree(gate));
    CHECK_DRIVER(cuMemFree(frame));
    closeDeviceDisplay(display);
    CHECK_DRIVER(cuStreamDestroy(gateStream));
    CHECK_DRIVER(cuStreamDestroy(consumer));
    CHECK_DRIVER(cuStreamDestroy(producer));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuCtxDestroy(context));
    return verdict.finish();
}
#else
int main(int argc, char** argv) {
    return skipWithoutEgl(argc, argv, "[--device N]");
}
#endif
