// Lesson 10 — EGL interop (EGLStream, EGLImage, EGLSync) and cuDLA.
//
// EGL is the hub through which CUDA shares frames and fences with cameras, codecs,
// OpenGL and the DLA on Tegra. This program opens a headless EGL display on the
// CUDA device through the EGL device platform, sends pitch-linear ARGB frames
// through an EGLStream with CUDA as producer and consumer, shows the app note's
// "the producer never gets its last frame back" trap and its cure, and runs the
// EGLSync, EGLImage and cuDLA parts where the hardware and driver allow —
// printing why each other part is skipped.
//
// The x86-64 stub libcuda.so this course links against does not export the cuEGL*
// functions, so every CUDA-EGL function is resolved at run time with
// cuGetProcAddress (lesson 08); the program links libEGL.so.1 (glvnd) directly.
//
//   10-egl-and-cudla [--device N] [--loadable FILE]
//     --loadable FILE   a DLA loadable built by TensorRT, for the cuDLA part (Jetson only)
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <cuda.h>
#include <cudaEGL.h>
#include <cudaEGLTypedefs.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#if __has_include(<cudla.h>)
#include <cudla.h>
#endif

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"

namespace {

constexpr unsigned int kFrameWidth = 64;
constexpr unsigned int kFrameHeight = 64;
constexpr unsigned int kRoundTripFrames = 4;
constexpr unsigned int kAcquireTimeoutUs = 100000;  // a presented frame is already waiting: 100 ms is plenty
constexpr unsigned int kDrainTimeoutUs = 20000;     // "is there another new frame?"
constexpr int kReturnAttempts = 20;                 // ReturnFrame's CUDA_ERROR_LAUNCH_TIMEOUT means "retry"

// Is `name` one of the space-separated words of an EGL extension string?
bool hasExtension(const char* list, const char* name) {
    if (list == nullptr) return false;
    const size_t length = std::strlen(name);
    for (const char* at = std::strstr(list, name); at != nullptr; at = std::strstr(at + 1, name)) {
        const bool startsWord = at == list || at[-1] == ' ';
        const bool endsWord = at[length] == ' ' || at[length] == '\0';
        if (startsWord && endsWord) return true;
    }
    return false;
}

const char* yesNo(bool value) {
    return value ? "yes" : "no";
}

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

// EGL reports failures through eglGetError, not through return codes.
void reportEglError(const char* call) {
    std::fflush(stdout);
    std::fprintf(stderr, "EGL call failed: %s (EGL error 0x%04x)\n", call, static_cast<unsigned>(eglGetError()));
}

}  // namespace

