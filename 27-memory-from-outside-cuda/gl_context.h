// gl_context.h — gl_interop's OpenGL: headless through EGL, with neither library linked.
//
// gl_interop links neither libEGL nor libOpenGL. It opens glvnd's libEGL.so.1 with dlopen, takes
// eglGetProcAddress from it with dlsym, and every other EGL function and every GL function from
// eglGetProcAddress (the EGL 1.5 specification lets it be queried for core functions too, not only
// extensions; before 1.5 that is the client extension EGL_KHR_client_get_all_proc_addresses, which
// step 1 prints). A function it does not have comes back NULL, and the program then SKIPs with its
// name. So a machine with the headers but without the library still starts the program, which
// then says what to install (Result = SKIP, exit 77) instead of failing to load. The display on
// the chosen GPU is common/egl_device.h's, the one lesson 10 opens too; this file adds the
// context, the GL function table and GL_CHECK.
#pragma once

// Whether this build has OpenGL at all: GL/gl.h (libgl-dev; cudaGL.h includes it) and EGL/egl.h
// (libegl-dev). The Makefile's set-up step adds -DCOURSE_NO_GL or -DCOURSE_NO_EGL where they are
// missing; __has_include catches the headers by itself for a build outside the course.
#if __has_include(<GL/gl.h>) && !defined(COURSE_NO_GL)
#define LESSON27_GL_HEADERS 1
#else
#define LESSON27_GL_HEADERS 0
#endif
#if __has_include(<EGL/egl.h>) && !defined(COURSE_NO_EGL)
#define LESSON27_EGL_HEADERS 1
#else
#define LESSON27_EGL_HEADERS 0
#endif
#define LESSON27_HAVE_GL (LESSON27_GL_HEADERS && LESSON27_EGL_HEADERS)

#include <cstdio>

#include "../common/check_driver.h"
#include "../common/course_util.h"

// The whole program in a build without those headers: check the command line like the real
// program, then exit 77 ("not applicable here") with what to install, before any driver call.
inline int skipWithoutGl(int argc, char** argv, const char* usage) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, usage, args)) return course::kExitUsage;
    const char* missing =
        !LESSON27_GL_HEADERS && !LESSON27_EGL_HEADERS
            ? "the OpenGL and EGL headers were not found at build time: apt-get install libgl-dev "
              "libopengl-dev libegl-dev"
        : !LESSON27_GL_HEADERS
            ? "the OpenGL headers were not found at build time: apt-get install libgl-dev libopengl-dev"
            : "the EGL headers were not found at build time: apt-get install libegl-dev";
    std::printf("Result = SKIP (%s)\n", missing);
    return course::kExitNotApplicable;
}

#if LESSON27_HAVE_GL
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <cudaGL.h>  // the CUDA-GL types; it includes GL/gl.h, which includes GL/glext.h (PFNGL...PROC)
#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "../common/egl_device.h"

