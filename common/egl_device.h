// egl_device.h — a headless EGL display on one CUDA device, for the programs of lessons 10
// and 27: no window system, no X server, only the GPU (EGL_EXT_platform_device) and the
// extension that says which CUDA device an EGL device is (EGL_NV_device_cuda).
//
// The EGL functions come in through a table, EglCalls, because the two lessons get EGL in
// different ways: lesson 10 links libEGL (-lEGL) and fills the table with the linked functions;
// lesson 27 opens libEGL.so.1 with dlopen, so that a machine without that library still starts
// the program and hears what to install, and fills the table through eglGetProcAddress. The
// extension functions are looked up here, through the table's eglGetProcAddress.
//
// Include it only where the EGL headers are: each lesson decides that (__has_include and
// COURSE_NO_EGL, which the Makefile's set-up step adds where they are missing).
#pragma once

#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace course {

// The core EGL functions a device display needs.
struct EglCalls {
    PFNEGLGETERRORPROC getError = nullptr;
    PFNEGLGETPROCADDRESSPROC getProcAddress = nullptr;
    PFNEGLQUERYSTRINGPROC queryString = nullptr;
    PFNEGLINITIALIZEPROC initialize = nullptr;
    PFNEGLTERMINATEPROC terminate = nullptr;
    PFNEGLRELEASETHREADPROC releaseThread = nullptr;
};

// Is `name` one of the space-separated words of an EGL extension string (which may be NULL)?
inline bool eglHasExtension(const char* list, const char* name) {
    if (list == nullptr) return false;
    const size_t length = std::strlen(name);
    for (const char* at = std::strstr(list, name); at != nullptr; at = std::strstr(at + 1, name)) {
        const bool startsWord = at == list || at[-1] == ' ';
        const bool endsWord = at[length] == ' ' || at[length] == '\0';
        if (startsWord && endsWord) return true;
    }
    return false;
}

// EGL reports failures through eglGetError, not through return codes: prints the call and the code.
inline void reportEglError(const EglCalls& egl, const char* call) {
    std::fflush(stdout);
    std::fprintf(stderr, "EGL call failed: %s (EGL error 0x%04x)\n", call, static_cast<unsigned>(egl.getError()));
}

struct EglDeviceDisplay {
    EGLDisplay display = EGL_NO_DISPLAY;  // initialised, or EGL_NO_DISPLAY
    EGLint major = 0;
    EGLint minor = 0;
    const char* extensions = nullptr;  // the display's extension string
    std::string unavailable;           // why there is no display; empty when there is one
};