int main(int argc, char** argv) {
    // parseArguments takes integer options only, so the one string option is taken out first.
    const char* usage = "[--device N] [--loadable FILE]";
    std::string loadablePath;
    std::vector<char*> forwarded{argv[0]};
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--loadable") != 0) {
            forwarded.push_back(argv[i]);
        } else if (i + 1 < argc) {
            loadablePath = argv[++i];
        } else {
            std::fprintf(stderr, "%s: --loadable needs a file\nusage: %s %s\n", argv[0], argv[0], usage);
            return course::kExitUsage;
        }
    }
    course::Arguments args;
    if (!course::parseArguments(static_cast<int>(forwarded.size()), forwarded.data(), {}, {"--device"}, usage, args))
        return course::kExitUsage;

    // Step 1: CUDA first. The context stays current for every cuEGL* call below:
    // connections and frames belong to the context that made them.
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
    // The producer and the consumer each work on their own stream, as two threads
    // or two processes would; EGLStream orders the consumer after the producer.
    CUstream producerStream = nullptr, consumerStream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&producerStream, CU_STREAM_NON_BLOCKING));
    CHECK_DRIVER(cuStreamCreate(&consumerStream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr checkResult = 0;  // checkFrame's {frame number, mismatched pixels}
    CHECK_DRIVER(cuMemAlloc(&checkResult, 2 * sizeof(unsigned int)));
    // The consumer's own copy of each frame it acquires: copying out lets it hand the frame
    // back to the stream at once, and the check then reads memory this program wrote (tools
    // such as compute-sanitizer's initcheck cannot see the stream's internal copies).
    constexpr size_t kCopyPitch = kFrameWidth * 4;  // ARGB, 4 bytes a pixel
    CUdeviceptr consumerCopy = 0;
    CHECK_DRIVER(cuMemAlloc(&consumerCopy, kCopyPitch * kFrameHeight));

    // Step 2: the CUDA side of EGL interop, resolved from the driver at run time.
    course::printStep(2, "resolve the CUDA-EGL entry points with cuGetProcAddress");
    // Each lookup asks for the ABI version its PFN typedef names (..._v7000 = CUDA 7.0):
    // cuGetProcAddress returns the newest ABI not newer than that, so the pointer always
    // has the type it is cast to, even if a later driver adds a new ABI under the same name.
    auto resolve = [](const char* symbol, int abiVersion, auto& function) {
        void* address = nullptr;
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        const CUresult lookup =
            course::getProcAddress(symbol, &address, abiVersion, CU_GET_PROC_ADDRESS_DEFAULT, &status);
        // A symbol this driver lacks is an answer (CUDA_ERROR_NOT_FOUND), not a failure.
        if (lookup != CUDA_SUCCESS && lookup != CUDA_ERROR_NOT_FOUND) CHECK_DRIVER(lookup);
        const bool found = lookup == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS && address != nullptr;
        function = found ? reinterpret_cast<std::remove_reference_t<decltype(function)>>(address) : nullptr;
        std::printf("driver entry point %s: %s\n", symbol, found ? "found" : "not found");
        return found;
    };
    PFN_cuEGLStreamConsumerConnect_v7000 consumerConnect = nullptr;
    PFN_cuEGLStreamConsumerDisconnect_v7000 consumerDisconnect = nullptr;
    PFN_cuEGLStreamConsumerAcquireFrame_v7000 consumerAcquireFrame = nullptr;
    PFN_cuEGLStreamConsumerReleaseFrame_v7000 consumerReleaseFrame = nullptr;
    PFN_cuEGLStreamProducerConnect_v7000 producerConnect = nullptr;
    PFN_cuEGLStreamProducerDisconnect_v7000 producerDisconnect = nullptr;
    PFN_cuEGLStreamProducerPresentFrame_v7000 producerPresentFrame = nullptr;
    PFN_cuEGLStreamProducerReturnFrame_v7000 producerReturnFrame = nullptr;
    PFN_cuGraphicsResourceGetMappedEglFrame_v7000 getMappedEglFrame = nullptr;
    PFN_cuGraphicsEGLRegisterImage_v7000 graphicsEglRegisterImage = nullptr;
    PFN_cuEventCreateFromEGLSync_v9000 eventCreateFromEglSync = nullptr;
    bool streamFunctions = resolve("cuEGLStreamConsumerConnect", 7000, consumerConnect);
    streamFunctions = resolve("cuEGLStreamConsumerDisconnect", 7000, consumerDisconnect) && streamFunctions;
    streamFunctions = resolve("cuEGLStreamConsumerAcquireFrame", 7000, consumerAcquireFrame) && streamFunctions;
    streamFunctions = resolve("cuEGLStreamConsumerReleaseFrame", 7000, consumerReleaseFrame) && streamFunctions;
    streamFunctions = resolve("cuEGLStreamProducerConnect", 7000, producerConnect) && streamFunctions;
    streamFunctions = resolve("cuEGLStreamProducerDisconnect", 7000, producerDisconnect) && streamFunctions;
    streamFunctions = resolve("cuEGLStreamProducerPresentFrame", 7000, producerPresentFrame) && streamFunctions;
    streamFunctions = resolve("cuEGLStreamProducerReturnFrame", 7000, producerReturnFrame) && streamFunctions;
    streamFunctions = resolve("cuGraphicsResourceGetMappedEglFrame", 7000, getMappedEglFrame) && streamFunctions;
    const bool registerImageFound = resolve("cuGraphicsEGLRegisterImage", 7000, graphicsEglRegisterImage);
    const bool eventFromSyncFound = resolve("cuEventCreateFromEGLSync", 9000, eventCreateFromEglSync);

    // Step 3: no window system. EGL_EXT_platform_device lets a program open a display
    // on a GPU itself; these client extensions (queried with EGL_NO_DISPLAY) make it possible.
    course::printStep(3, "EGL client extensions");
    const char* clientExtensions = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    if (clientExtensions == nullptr) eglGetError();  // clear EGL_BAD_DISPLAY: EGL older than 1.5, or no vendor
    const bool platformBase = hasExtension(clientExtensions, "EGL_EXT_platform_base");
    const bool deviceBase = hasExtension(clientExtensions, "EGL_EXT_device_base");
    // EGL_EXT_device_base is the union of these two; some implementations list them instead.
    const bool deviceEnumeration = deviceBase || hasExtension(clientExtensions, "EGL_EXT_device_enumeration");
    const bool deviceQuery = deviceBase || hasExtension(clientExtensions, "EGL_EXT_device_query");
    const bool platformDevice = hasExtension(clientExtensions, "EGL_EXT_platform_device");
    std::printf("client extension EGL_EXT_platform_base: %s\n", yesNo(platformBase));
    std::printf("client extension EGL_EXT_device_base: %s\n", yesNo(deviceBase));
    std::printf("client extension EGL_EXT_device_enumeration (or device_base): %s\n", yesNo(deviceEnumeration));
    std::printf("client extension EGL_EXT_device_query (or device_base): %s\n", yesNo(deviceQuery));
    std::printf("client extension EGL_EXT_platform_device: %s\n", yesNo(platformDevice));

    // Step 4: find the EGL device that is this CUDA device (EGL_NV_device_cuda).
    course::printStep(4, "EGL devices and the CUDA device they are");
    std::string eglUnavailable;  // empty while an EGL display for this CUDA device is still possible
    EGLDeviceEXT eglDevice = EGL_NO_DEVICE_EXT;
    if (!(platformBase && deviceEnumeration && deviceQuery && platformDevice)) {
        eglUnavailable =
            "the EGL client lacks the device-platform extensions (libEGL without NVIDIA's EGL vendor "
            "library, or EGL older than 1.5)";
    } else {
        auto queryDevices = reinterpret_cast<PFNEGLQUERYDEVICESEXTPROC>(eglGetProcAddress("eglQueryDevicesEXT"));
        auto queryDeviceString =
            reinterpret_cast<PFNEGLQUERYDEVICESTRINGEXTPROC>(eglGetProcAddress("eglQueryDeviceStringEXT"));
        auto queryDeviceAttrib =
            reinterpret_cast<PFNEGLQUERYDEVICEATTRIBEXTPROC>(eglGetProcAddress("eglQueryDeviceAttribEXT"));
        EGLint deviceCount = 0;
        if (!queryDevices(0, nullptr, &deviceCount)) reportEglError("eglQueryDevicesEXT(0, nullptr, &deviceCount)");
        std::vector<EGLDeviceEXT> devices(static_cast<size_t>(deviceCount));
        if (deviceCount > 0 && !queryDevices(deviceCount, devices.data(), &deviceCount))
            reportEglError("eglQueryDevicesEXT(deviceCount, devices.data(), &deviceCount)");
        std::printf("EGL devices: %d\n", deviceCount);
        for (EGLint i = 0; i < deviceCount; ++i) {
            const bool cudaCapable = hasExtension(queryDeviceString(devices[i], EGL_EXTENSIONS), "EGL_NV_device_cuda");
            EGLAttrib cudaDevice = -1;
            if (cudaCapable && !queryDeviceAttrib(devices[i], EGL_CUDA_DEVICE_NV, &cudaDevice))
                reportEglError("eglQueryDeviceAttribEXT(device, EGL_CUDA_DEVICE_NV, &cudaDevice)");
            if (cudaDevice >= 0)
                std::printf("EGL device %d: EGL_NV_device_cuda yes, CUDA device %ld\n", i,
                            static_cast<long>(cudaDevice));
            else
                std::printf("EGL device %d: EGL_NV_device_cuda no\n", i);
            if (eglDevice == EGL_NO_DEVICE_EXT && cudaDevice == static_cast<EGLAttrib>(device)) eglDevice = devices[i];
        }
        if (eglDevice == EGL_NO_DEVICE_EXT)
            eglUnavailable =
                "no EGL device reports this CUDA device through EGL_NV_device_cuda (NVIDIA's EGL vendor "
                "library, libEGL_nvidia.so.0, is missing or does not drive this GPU)";
    }

    // Step 5: a display on that device, with no window and no X server.
    course::printStep(5, "EGL display on the device platform");
    EGLDisplay display = EGL_NO_DISPLAY;
    EGLint eglMajor = 0, eglMinor = 0;
    const char* displayExtensions = nullptr;
    if (eglUnavailable.empty()) {
        auto getPlatformDisplay =
            reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(eglGetProcAddress("eglGetPlatformDisplayEXT"));
        display = getPlatformDisplay(EGL_PLATFORM_DEVICE_EXT, eglDevice, nullptr);
        if (display == EGL_NO_DISPLAY) {
            reportEglError("eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, eglDevice, nullptr)");
            eglUnavailable = "eglGetPlatformDisplayEXT gave no display for this device";
        } else if (!eglInitialize(display, &eglMajor, &eglMinor)) {
            reportEglError("eglInitialize(display, &eglMajor, &eglMinor)");
            eglUnavailable = "eglInitialize failed on the device-platform display";
            display = EGL_NO_DISPLAY;
        }
    }
    bool ranSomething = false;
    if (!eglUnavailable.empty()) {
        std::printf("section EGL device platform: SKIP (%s)\n", eglUnavailable.c_str());
    } else {
        ranSomething = true;
        displayExtensions = eglQueryString(display, EGL_EXTENSIONS);
        std::printf("EGL display version: %d.%d\n", eglMajor, eglMinor);
        for (const char* extension : {"EGL_KHR_stream", "EGL_NV_stream_reset", "EGL_KHR_stream_fifo",
                                      "EGL_KHR_image_base", "EGL_KHR_fence_sync", "EGL_NV_cuda_event"})
            std::printf("display extension %s: %s\n", extension, yesNo(hasExtension(displayExtensions, extension)));
    }

    // What steps 6-8 need; the reason is printed in each section that skips.
    std::string streamUnavailable = eglUnavailable;
    if (streamUnavailable.empty() && !hasExtension(displayExtensions, "EGL_KHR_stream"))
        streamUnavailable = "the display lacks EGL_KHR_stream";
    if (streamUnavailable.empty() && !streamFunctions)
        streamUnavailable = "this driver lacks a cuEGLStream* entry point (see step 2)";
    auto createStream = reinterpret_cast<PFNEGLCREATESTREAMKHRPROC>(eglGetProcAddress("eglCreateStreamKHR"));
    auto destroyStream = reinterpret_cast<PFNEGLDESTROYSTREAMKHRPROC>(eglGetProcAddress("eglDestroyStreamKHR"));
    auto queryStream = reinterpret_cast<PFNEGLQUERYSTREAMKHRPROC>(eglGetProcAddress("eglQueryStreamKHR"));

    // One EGLStream with CUDA at both ends. The consumer must connect before the producer.
    struct StreamEnds {
        EGLStreamKHR stream = EGL_NO_STREAM_KHR;
        CUeglStreamConnection consumer = nullptr;
        CUeglStreamConnection producer = nullptr;
    };
    auto openStream = [&](const EGLint* attributes) {
        StreamEnds ends;
        ends.stream = createStream(display, attributes);
        if (ends.stream == EGL_NO_STREAM_KHR) {
            reportEglError("eglCreateStreamKHR(display, attributes)");
            std::exit(EXIT_FAILURE);
        }
        CHECK_DRIVER(consumerConnect(&ends.consumer, ends.stream));
        CHECK_DRIVER(producerConnect(&ends.producer, ends.stream, kFrameWidth, kFrameHeight));
        return ends;
    };
    // Disconnecting the producer takes back every frame it presented; only then may
    // the frame memory be freed.
    auto closeStream = [&](StreamEnds& ends) {
        CHECK_DRIVER(producerDisconnect(&ends.producer));
        CHECK_DRIVER(consumerDisconnect(&ends.consumer));
        if (!destroyStream(display, ends.stream)) reportEglError("eglDestroyStreamKHR(display, ends.stream)");
    };
    auto streamState = [&](const StreamEnds& ends) {
        EGLint state = 0;
        if (!queryStream(display, ends.stream, EGL_STREAM_STATE_KHR, &state))
            reportEglError("eglQueryStreamKHR(display, stream, EGL_STREAM_STATE_KHR, &state)");
        return streamStateName(state);
    };
    // Producer side: paint frame `number` into the frame's memory, then present it.
    // Both are enqueued on the producer's stream; PresentFrame does not wait for the kernel.
    auto produce = [&](StreamEnds& ends, const CUeglFrame& frame, unsigned int number) {
        CUdeviceptr base = reinterpret_cast<std::uintptr_t>(frame.frame.pPitch[0]);
        unsigned int pitch = frame.pitch, width = frame.width, height = frame.height;
        void* params[] = {&base, &pitch, &width, &height, &number};
        CHECK_DRIVER(cuLaunchKernel(writeFrame, (width + 15) / 16, (height + 15) / 16, 1, 16, 16, 1, 0, producerStream,
                                    params, nullptr));
        CHECK_DRIVER(producerPresentFrame(&ends.producer, frame, &producerStream));
    };
    // Consumer side: acquire (the GPU waits for the producer's kernel), copy the frame out,
    // release it, check the copy. Nothing within `timeoutUs` is an answer too: std::nullopt.
    struct Consumed {
        unsigned int frameNumber;
        unsigned int mismatches;
        CUeglFrame frame;
    };
    auto consume = [&](StreamEnds& ends, unsigned int timeoutUs) -> std::optional<Consumed> {
        CUgraphicsResource resource = nullptr;
        const CUresult acquireResult = consumerAcquireFrame(&ends.consumer, &resource, &consumerStream, timeoutUs);
        if (acquireResult == CUDA_ERROR_LAUNCH_TIMEOUT) return std::nullopt;  // no new frame in time
        CHECK_DRIVER(acquireResult);
        Consumed seen{};
        CHECK_DRIVER(getMappedEglFrame(&seen.frame, resource, 0, 0));
        CUDA_MEMCPY2D copy{};
        copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        copy.srcDevice = reinterpret_cast<std::uintptr_t>(seen.frame.frame.pPitch[0]);
        copy.srcPitch = seen.frame.pitch;
        copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        copy.dstDevice = consumerCopy;
        copy.dstPitch = kCopyPitch;
        copy.WidthInBytes = kCopyPitch;
        copy.Height = kFrameHeight;
        CHECK_DRIVER(cuMemcpy2DAsync(&copy, consumerStream));
        // Released right after the copy is enqueued: the release is ordered after it on the stream.
        CHECK_DRIVER(consumerReleaseFrame(&ends.consumer, resource, &consumerStream));
        CHECK_DRIVER(cuMemsetD32Async(checkResult, 0, 2, consumerStream));
        unsigned int pitch = static_cast<unsigned int>(kCopyPitch), width = kFrameWidth, height = kFrameHeight;
        void* params[] = {&consumerCopy, &pitch, &width, &height, &checkResult};
        CHECK_DRIVER(cuLaunchKernel(checkFrame, (width + 15) / 16, (height + 15) / 16, 1, 16, 16, 1, 0, consumerStream,
                                    params, nullptr));
        CHECK_DRIVER(cuStreamSynchronize(consumerStream));
        unsigned int result[2] = {};
        CHECK_DRIVER(cuMemcpyDtoH(result, checkResult, sizeof(result)));
        seen.frameNumber = result[0];
        seen.mismatches = result[1];
        return seen;
    };
    // ReturnFrame answers CUDA_ERROR_LAUNCH_TIMEOUT while no released frame is waiting; the docs say: retry.
    auto returnFrameWithRetry = [&](StreamEnds& ends, CUeglFrame* returned) {
        CUresult result = CUDA_ERROR_LAUNCH_TIMEOUT;
        for (int attempt = 0; attempt < kReturnAttempts && result == CUDA_ERROR_LAUNCH_TIMEOUT; ++attempt) {
            if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            result = producerReturnFrame(&ends.producer, returned, &producerStream);
        }
        return result;
    };

    // Frame memory: two pitch-linear 64x64 ARGB buffers, owned by the producer.
    CUdeviceptr bufferA = 0, bufferB = 0;
    size_t framePitch = 0;
    auto describeFrame = [&](CUdeviceptr buffer) {
        CUeglFrame frame{};
        frame.frame.pPitch[0] = reinterpret_cast<void*>(static_cast<std::uintptr_t>(buffer));
        frame.width = kFrameWidth;  // in pixels; must match cuEGLStreamProducerConnect's width and height
        frame.height = kFrameHeight;
        frame.depth = 1;
        frame.pitch = static_cast<unsigned int>(framePitch);  // in bytes
        frame.planeCount = 1;
        frame.numChannels = 4;
        frame.frameType = CU_EGL_FRAME_TYPE_PITCH;
        frame.eglColorFormat = CU_EGL_COLOR_FORMAT_ARGB;
        frame.cuFormat = CU_AD_FORMAT_UNSIGNED_INT8;
        return frame;
    };
    bool pass = true;

    // Step 6: the app note's flow as written: default stream attributes.
    course::printStep(6, "EGLStream: CUDA producer and consumer, default attributes");
    if (!streamUnavailable.empty()) {
        std::printf("section EGLStream producer/consumer: SKIP (%s)\n", streamUnavailable.c_str());
    } else {
        CHECK_DRIVER(cuMemAllocPitch(&bufferA, &framePitch, kFrameWidth * 4, kFrameHeight, 4));
        CHECK_DRIVER(cuMemAllocPitch(&bufferB, &framePitch, kFrameWidth * 4, kFrameHeight, 4));
        std::printf("frame: %ux%u ARGB, pitch-linear, pitch %zu bytes\n", kFrameWidth, kFrameHeight, framePitch);
        const EGLint defaultAttributes[] = {EGL_NONE};
        StreamEnds ends = openStream(defaultAttributes);
        std::printf("stream state after both ends connect: %s\n", streamState(ends));
        produce(ends, describeFrame(bufferA), 0);
        const auto seen = consume(ends, kAcquireTimeoutUs);
        if (!seen) {
            std::printf("consumer acquired: nothing within the timeout\n");
            pass = false;
        } else {
            std::printf("consumer acquired frame %u, mismatched pixels: %u\n", seen->frameNumber, seen->mismatches);
            std::printf("consumer frame: %ux%u, pitch %u, type %s, format %s\n", seen->frame.width, seen->frame.height,
                        seen->frame.pitch, seen->frame.frameType == CU_EGL_FRAME_TYPE_PITCH ? "PITCH" : "ARRAY",
                        seen->frame.eglColorFormat == CU_EGL_COLOR_FORMAT_ARGB ? "ARGB" : "other");
            std::printf("consumer reads the producer's memory (no copy): %s\n",
                        yesNo(seen->frame.frame.pPitch[0] == describeFrame(bufferA).frame.pPitch[0]));
            pass = pass && seen->frameNumber == 0 && seen->mismatches == 0;
        }
        std::printf("stream state after the consumer released: %s\n", streamState(ends));
        // EGL_SUPPORT_REUSE_NV is EGL_TRUE by default: the stream keeps the last frame
        // so the consumer can acquire it again, so it never comes back to the producer.
        CUeglFrame returned{};
        const CUresult stuck = REPORT_DRIVER(returnFrameWithRetry(ends, &returned));
        std::printf("return frame with EGL_SUPPORT_REUSE_NV = EGL_TRUE (default), %d attempts: %s (code %d)\n",
                    kReturnAttempts, course::driverErrorName(stuck), static_cast<int>(stuck));
        closeStream(ends);
    }

    // Step 7: the cure (EGL_NV_stream_reset): EGL_SUPPORT_REUSE_NV = EGL_FALSE at
    // creation lets the last frame leave the stream, so the producer can recycle it.
    course::printStep(7, "EGLStream with EGL_SUPPORT_REUSE_NV = EGL_FALSE: frames round-trip");
    const bool streamReset = hasExtension(displayExtensions, "EGL_NV_stream_reset");
    if (!streamUnavailable.empty()) {
        std::printf("section EGLStream round trip: SKIP (%s)\n", streamUnavailable.c_str());
    } else if (!streamReset) {
        std::printf("section EGLStream round trip: SKIP (the display lacks EGL_NV_stream_reset)\n");
    } else {
        const EGLint noReuse[] = {EGL_SUPPORT_REUSE_NV, EGL_FALSE, EGL_NONE};
        StreamEnds ends = openStream(noReuse);
        CUeglFrame frame = describeFrame(bufferA);
        unsigned int roundTrips = 0;
        for (unsigned int number = 0; number < kRoundTripFrames; ++number) {
            produce(ends, frame, number);
            const auto seen = consume(ends, kAcquireTimeoutUs);
            if (!seen) {
                std::printf("frame %u: consumer acquired nothing within the timeout\n", number);
                break;
            }
            CUeglFrame returned{};
            const CUresult back = returnFrameWithRetry(ends, &returned);
            const bool sameBuffer = back == CUDA_SUCCESS && returned.frame.pPitch[0] == frame.frame.pPitch[0];
            std::printf(
                "frame %u: consumer saw frame %u, mismatched pixels %u, returned to producer: %s, same "
                "buffer: %s\n",
                number, seen->frameNumber, seen->mismatches, course::driverErrorName(back), yesNo(sameBuffer));
            if (seen->frameNumber != number || seen->mismatches != 0 || !sameBuffer) break;
            ++roundTrips;
        }
        std::printf("round trips: %u of %u\n", roundTrips, kRoundTripFrames);
        pass = pass && roundTrips == kRoundTripFrames;
        closeStream(ends);
    }

    // Step 8: mailbox (the default) keeps only the newest frame; FIFO
    // (EGL_KHR_stream_fifo) queues them. Present two frames before the consumer looks.
    course::printStep(8, "EGLStream modes: mailbox vs FIFO");
    const bool fifoSupported = hasExtension(displayExtensions, "EGL_KHR_stream_fifo");
    for (const bool fifo : {false, true}) {
        const char* mode = fifo ? "fifo" : "mailbox";
        if (!streamUnavailable.empty() || !streamReset) {
            std::printf(
                "section EGLStream %s: SKIP (%s)\n", mode,
                streamUnavailable.empty() ? "the display lacks EGL_NV_stream_reset" : streamUnavailable.c_str());
            continue;
        }
        if (fifo && !fifoSupported) {
            std::printf("section EGLStream fifo: SKIP (the display lacks EGL_KHR_stream_fifo)\n");
            continue;
        }
        const EGLint mailboxAttributes[] = {EGL_SUPPORT_REUSE_NV, EGL_FALSE, EGL_NONE};
        const EGLint fifoAttributes[] = {EGL_SUPPORT_REUSE_NV, EGL_FALSE, EGL_STREAM_FIFO_LENGTH_KHR, 4, EGL_NONE};
        StreamEnds ends = openStream(fifo ? fifoAttributes : mailboxAttributes);
        const CUeglFrame frameA = describeFrame(bufferA), frameB = describeFrame(bufferB);
        produce(ends, frameA, 10);
        produce(ends, frameB, 11);
        // Acquire until no new frame arrives within the drain timeout.
        std::vector<unsigned int> seenNumbers;
        bool framesIntact = true;
        while (const auto seen = consume(ends, kDrainTimeoutUs)) {
            seenNumbers.push_back(seen->frameNumber);
            framesIntact = framesIntact && seen->mismatches == 0;
        }
        std::string seenList;
        for (const unsigned int number : seenNumbers) seenList += " " + std::to_string(number);
        // Every presented frame comes back: acquired-and-released, or (mailbox) replaced unseen.
        int returnedCount = 0;
        for (int i = 0; i < 2; ++i) {
            CUeglFrame returned{};
            if (returnFrameWithRetry(ends, &returned) != CUDA_SUCCESS) break;
            returnedCount += returned.frame.pPitch[0] == frameA.frame.pPitch[0] ||
                             returned.frame.pPitch[0] == frameB.frame.pPitch[0];
        }
        std::printf("%s: presented frames 10 11, consumer saw%s\n", mode,
                    seenList.empty() ? " nothing" : seenList.c_str());
        std::printf("%s: frames back at the producer: %d of 2\n", mode, returnedCount);
        // Both modes must deliver frames intact, in order, ending with the newest,
        // and give both buffers back. Whether frame 10 was seen is what the modes differ in.
        const bool inOrder = std::is_sorted(seenNumbers.begin(), seenNumbers.end()) &&
                             std::adjacent_find(seenNumbers.begin(), seenNumbers.end()) == seenNumbers.end();
        pass =
            pass && framesIntact && inOrder && !seenNumbers.empty() && seenNumbers.back() == 11 && returnedCount == 2;
        closeStream(ends);
    }
    if (bufferB != 0) CHECK_DRIVER(cuMemFree(bufferB));
    if (bufferA != 0) CHECK_DRIVER(cuMemFree(bufferA));

    // Step 9: EGLImage (app note §5.2): an image that another client API made —
    // a GL texture through eglCreateImageKHR, or a dma-buf from NvBufSurface on Jetson —
    // registered with cuGraphicsEGLRegisterImage. No such producer exists in this program.
    course::printStep(9, "EGLImage");
    std::printf(
        "section EGLImage: SKIP (an EGLImage needs a source buffer from a client API: an OpenGL (ES) "
        "texture in a GL context, or a Jetson dma-buf (NvBufSurface); this lesson creates neither. "
        "cuGraphicsEGLRegisterImage %s; the app note documents it for Tegra only)\n",
        registerImageFound ? "is exported by this driver" : "is not exported by this driver");

    // Step 10: EGLSync (app note §5.3). (a) CUDA event -> EGLSync (EGL_NV_cuda_event):
    // the CPU waits through EGL for GPU work. (b) EGLSync -> CUDA event
    // (cuEventCreateFromEGLSync): a CUDA stream waits on an EGL fence; Tegra-only.
    course::printStep(10, "EGLSync");
    const bool cudaEventSync = eglUnavailable.empty() && hasExtension(displayExtensions, "EGL_NV_cuda_event") &&
                               (eglMajor > 1 || (eglMajor == 1 && eglMinor >= 5));
    if (!cudaEventSync) {
        std::printf("section EGLSync from a CUDA event: SKIP (%s)\n",
                    !eglUnavailable.empty() ? eglUnavailable.c_str()
                                            : "the display lacks EGL_NV_cuda_event or EGL 1.5's eglCreateSync");
        std::printf("section CUDA event from an EGLSync: SKIP (%s)\n",
                    eventFromSyncFound ? "no EGLSync to start from"
                                       : "cuEventCreateFromEGLSync is not exported by this driver: EGLSync-to-CUDA "
                                         "interop is Tegra-only, app note §5.3");
    } else {
        CUdeviceptr syncBuffer = 0;
        size_t syncPitch = 0;
        CHECK_DRIVER(cuMemAllocPitch(&syncBuffer, &syncPitch, kFrameWidth * 4, kFrameHeight, 4));
        CUevent cudaEvent = nullptr;
        CHECK_DRIVER(cuEventCreate(&cudaEvent, CU_EVENT_DISABLE_TIMING));
        {
            unsigned int syncPitchU = static_cast<unsigned int>(syncPitch), width = kFrameWidth, height = kFrameHeight,
                         number = 42;
            void* params[] = {&syncBuffer, &syncPitchU, &width, &height, &number};
            CHECK_DRIVER(
                cuLaunchKernel(writeFrame, width / 16, height / 16, 1, 16, 16, 1, 0, producerStream, params, nullptr));
        }
        // The event must be recorded before the EGLSync is made from it.
        CHECK_DRIVER(cuEventRecord(cudaEvent, producerStream));
        const EGLAttrib syncAttributes[] = {EGL_CUDA_EVENT_HANDLE_NV, reinterpret_cast<EGLAttrib>(cudaEvent), EGL_NONE};
        EGLSync sync = eglCreateSync(display, EGL_SYNC_CUDA_EVENT_NV, syncAttributes);
        if (sync == EGL_NO_SYNC) {
            reportEglError("eglCreateSync(display, EGL_SYNC_CUDA_EVENT_NV, syncAttributes)");
            pass = false;
        } else {
            const EGLint waited = eglClientWaitSync(display, sync, 0, 1000000000);  // at most 1 s
            std::printf("eglClientWaitSync on the CUDA event's EGLSync: %s\n",
                        waited == EGL_CONDITION_SATISFIED ? "EGL_CONDITION_SATISFIED" : "not satisfied");
            pass = pass && waited == EGL_CONDITION_SATISFIED;
            auto checkSyncBuffer = [&]() {
                CHECK_DRIVER(cuMemsetD32Async(checkResult, 0, 2, consumerStream));
                unsigned int syncPitchU = static_cast<unsigned int>(syncPitch), width = kFrameWidth,
                             height = kFrameHeight;
                void* params[] = {&syncBuffer, &syncPitchU, &width, &height, &checkResult};
                CHECK_DRIVER(cuLaunchKernel(checkFrame, width / 16, height / 16, 1, 16, 16, 1, 0, consumerStream,
                                            params, nullptr));
                CHECK_DRIVER(cuStreamSynchronize(consumerStream));
                unsigned int result[2] = {};
                CHECK_DRIVER(cuMemcpyDtoH(result, checkResult, sizeof(result)));
                return result[0] == 42 && result[1] == 0;
            };
            const bool afterCpuWait = checkSyncBuffer();
            std::printf("buffer complete after the EGL wait: %s\n", yesNo(afterCpuWait));
            pass = pass && afterCpuWait;
            if (!eventFromSyncFound) {
                std::printf(
                    "section CUDA event from an EGLSync: SKIP (cuEventCreateFromEGLSync is not exported by "
                    "this driver: EGLSync-to-CUDA interop is Tegra-only, app note §5.3)\n");
            } else {
                CUevent fromSync = nullptr;
                const CUresult made = REPORT_DRIVER(eventCreateFromEglSync(&fromSync, sync, CU_EVENT_DEFAULT));
                std::printf("cuEventCreateFromEGLSync: %s\n", course::driverErrorName(made));
                if (made == CUDA_SUCCESS) {
                    // The consumer stream waits on the GPU for the EGL fence; no CPU blocking.
                    CHECK_DRIVER(cuStreamWaitEvent(consumerStream, fromSync, 0));
                    const bool afterGpuWait = checkSyncBuffer();
                    std::printf("buffer complete after the stream waited on the EGLSync's event: %s\n",
                                yesNo(afterGpuWait));
                    pass = pass && afterGpuWait;
                    CHECK_DRIVER(cuEventDestroy(fromSync));
                } else {
                    pass = false;
                }
            }
            if (!eglDestroySync(display, sync)) reportEglError("eglDestroySync(display, sync)");
        }
        CHECK_DRIVER(cuEventDestroy(cudaEvent));
        CHECK_DRIVER(cuMemFree(syncBuffer));
    }

    // Step 11: cuDLA (app note "cuDLA"): DLA tasks submitted on a CUDA stream (hybrid
    // mode). Only aarch64 Tegra toolkits ship cudla.h and libcudla.so, and only
    // Xavier/Orin have DLA engines, so elsewhere this part is not even compiled.
    course::printStep(11, "cuDLA hybrid mode");
#if __has_include(<cudla.h>)
    if (loadablePath.empty()) {
        std::printf(
            "section cuDLA: SKIP (no loadable: run with --loadable FILE, a DLA loadable built by TensorRT, "
            "e.g. trtexec --useDLACore=0 --buildDLAStandalone)\n");
    } else {
        auto checkDla = [](cudlaStatus status, const char* call) {
            if (status == cudlaSuccess) return;
            std::fflush(stdout);
            std::fprintf(stderr, "cuDLA call failed: %s: cudlaStatus %d\n", call, static_cast<int>(status));
            std::exit(EXIT_FAILURE);
        };
        std::uint64_t dlaCount = 0;
        checkDla(cudlaDeviceGetCount(&dlaCount), "cudlaDeviceGetCount(&dlaCount)");
        std::printf("DLA engines: %llu\n", static_cast<unsigned long long>(dlaCount));
        const auto loadable = course::readFile(loadablePath);
        if (dlaCount == 0) {
            std::printf("section cuDLA: SKIP (this Tegra has no DLA engine)\n");
        } else if (!loadable) {
            pass = false;
        } else {
            ranSomething = true;
            // Hybrid mode allocates through CUDA's primary context of the current device,
            // so that context is made current for this section.
            CUcontext primary = nullptr;
            CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
            CHECK_DRIVER(cuCtxPushCurrent(primary));
            CUstream dlaStream = nullptr;
            CHECK_DRIVER(cuStreamCreate(&dlaStream, CU_STREAM_NON_BLOCKING));
            cudlaDevHandle dla = nullptr;
            checkDla(cudlaCreateDevice(0, &dla, CUDLA_CUDA_DLA), "cudlaCreateDevice(0, &dla, CUDLA_CUDA_DLA)");
            cudlaModule dlaModule = nullptr;
            checkDla(cudlaModuleLoadFromMemory(dla, reinterpret_cast<const std::uint8_t*>(loadable->data()),
                                               loadable->size(), &dlaModule, 0),
                     "cudlaModuleLoadFromMemory(dla, loadable, size, &dlaModule, 0)");
            cudlaModuleAttribute attribute{};
            checkDla(cudlaModuleGetAttributes(dlaModule, CUDLA_NUM_INPUT_TENSORS, &attribute),
                     "cudlaModuleGetAttributes(CUDLA_NUM_INPUT_TENSORS)");
            const std::uint32_t inputCount = attribute.numInputTensors;
            checkDla(cudlaModuleGetAttributes(dlaModule, CUDLA_NUM_OUTPUT_TENSORS, &attribute),
                     "cudlaModuleGetAttributes(CUDLA_NUM_OUTPUT_TENSORS)");
            const std::uint32_t outputCount = attribute.numOutputTensors;
            std::vector<cudlaModuleTensorDescriptor> inputDescriptors(inputCount), outputDescriptors(outputCount);
            attribute.inputTensorDesc = inputDescriptors.data();
            checkDla(cudlaModuleGetAttributes(dlaModule, CUDLA_INPUT_TENSOR_DESCRIPTORS, &attribute),
                     "cudlaModuleGetAttributes(CUDLA_INPUT_TENSOR_DESCRIPTORS)");
            attribute.outputTensorDesc = outputDescriptors.data();
            checkDla(cudlaModuleGetAttributes(dlaModule, CUDLA_OUTPUT_TENSOR_DESCRIPTORS, &attribute),
                     "cudlaModuleGetAttributes(CUDLA_OUTPUT_TENSOR_DESCRIPTORS)");
            // Each tensor: CUDA memory, zeroed, then registered so the DLA's SMMU can reach it.
            std::vector<CUdeviceptr> buffers;
            std::vector<std::uint64_t*> inputRegistered, outputRegistered;
            auto prepare = [&](const cudlaModuleTensorDescriptor& d, const char* role,
                               std::vector<std::uint64_t*>& out) {
                std::printf("DLA %s tensor %s: %llu bytes (n %llu, c %llu, h %llu, w %llu)\n", role, d.name,
                            static_cast<unsigned long long>(d.size), static_cast<unsigned long long>(d.n),
                            static_cast<unsigned long long>(d.c), static_cast<unsigned long long>(d.h),
                            static_cast<unsigned long long>(d.w));
                CUdeviceptr buffer = 0;
                CHECK_DRIVER(cuMemAlloc(&buffer, d.size));
                CHECK_DRIVER(cuMemsetD8Async(buffer, 0, d.size, dlaStream));
                std::uint64_t* registered = nullptr;
                checkDla(cudlaMemRegister(dla, reinterpret_cast<const std::uint64_t*>(buffer), d.size, &registered, 0),
                         "cudlaMemRegister(dla, buffer, size, &registered, 0)");
                buffers.push_back(buffer);
                out.push_back(registered);
            };
            for (const auto& d : inputDescriptors) prepare(d, "input", inputRegistered);
            for (const auto& d : outputDescriptors) prepare(d, "output", outputRegistered);
            cudlaTask task{};
            task.moduleHandle = dlaModule;
            task.inputTensor = inputRegistered.data();
            task.numInputTensors = inputCount;
            task.outputTensor = outputRegistered.data();
            task.numOutputTensors = outputCount;
            // Enqueued behind the memsets on the same stream: stream order covers the DLA too.
            checkDla(cudlaSubmitTask(dla, &task, 1, dlaStream, 0), "cudlaSubmitTask(dla, &task, 1, dlaStream, 0)");
            // A DLA hardware error surfaces at CUDA synchronisation (CUDA_ERROR_EXTERNAL_DEVICE);
            // cudlaGetLastError on the handle then says which.
            const CUresult synced = REPORT_DRIVER(cuStreamSynchronize(dlaStream));
            const cudlaStatus hardware = cudlaGetLastError(dla);
            std::printf("cuStreamSynchronize after the DLA task: %s\n", course::driverErrorName(synced));
            std::printf("cudlaGetLastError: %d\n", static_cast<int>(hardware));
            pass = pass && synced == CUDA_SUCCESS && hardware == cudlaSuccess;
            for (std::uint64_t* registered : outputRegistered)
                checkDla(cudlaMemUnregister(dla, registered), "cudlaMemUnregister(dla, output)");
            for (std::uint64_t* registered : inputRegistered)
                checkDla(cudlaMemUnregister(dla, registered), "cudlaMemUnregister(dla, input)");
            for (auto it = buffers.rbegin(); it != buffers.rend(); ++it) CHECK_DRIVER(cuMemFree(*it));
            checkDla(cudlaModuleUnload(dlaModule, 0), "cudlaModuleUnload(dlaModule, 0)");
            checkDla(cudlaDestroyDevice(dla), "cudlaDestroyDevice(dla)");
            CHECK_DRIVER(cuStreamDestroy(dlaStream));
            CHECK_DRIVER(cuCtxPopCurrent(nullptr));
            CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
        }
    }
    const char* dlaSkipReason = "no DLA task ran";
#else
    const char* dlaSkipReason =
        "needs a Jetson Xavier/Orin DLA, cudla.h from an aarch64 Tegra toolkit, and a "
        "loadable built by TensorRT";
    std::printf("section cuDLA: SKIP (%s)\n", dlaSkipReason);
    if (!loadablePath.empty())
        std::printf("loadable given (%s), but this build has no cudla.h\n", loadablePath.c_str());
#endif

    // Step 12: release in reverse order of creation, then the verdict.
    course::printStep(12, "release and check");
    if (display != EGL_NO_DISPLAY && !eglTerminate(display)) reportEglError("eglTerminate(display)");
    eglReleaseThread();  // frees this thread's EGL state (current API, last error)
    CHECK_DRIVER(cuMemFree(consumerCopy));
    CHECK_DRIVER(cuMemFree(checkResult));
    CHECK_DRIVER(cuStreamDestroy(consumerStream));
    CHECK_DRIVER(cuStreamDestroy(producerStream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuCtxDestroy(context));
    if (!ranSomething) {
        std::printf("Result = SKIP (EGL: %s; cuDLA: %s)\n", eglUnavailable.c_str(), dlaSkipReason);
        return course::kExitNotApplicable;
    }
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
