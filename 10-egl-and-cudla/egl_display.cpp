// egl_display.cpp — see egl_display.h: the linked libEGL's functions, handed to common/egl_device.h.
#include "egl_display.h"

#if LESSON10_HAVE_EGL
namespace {

const course::EglCalls& linkedEgl() {
    static const course::EglCalls calls{eglGetError,   eglGetProcAddress, eglQueryString,
                                        eglInitialize, eglTerminate,      eglReleaseThread};
    return calls;
}

}  // namespace

bool hasExtension(const char* list, const char* name) {
    return course::eglHasExtension(list, name);
}

const char* yesNo(bool value) {
    return value ? "yes" : "no";
}

void reportEglError(const char* call) {
    course::reportEglError(linkedEgl(), call);
}

DeviceDisplay openDeviceDisplay(CUdevice device) {
    return course::openEglDeviceDisplay(linkedEgl(), device);
}

void closeDeviceDisplay(DeviceDisplay& display) {
    course::closeEglDeviceDisplay(linkedEgl(), display);
}
#endif
