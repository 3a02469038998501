// egl_display.h — a headless EGL display on one CUDA device, shared by egl_stream and
// egl_sync: no window system, no X server, only the GPU (EGL_EXT_platform_device)
// and the extension that says which CUDA device an EGL device is (EGL_NV_device_cuda).
// The code is common/egl_device.h (lesson 27 opens the same display); this lesson links
// libEGL, and egl_display.cpp hands that header the linked functions.
#pragma once

#include "egl_config.h"

#if LESSON10_HAVE_EGL
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <cuda.h>

#include "../common/egl_device.h"

using DeviceDisplay = course::EglDeviceDisplay;

// Is `name` one of the space-separated words of an EGL extension string (which may be NULL)?
bool hasExtension(const char* list, const char* name);
const char* yesNo(bool value);
// EGL reports failures through eglGetError, not through return codes: prints the call and the code.
void reportEglError(const char* call);

// Prints the client extensions it needs, how many EGL devices the machine has, which of
// them is `device`, and the display's EGL version; every reason for "no display" ends up
// in .unavailable, worded for a "section ...: SKIP (reason)" line.
DeviceDisplay openDeviceDisplay(CUdevice device);
// eglTerminate (when a display was opened), then eglReleaseThread.
void closeDeviceDisplay(DeviceDisplay& display);
#endif