// Prints the client extensions it needs, how many EGL devices the machine has, which of
// them is `device`, and the display's EGL version; every reason for "no display" ends up
// in .unavailable, worded for a "section ...: SKIP (reason)" or "Result = SKIP (reason)" line.
inline EglDeviceDisplay openEglDeviceDisplay(const EglCalls& egl, CUdevice device) {
    EglDeviceDisplay result;
    // Client extensions belong to libEGL itself, so they are asked of EGL_NO_DISPLAY.
    // NULL means EGL older than 1.5 or no vendor library; eglGetError clears the EGL_BAD_DISPLAY.
    const char* client = egl.queryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    if (client == nullptr) egl.getError();
    const bool platformBase = eglHasExtension(client, "EGL_EXT_platform_base");
    // EGL_EXT_device_base is the union of these two; some implementations list them instead.
    const bool deviceBase =
        eglHasExtension(client, "EGL_EXT_device_base") ||
        (eglHasExtension(client, "EGL_EXT_device_enumeration") && eglHasExtension(client, "EGL_EXT_device_query"));
    const bool platformDevice = eglHasExtension(client, "EGL_EXT_platform_device");
    std::printf("client extension EGL_EXT_platform_base: %s\n", platformBase ? "yes" : "no");
    std::printf("client extension EGL_EXT_device_base (or enumeration + query): %s\n", deviceBase ? "yes" : "no");
    std::printf("client extension EGL_EXT_platform_device: %s\n", platformDevice ? "yes" : "no");
    if (!(platformBase && deviceBase && platformDevice)) {
        result.unavailable =
            "the EGL client lacks the device-platform extensions (libEGL without NVIDIA's EGL vendor library "
            "libEGL_nvidia.so.0, or EGL older than 1.5)";
        return result;
    }

    // The extensions' functions. eglGetProcAddress answers NULL for a function the implementation
    // does not have; one the client extensions promise but that is missing becomes the reason for
    // "no display", never a call through a null pointer.
    auto queryDevices = reinterpret_cast<PFNEGLQUERYDEVICESEXTPROC>(egl.getProcAddress("eglQueryDevicesEXT"));
    auto queryDeviceString =
        reinterpret_cast<PFNEGLQUERYDEVICESTRINGEXTPROC>(egl.getProcAddress("eglQueryDeviceStringEXT"));
    auto queryDeviceAttrib =
        reinterpret_cast<PFNEGLQUERYDEVICEATTRIBEXTPROC>(egl.getProcAddress("eglQueryDeviceAttribEXT"));
    auto getPlatformDisplay =
        reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(egl.getProcAddress("eglGetPlatformDisplayEXT"));
    const char* missing = queryDevices == nullptr         ? "eglQueryDevicesEXT"
                          : queryDeviceString == nullptr  ? "eglQueryDeviceStringEXT"
                          : queryDeviceAttrib == nullptr  ? "eglQueryDeviceAttribEXT"
                          : getPlatformDisplay == nullptr ? "eglGetPlatformDisplayEXT"
                                                          : nullptr;
    if (missing != nullptr) {
        result.unavailable = std::string("eglGetProcAddress gives no ") + missing +
                             ", though the EGL client lists the device-platform extensions";
        return result;
    }
    EGLint count = 0;
    if (!queryDevices(0, nullptr, &count)) reportEglError(egl, "eglQueryDevicesEXT(0, nullptr, &count)");
    std::vector<EGLDeviceEXT> devices(static_cast<size_t>(count));
    if (count > 0 && !queryDevices(count, devices.data(), &count))
        reportEglError(egl, "eglQueryDevicesEXT(count, devices.data(), &count)");
    // EGL lists every GPU its vendor libraries drive; CUDA_VISIBLE_DEVICES means nothing to it.
    // So this count describes the machine, and the match below is what the program relies on.
    std::printf("EGL devices on this machine: %d\n", count);
    EGLDeviceEXT match = EGL_NO_DEVICE_EXT;
    EGLint matchIndex = -1;
    for (EGLint i = 0; i < count && match == EGL_NO_DEVICE_EXT; ++i) {
        if (!eglHasExtension(queryDeviceString(devices[i], EGL_EXTENSIONS), "EGL_NV_device_cuda")) continue;
        // The CUDA ordinal as this process numbers devices. A GPU this process's CUDA does not
        // see has none: the query fails, which is an answer here, so its error is only cleared.
        EGLAttrib cudaDevice = -1;
        if (!queryDeviceAttrib(devices[i], EGL_CUDA_DEVICE_NV, &cudaDevice)) {
            egl.getError();
            continue;
        }
        if (cudaDevice == static_cast<EGLAttrib>(device)) {
            match = devices[i];
            matchIndex = i;
        }
    }
    if (match == EGL_NO_DEVICE_EXT) {
        std::printf("EGL device of CUDA device %d: none\n", static_cast<int>(device));
        result.unavailable =
            "no EGL device reports this CUDA device through EGL_NV_device_cuda (NVIDIA's EGL vendor library, "
            "libEGL_nvidia.so.0, is missing or does not drive this GPU)";
        return result;
    }
    std::printf("EGL device of CUDA device %d: EGL device %d (EGL_NV_device_cuda)\n", static_cast<int>(device),
                matchIndex);

    result.display = getPlatformDisplay(EGL_PLATFORM_DEVICE_EXT, match, nullptr);
    if (result.display == EGL_NO_DISPLAY) {
        reportEglError(egl, "eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, match, nullptr)");
        result.unavailable = "eglGetPlatformDisplayEXT gave no display for this device";
    } else if (!egl.initialize(result.display, &result.major, &result.minor)) {
        reportEglError(egl, "eglInitialize(display, &major, &minor)");
        result.unavailable = "eglInitialize failed on the device-platform display";
        result.display = EGL_NO_DISPLAY;
    } else {
        result.extensions = egl.queryString(result.display, EGL_EXTENSIONS);
        std::printf("EGL display version: %d.%d\n", result.major, result.minor);
    }
    return result;
}

// eglTerminate (when a display was opened), then eglReleaseThread.
inline void closeEglDeviceDisplay(const EglCalls& egl, EglDeviceDisplay& display) {
    if (display.display != EGL_NO_DISPLAY && !egl.terminate(display.display))
        reportEglError(egl, "eglTerminate(display)");
    display.display = EGL_NO_DISPLAY;
    egl.releaseThread();  // frees this thread's EGL state (current API, last error)
}

}  // namespace course