namespace lesson27 {

// Looks `name` up through eglGetProcAddress; the first name it does not know goes into `missing`.
template <typename Function>
void resolve(PFNEGLGETPROCADDRESSPROC getProcAddress, const char* name, Function& function, std::string& missing) {
    function = reinterpret_cast<Function>(getProcAddress(name));
    if (function == nullptr && missing.empty()) missing = name;
}

// Every EGL function gl_interop calls: the display's (common/egl_device.h) and the context's.
struct Egl {
    void* library = nullptr;  // dlopen("libEGL.so.1")
    course::EglCalls core;    // what common/egl_device.h calls
    PFNEGLBINDAPIPROC bindApi = nullptr;
    PFNEGLCHOOSECONFIGPROC chooseConfig = nullptr;
    PFNEGLCREATECONTEXTPROC createContext = nullptr;
    PFNEGLCREATEPBUFFERSURFACEPROC createPbufferSurface = nullptr;
    PFNEGLMAKECURRENTPROC makeCurrent = nullptr;
    PFNEGLGETCURRENTCONTEXTPROC getCurrentContext = nullptr;
    PFNEGLDESTROYSURFACEPROC destroySurface = nullptr;
    PFNEGLDESTROYCONTEXTPROC destroyContext = nullptr;
};

// Step 1: opens libEGL.so.1 and resolves every EGL function. Returns why it could not (worded for
// "Result = SKIP (...)", the library closed again), or an empty string.
inline std::string loadEgl(Egl& egl) {
    egl.library = dlopen("libEGL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (egl.library == nullptr) {
        const char* why = dlerror();
        return std::string("libEGL.so.1 could not be opened (") + (why != nullptr ? why : "no reason given") +
               "): install glvnd's libEGL (Debian/Ubuntu: libegl1) and the NVIDIA driver's EGL vendor library, "
               "libEGL_nvidia.so.0";
    }
    std::string missing;
    const auto getProcAddress = reinterpret_cast<PFNEGLGETPROCADDRESSPROC>(dlsym(egl.library, "eglGetProcAddress"));
    if (getProcAddress == nullptr) {
        missing = "eglGetProcAddress";
    } else {
        egl.core.getProcAddress = getProcAddress;
        resolve(getProcAddress, "eglGetError", egl.core.getError, missing);
        resolve(getProcAddress, "eglQueryString", egl.core.queryString, missing);
        resolve(getProcAddress, "eglInitialize", egl.core.initialize, missing);
        resolve(getProcAddress, "eglTerminate", egl.core.terminate, missing);
        resolve(getProcAddress, "eglReleaseThread", egl.core.releaseThread, missing);
        resolve(getProcAddress, "eglBindAPI", egl.bindApi, missing);
        resolve(getProcAddress, "eglChooseConfig", egl.chooseConfig, missing);
        resolve(getProcAddress, "eglCreateContext", egl.createContext, missing);
        resolve(getProcAddress, "eglCreatePbufferSurface", egl.createPbufferSurface, missing);
        resolve(getProcAddress, "eglMakeCurrent", egl.makeCurrent, missing);
        resolve(getProcAddress, "eglGetCurrentContext", egl.getCurrentContext, missing);
        resolve(getProcAddress, "eglDestroySurface", egl.destroySurface, missing);
        resolve(getProcAddress, "eglDestroyContext", egl.destroyContext, missing);
    }
    if (!missing.empty()) {
        dlclose(egl.library);
        egl.library = nullptr;
        return "libEGL.so.1 gives no " + missing + " (an EGL older than 1.5, or not glvnd's libEGL): install libegl1";
    }
    const char* client = egl.core.queryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    if (client == nullptr) egl.core.getError();  // NULL: no client extensions; clear the error it set
    std::printf("libEGL.so.1: opened; eglGetProcAddress (from dlsym) gave the 13 other EGL functions\n");
    std::printf("client extension EGL_KHR_client_get_all_proc_addresses: %s\n",
                course::eglHasExtension(client, "EGL_KHR_client_get_all_proc_addresses") ? "yes" : "no");
    return "";
}

// The GL context and its surface: none where the display offers EGL_KHR_surfaceless_context
// (glReadPixels reads a framebuffer object here, never a surface), else a 1x1 pbuffer.
struct GlContext {
    EGLSurface surface = EGL_NO_SURFACE;
    EGLContext context = EGL_NO_CONTEXT;
};

// Step 3: a desktop OpenGL 3.3 core-profile context on the display (buffer objects and
// glGetBufferSubData are core since 1.5, framebuffer objects since 3.0). Returns why there is none
// (for "Result = SKIP (...)", nothing left behind), or an empty string.
inline std::string createGlContext(const Egl& egl, const course::EglDeviceDisplay& display, GlContext& glContext) {
    const char* apis = egl.core.queryString(display.display, EGL_CLIENT_APIS);
    std::printf("EGL client APIs of the display: %s\n", apis != nullptr ? apis : "(none)");
    if (!course::eglHasExtension(apis, "OpenGL")) return "the EGL display of this GPU offers no desktop OpenGL";
    // A context version and profile are attributes of EGL 1.5, or of EGL_KHR_create_context before it.
    if (display.major * 10 + display.minor < 15 &&
        !course::eglHasExtension(display.extensions, "EGL_KHR_create_context"))
        return "the EGL display is older than 1.5 and lacks EGL_KHR_create_context: no way to ask for OpenGL 3.3";
    // The client API is per thread: this thread's next context is desktop OpenGL, not OpenGL ES.
    if (!egl.bindApi(EGL_OPENGL_API)) {
        course::reportEglError(egl.core, "eglBindAPI(EGL_OPENGL_API)");
        return "eglBindAPI(EGL_OPENGL_API) failed: this EGL offers no desktop OpenGL";
    }
    // Pbuffers (the device platform has no windows) and desktop OpenGL; nothing is drawn, so any colour sizes.
    const EGLint configAttributes[] = {EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT,
                                       EGL_NONE};
    EGLConfig config = nullptr;
    EGLint configs = 0;
    if (!egl.chooseConfig(display.display, configAttributes, &config, 1, &configs))
        course::reportEglError(egl.core, "eglChooseConfig(display, configAttributes, &config, 1, &configs)");
    if (configs == 0) return "the EGL display has no config with EGL_OPENGL_BIT and EGL_PBUFFER_BIT";
    // 3.3 or newer (a driver may give a newer version compatible with it), core profile.
    const EGLint profile = EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT;
    const EGLint contextAttributes[] = {
        EGL_CONTEXT_MAJOR_VERSION, 3, EGL_CONTEXT_MINOR_VERSION, 3, EGL_CONTEXT_OPENGL_PROFILE_MASK, profile, EGL_NONE};
    glContext.context = egl.createContext(display.display, config, EGL_NO_CONTEXT, contextAttributes);
    if (glContext.context == EGL_NO_CONTEXT) {
        course::reportEglError(egl.core, "eglCreateContext(display, config, EGL_NO_CONTEXT, contextAttributes)");
        return "eglCreateContext gave no OpenGL 3.3 core context on this GPU's display";
    }
    const bool surfaceless = course::eglHasExtension(display.extensions, "EGL_KHR_surfaceless_context");
    if (!surfaceless) {
        const EGLint pbufferAttributes[] = {EGL_WIDTH, 1, EGL_HEIGHT, 1, EGL_NONE};
        glContext.surface = egl.createPbufferSurface(display.display, config, pbufferAttributes);
        if (glContext.surface == EGL_NO_SURFACE) {
            course::reportEglError(egl.core, "eglCreatePbufferSurface(display, config, pbufferAttributes)");
            if (!egl.destroyContext(display.display, glContext.context))
                course::reportEglError(egl.core, "eglDestroyContext(display, context)");
            glContext.context = EGL_NO_CONTEXT;
            return "the display lacks EGL_KHR_surfaceless_context and gave no 1x1 pbuffer";
        }
    }
    std::printf("OpenGL context: 3.3 core profile asked for, surface: %s\n",
                surfaceless ? "none (EGL_KHR_surfaceless_context)" : "a 1x1 pbuffer");
    return "";
}

// The surface, then the context: the reverse of createGlContext (releaseEgl first lets the context go from the thread).
inline void destroyGlContext(const Egl& egl, EGLDisplay display, GlContext& glContext) {
    if (glContext.surface != EGL_NO_SURFACE && !egl.destroySurface(display, glContext.surface))
        course::reportEglError(egl.core, "eglDestroySurface(display, surface)");
    if (glContext.context != EGL_NO_CONTEXT && !egl.destroyContext(display, glContext.context))
        course::reportEglError(egl.core, "eglDestroyContext(display, context)");
    glContext = GlContext{};
}

inline const char* glErrorName(GLenum error) {
    switch (error) {
        case GL_INVALID_ENUM: return "GL_INVALID_ENUM";
        case GL_INVALID_VALUE: return "GL_INVALID_VALUE";
        case GL_INVALID_OPERATION: return "GL_INVALID_OPERATION";
        case GL_INVALID_FRAMEBUFFER_OPERATION: return "GL_INVALID_FRAMEBUFFER_OPERATION";
        case GL_OUT_OF_MEMORY: return "GL_OUT_OF_MEMORY";
        default: return "(another GL error)";
    }
}

// The GL functions gl_interop calls, from eglGetProcAddress. Named as GL names them without the
// "gl", so that GL_CHECK(gl, GenBuffers(1, &buffer)) prints "glGenBuffers(1, &buffer)". GL/glext.h
// has a PFNGL...PROC type for the functions of GL 1.2 and later (GL 1.5's buffer functions, such as
// PFNGLGENBUFFERSPROC, at GL/glext.h:448-542 here) but none for GL 1.0 and 1.1's, which GL/gl.h only
// declares (glGetError, glTexImage2D, glReadPixels, ...): their type is taken from that declaration.
struct Gl {
    decltype(&glGetError) GetError = nullptr;
    decltype(&glGetString) GetString = nullptr;
    decltype(&glGetIntegerv) GetIntegerv = nullptr;
    decltype(&glPixelStorei) PixelStorei = nullptr;
    PFNGLGENBUFFERSPROC GenBuffers = nullptr;
    PFNGLBINDBUFFERPROC BindBuffer = nullptr;
    PFNGLBUFFERDATAPROC BufferData = nullptr;
    PFNGLGETBUFFERPARAMETERIVPROC GetBufferParameteriv = nullptr;
    PFNGLGETBUFFERSUBDATAPROC GetBufferSubData = nullptr;
    PFNGLDELETEBUFFERSPROC DeleteBuffers = nullptr;
    decltype(&glGenTextures) GenTextures = nullptr;
    decltype(&glBindTexture) BindTexture = nullptr;
    decltype(&glTexParameteri) TexParameteri = nullptr;
    decltype(&glTexImage2D) TexImage2D = nullptr;
    decltype(&glReadPixels) ReadPixels = nullptr;
    decltype(&glDeleteTextures) DeleteTextures = nullptr;
    PFNGLGENFRAMEBUFFERSPROC GenFramebuffers = nullptr;
    PFNGLBINDFRAMEBUFFERPROC BindFramebuffer = nullptr;
    PFNGLFRAMEBUFFERTEXTURE2DPROC FramebufferTexture2D = nullptr;
    PFNGLCHECKFRAMEBUFFERSTATUSPROC CheckFramebufferStatus = nullptr;
    PFNGLDELETEFRAMEBUFFERSPROC DeleteFramebuffers = nullptr;
    int errors = 0;  // GL errors seen after the calls made through GL_CHECK

