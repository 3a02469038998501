// egl_display.cpp — see egl_display.h.
#include "egl_display.h"

#if LESSON10_HAVE_EGL
#include <cstdio>
#include <cstring>
#include <vector>

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

void reportEglError(const char* call) {
    std::fflush(stdout);
    std::fprintf(stderr, "EGL call failed: %s (EGL error 0x%04x)\n", call, static_cast<unsigned>(eglGetError()));
}

DeviceDisplay openDeviceDisplay(CUdevice device) {
    DeviceDisplay result;
    // Client extensions belong to libEGL itself, so they are asked of EGL_NO_DISPLAY.
    // NULL means EGL older than 1.5 or no vendor library; eglGetError clears the EGL_BAD_DISPLAY.
    const char* client = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    if (client == nullptr) eglGetError();
    const bool platformBase = hasExtension(client, "EGL_EXT_platform_base");
    // EGL_EXT_device_base is the union of these two; some implementations list them instead.
    const bool deviceBase =
        hasExtension(client, "EGL_EXT_device_base") ||
        (hasExtension(client, "EGL_EXT_device_enumeration") && hasExtension(client, "EGL_EXT_device_query"));
    const bool platformDevice = hasExtension(client, "EGL_EXT_platform_device");
    std::printf("client extension EGL_EXT_platform_base: %s\n", yesNo(platformBase));
    std::printf("client extension EGL_EXT_device_base (or enumeration + query): %s\n", yesNo(deviceBase));
    std::printf("client extension EGL_EXT_platform_device: %s\n", yesNo(platformDevice));
    if (!(platformBase && deviceBase && platformDevice)) {
        result.unavailable =
            "the EGL client lacks the device-platform extensions (libEGL without NVIDIA's EGL vendor library "
            "libEGL_nvidia.so.0, or EGL older than 1.5)";
        return result;
    }

    auto queryDevices = reinterpret_cast<PFNEGLQUERYDEVICESEXTPROC>(eglGetProcAddress("eglQueryDevicesEXT"));
    auto queryDeviceString =
        reinterpret_cast<PFNEGLQUERYDEVICESTRINGEXTPROC>(eglGetProcAddress("eglQueryDeviceStringEXT"));
    auto queryDeviceAttrib =
        reinterpret_cast<PFNEGLQUERYDEVICEATTRIBEXTPROC>(eglGetProcAddress("eglQueryDeviceAttribEXT"));
    EGLint count = 0;
    if (!queryDevices(0, nullptr, &count)) reportEglError("eglQueryDevicesEXT(0, nullptr, &count)");
    std::vector<EGLDeviceEXT> devices(static_cast<size_t>(count));
    if (count > 0 && !queryDevices(count, devices.data(), &count))
        reportEglError("eglQueryDevicesEXT(count, devices.data(), &count)");
    // EGL lists every GPU its vendor libraries drive; CUDA_VISIBLE_DEVICES means nothing to it.
    // So this count describes the machine, and the match below is what the program relies on.
    std::printf("EGL devices on this machine: %d\n", count);
    EGLDeviceEXT match = EGL_NO_DEVICE_EXT;
    EGLint matchIndex = -1;
    for (EGLint i = 0; i < count && match == EGL_NO_DEVICE_EXT; ++i) {
        if (!hasExtension(queryDeviceString(devices[i], EGL_EXTENSIONS), "EGL_NV_device_cuda")) continue;
        // The CUDA ordinal as this process numbers devices. A GPU this process's CUDA does not
        // see has none: the query fails, which is an answer here, so its error is only cleared.
        EGLAttrib cudaDevice = -1;
        if (!queryDeviceAttrib(devices[i], EGL_CUDA_DEVICE_NV, &cudaDevice)) {
            eglGetError();
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

    auto getPlatformDisplay =
        reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(eglGetProcAddress("eglGetPlatformDisplayEXT"));
    result.display = getPlatformDisplay(EGL_PLATFORM_DEVICE_EXT, match, nullptr);
    if (result.display == EGL_NO_DISPLAY) {
        reportEglError("eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, match, nullptr)");
        result.unavailable = "eglGetPlatformDisplayEXT gave no display for this device";
    } else if (!eglInitialize(result.display, &result.major, &result.minor)) {
        reportEglError("eglInitialize(display, &major, &minor)");
        result.unavailable = "eglInitialize failed on the device-platform display";
        result.display = EGL_NO_DISPLAY;
    } else {
        result.extensions = eglQueryString(result.display, EGL_EXTENSIONS);
        std::printf("EGL display version: %d.%d\n", result.major, result.minor);
    }
    return result;
}

void closeDeviceDisplay(DeviceDisplay& display) {
    if (display.display != EGL_NO_DISPLAY && !eglTerminate(display.display)) reportEglError("eglTerminate(display)");
    display.display = EGL_NO_DISPLAY;
    eglReleaseThread();  // frees this thread's EGL state (current API, last error)
}
#endif