    // The OpenGL specification's error model (glGetError): a failed call records an error in a flag
    // and says nothing until glGetError is asked, which returns and clears one recorded error per
    // call (an implementation may keep several flags): so they are read until GL_NO_ERROR, 8 at most.
    void readErrors(const char* call, const char* file, int line) {
        for (int i = 0; i < 8; ++i) {
            const GLenum error = GetError();
            if (error == GL_NO_ERROR) return;
            ++errors;
            std::fflush(stdout);
            std::fprintf(stderr, "OpenGL call failed: %s\n  error: %s (0x%04x)\n  at:    %s:%d\n", call,
                         glErrorName(error), static_cast<unsigned>(error), file, line);
        }
    }
    template <typename Call>
    auto checked(const char* call, const char* file, int line, Call run) {
        if constexpr (std::is_void_v<decltype(run())>) {
            run();
            readErrors(call, file, line);
        } else {
            const auto result = run();
            readErrors(call, file, line);
            return result;
        }
    }
};

// Step 3: every GL function, once a context is current. Returns the first one missing, or "".
inline std::string loadGl(const Egl& egl, Gl& gl) {
    const PFNEGLGETPROCADDRESSPROC get = egl.core.getProcAddress;
    std::string missing;
    resolve(get, "glGetError", gl.GetError, missing);
    resolve(get, "glGetString", gl.GetString, missing);
    resolve(get, "glGetIntegerv", gl.GetIntegerv, missing);
    resolve(get, "glPixelStorei", gl.PixelStorei, missing);
    resolve(get, "glGenBuffers", gl.GenBuffers, missing);
    resolve(get, "glBindBuffer", gl.BindBuffer, missing);
    resolve(get, "glBufferData", gl.BufferData, missing);
    resolve(get, "glGetBufferParameteriv", gl.GetBufferParameteriv, missing);
    resolve(get, "glGetBufferSubData", gl.GetBufferSubData, missing);
    resolve(get, "glDeleteBuffers", gl.DeleteBuffers, missing);
    resolve(get, "glGenTextures", gl.GenTextures, missing);
    resolve(get, "glBindTexture", gl.BindTexture, missing);
    resolve(get, "glTexParameteri", gl.TexParameteri, missing);
    resolve(get, "glTexImage2D", gl.TexImage2D, missing);
    resolve(get, "glReadPixels", gl.ReadPixels, missing);
    resolve(get, "glDeleteTextures", gl.DeleteTextures, missing);
    resolve(get, "glGenFramebuffers", gl.GenFramebuffers, missing);
    resolve(get, "glBindFramebuffer", gl.BindFramebuffer, missing);
    resolve(get, "glFramebufferTexture2D", gl.FramebufferTexture2D, missing);
    resolve(get, "glCheckFramebufferStatus", gl.CheckFramebufferStatus, missing);
    resolve(get, "glDeleteFramebuffers", gl.DeleteFramebuffers, missing);
    return missing;
}

}  // namespace lesson27

// One GL call through the table, then every error it left (Gl::readErrors names the call):
// GL_CHECK(gl, BindBuffer(GL_ARRAY_BUFFER, buffer)). Its value is the call's.
#define GL_CHECK(gl, call) (gl).checked("gl" #call, __FILE__, __LINE__, [&] { return (gl).call; })
#endif
