// Lesson 27, program 4 — OpenGL memory in CUDA: a GL buffer and a GL texture, headless through EGL.
//
// Memory that OpenGL owns can be lent to CUDA without a copy. cuGraphicsGLRegisterBuffer and
// cuGraphicsGLRegisterImage register a GL object once; cuGraphicsMapResources lends it to CUDA,
// as a device pointer (a buffer) or a CUDA array (a texture), and cuGraphicsUnmapResources gives
// it back to GL. The GL context needs no window: EGL's device platform opens a display on the GPU
// itself, the one whose EGL_NV_device_cuda ordinal is the chosen CUDA device. CUDA writes both
// objects (a kernel the buffer, a 2D copy the texture) and GL reads them back (glGetBufferSubData,
// glReadPixels) for the host to check every element and every pixel.
//
//   gl_interop [--device N]
#include "gl_context.h"

#if LESSON27_HAVE_GL
#include <cuda.h>
#include <cudaGL.h>
#include <cudaGLTypedefs.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "../common/driver_function.h"

namespace {

constexpr unsigned int kElements = 1u << 18;  // the GL buffer: 262144 unsigned ints, 1 MiB
constexpr GLsizeiptr kBufferBytes = kElements * sizeof(unsigned int);
constexpr unsigned int kWidth = 96;  // the GL texture, 96 x 64 RGBA8: not square, so swapped sides show
constexpr unsigned int kHeight = 64;

// The CUDA-OpenGL functions of cudaGL.h, resolved with cuGetProcAddress: the stub libcuda.so
// the course links against lacks them (common/driver_function.h).
struct CudaGl {
    PFN_cuGraphicsGLRegisterBuffer_v3000 registerBuffer = nullptr;  // cuGraphicsGLRegisterBuffer
    PFN_cuGraphicsGLRegisterImage_v3000 registerImage = nullptr;    // cuGraphicsGLRegisterImage
    PFN_cuGLGetDevices_v6050 getDevices = nullptr;                  // cuGLGetDevices
};

// Pixel (x, y) as the host gives it to CUDA: red x, green y, blue a mix of both, alpha 0xC3.
bool isTexel(const unsigned char* pixel, unsigned int x, unsigned int y) {
    return pixel[0] == x && pixel[1] == y && pixel[2] == ((x * 7 + y * 3) & 0xFF) && pixel[3] == 0xC3;
}

// Everything EGL that exists, newest first: the context let go from this thread, the context
// and its surface, the display (eglTerminate, eglReleaseThread), then the library. The EGL
// specification destroys a context that is current only once it is current to no thread: let go
// first, eglDestroyContext destroys it then and there. True: no context was current on this
// thread when the GL context was destroyed.
bool releaseEgl(lesson27::Egl& egl, course::EglDeviceDisplay& display, lesson27::GlContext& glContext) {
    if (glContext.context != EGL_NO_CONTEXT && egl.getCurrentContext() == glContext.context &&
        !egl.makeCurrent(display.display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT))
        course::reportEglError(egl.core, "eglMakeCurrent(display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT)");
    const bool letGo = egl.getCurrentContext() == EGL_NO_CONTEXT;
    lesson27::destroyGlContext(egl, display.display, glContext);
    course::closeEglDeviceDisplay(egl.core, display);
    dlclose(egl.library);
    egl.library = nullptr;
    return letGo;
}

// Step 5: a GL buffer, written by a CUDA kernel through the mapped pointer, read back by GL.
void bufferRoundTrip(lesson27::Gl& gl, const CudaGl& cudaGl, CUfunction writePattern, CUstream stream,
                     course::Verdict& verdict) {
    const std::vector<unsigned int> initial(kElements, 0xFFFFFFFFu);  // what GL holds before CUDA writes
    GLuint buffer = 0;
    GL_CHECK(gl, GenBuffers(1, &buffer));
    GL_CHECK(gl, BindBuffer(GL_ARRAY_BUFFER, buffer));
    GL_CHECK(gl, BufferData(GL_ARRAY_BUFFER, kBufferBytes, initial.data(), GL_DYNAMIC_COPY));
    GLint glBytes = 0;
    GL_CHECK(gl, GetBufferParameteriv(GL_ARRAY_BUFFER, GL_BUFFER_SIZE, &glBytes));
    GL_CHECK(gl, BindBuffer(GL_ARRAY_BUFFER, 0));

    // Registered once, in the current CUDA context, the only one that maps it: NVIDIA's CUDA Programming
    // Guide (section 4.21) has each CUDA context that uses a resource register it; the call's comment
    // lists CUDA_ERROR_INVALID_CONTEXT among its codes (cudaGL.h:141) and says nothing more of contexts.
    CUgraphicsResource resource = nullptr;
    CHECK_DRIVER(cudaGl.registerBuffer(&resource, buffer, CU_GRAPHICS_REGISTER_FLAGS_NONE));
    // WRITE_DISCARD promises that CUDA "will not read from this resource and will write over the
    // entire contents" (cuda.h:24166); it takes effect at the next map (cuda.h:24158). The kernel
    // below writes every element.
    CHECK_DRIVER(cuGraphicsResourceSetMapFlags(resource, CU_GRAPHICS_MAP_RESOURCE_FLAGS_WRITE_DISCARD));
    // "Any graphics calls issued before cuGraphicsMapResources() will complete before any
    // subsequent CUDA work issued in stream begins" (cuda.h:24204): no glFinish needed.
    CHECK_DRIVER(cuGraphicsMapResources(1, &resource, stream));
    CUdeviceptr pointer = 0;
    size_t mappedBytes = 0;
    CHECK_DRIVER(cuGraphicsResourceGetMappedPointer(&pointer, &mappedBytes, resource));
    std::printf("mapped buffer: %zu bytes (GL_BUFFER_SIZE %d, glBufferData asked for %lld)\n", mappedBytes,
                static_cast<int>(glBytes), static_cast<long long>(kBufferBytes));
    const bool covers = verdict.check("the mapped pointer covers the GL buffer, no more, no less",
                                      mappedBytes == static_cast<size_t>(kBufferBytes) && glBytes == kBufferBytes);
    unsigned int count = static_cast<unsigned int>(mappedBytes / sizeof(unsigned int));
    void* params[] = {&pointer, &count};
    // Only on a mapping that checks out: the kernel writes `count` elements from `pointer`.
    if (covers)
        CHECK_DRIVER(cuLaunchKernel(writePattern, (count + 255) / 256, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
    // "Any CUDA work issued in stream before cuGraphicsUnmapResources() will complete before any
    // subsequently issued graphics work begins" (cuda.h:24242): GL may read right after.
    CHECK_DRIVER(cuGraphicsUnmapResources(1, &resource, stream));

    std::vector<unsigned int> readBack(kElements, 0);
    GL_CHECK(gl, BindBuffer(GL_ARRAY_BUFFER, buffer));
    GL_CHECK(gl, GetBufferSubData(GL_ARRAY_BUFFER, 0, kBufferBytes, readBack.data()));
    GL_CHECK(gl, BindBuffer(GL_ARRAY_BUFFER, 0));
    unsigned int written = 0;
    for (unsigned int i = 0; i < kElements; ++i) written += readBack[i] == i * 3u + 7u ? 1 : 0;
    std::printf("GL buffer read back with glGetBufferSubData: %u of %u elements as the kernel wrote them\n", written,
                kElements);
    verdict.check("GL reads back every element the kernel wrote", written == kElements);

    CHECK_DRIVER(cuGraphicsUnregisterResource(resource));  // before GL deletes the buffer
    GL_CHECK(gl, DeleteBuffers(1, &buffer));
}

// Step 6: a GL texture, written by a 2D copy into the mapped CUDA array, read back by GL.
void textureRoundTrip(lesson27::Gl& gl, const CudaGl& cudaGl, CUstream stream, course::Verdict& verdict) {
    // GL_RGBA8 is one of the formats cudaGL.h lists for cuGraphicsGLRegisterImage. One mip level,
    // so the filters must not ask for more; every byte 0x11 until CUDA writes.
    const std::vector<unsigned char> initial(kWidth * kHeight * 4, 0x11);
    GLuint texture = 0;
    GL_CHECK(gl, GenTextures(1, &texture));
    GL_CHECK(gl, BindTexture(GL_TEXTURE_2D, texture));
    GL_CHECK(gl, TexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST));
    GL_CHECK(gl, TexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST));
    GL_CHECK(gl, TexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, kWidth, kHeight, 0, GL_RGBA, GL_UNSIGNED_BYTE, initial.data()));
    GL_CHECK(gl, BindTexture(GL_TEXTURE_2D, 0));

    CUgraphicsResource resource = nullptr;
    // The same promise as WRITE_DISCARD above, given once at registration (cudaGL.h lists it there).
    CHECK_DRIVER(cudaGl.registerImage(&resource, texture, GL_TEXTURE_2D, CU_GRAPHICS_REGISTER_FLAGS_WRITE_DISCARD));
    CHECK_DRIVER(cuGraphicsMapResources(1, &resource, stream));
    CUarray array = nullptr;  // "may change every time that resource is mapped" (cuda.h:24053)
    CHECK_DRIVER(cuGraphicsSubResourceGetMappedArray(&array, resource, 0, 0));  // array index 0, mip level 0
    CUDA_ARRAY_DESCRIPTOR descriptor{};
    CHECK_DRIVER(cuArrayGetDescriptor(&descriptor, array));
    std::printf("CUDA array of the texture: %zu x %zu, %u channels, format %s\n", descriptor.Width, descriptor.Height,
                descriptor.NumChannels,
                descriptor.Format == CU_AD_FORMAT_UNSIGNED_INT8 ? "CU_AD_FORMAT_UNSIGNED_INT8" : "another");
    std::vector<unsigned char> pixels(kWidth * kHeight * 4);
    for (unsigned int y = 0; y < kHeight; ++y)
        for (unsigned int x = 0; x < kWidth; ++x) {
            unsigned char* pixel = &pixels[(y * kWidth + x) * 4];
            pixel[0] = static_cast<unsigned char>(x);
            pixel[1] = static_cast<unsigned char>(y);
            pixel[2] = static_cast<unsigned char>((x * 7 + y * 3) & 0xFF);
            pixel[3] = 0xC3;
        }
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_HOST;
    copy.srcHost = pixels.data();
    copy.srcPitch = kWidth * 4;
    copy.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    copy.dstArray = array;
    copy.WidthInBytes = kWidth * 4;
    copy.Height = kHeight;
    CHECK_DRIVER(cuMemcpy2DAsync(&copy, stream));  // in the stream the map and the unmap are ordered in
    CHECK_DRIVER(cuGraphicsUnmapResources(1, &resource, stream));

    // glReadPixels reads a framebuffer, not a texture: the texture becomes one's colour attachment.
    GLuint framebuffer = 0;
    GL_CHECK(gl, GenFramebuffers(1, &framebuffer));
    GL_CHECK(gl, BindFramebuffer(GL_FRAMEBUFFER, framebuffer));
    GL_CHECK(gl, FramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, texture, 0));
    const GLenum status = GL_CHECK(gl, CheckFramebufferStatus(GL_FRAMEBUFFER));
    std::printf("framebuffer with the texture attached: %s\n",
                status == GL_FRAMEBUFFER_COMPLETE ? "GL_FRAMEBUFFER_COMPLETE" : "incomplete");
    // Each row glReadPixels writes starts at a multiple of GL_PACK_ALIGNMENT bytes; 96 RGBA8 pixels
    // are 384 bytes, a multiple of 4, so the rows lie back to back as in `pixels`.
    GL_CHECK(gl, PixelStorei(GL_PACK_ALIGNMENT, 4));
    std::vector<unsigned char> readBack(pixels.size(), 0);
    GL_CHECK(gl, ReadPixels(0, 0, kWidth, kHeight, GL_RGBA, GL_UNSIGNED_BYTE, readBack.data()));
    GL_CHECK(gl, BindFramebuffer(GL_FRAMEBUFFER, 0));
    unsigned int written = 0;
    for (unsigned int y = 0; y < kHeight; ++y)
        for (unsigned int x = 0; x < kWidth; ++x) written += isTexel(&readBack[(y * kWidth + x) * 4], x, y) ? 1 : 0;
    std::printf("texture read back with glReadPixels: %u of %u pixels as CUDA copied them\n", written,
                kWidth * kHeight);
    verdict.check("GL reads back every pixel CUDA copied into the texture",
                  status == GL_FRAMEBUFFER_COMPLETE && written == kWidth * kHeight);

    GL_CHECK(gl, DeleteFramebuffers(1, &framebuffer));
    CHECK_DRIVER(cuGraphicsUnregisterResource(resource));  // before GL deletes the texture
    GL_CHECK(gl, DeleteTextures(1, &texture));
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    // Step 1: EGL comes from libEGL.so.1, opened at run time (gl_context.h says why).
    course::printStep(1, "open libEGL.so.1, take the EGL functions from eglGetProcAddress");
    lesson27::Egl egl;
    const std::string noEgl = lesson27::loadEgl(egl);
    if (!noEgl.empty()) {
        std::printf("Result = SKIP (%s)\n", noEgl.c_str());
        return course::kExitNotApplicable;
    }
    course::EglDeviceDisplay display;
    lesson27::GlContext glContext;
    // Where this machine cannot give a GL context on this GPU: what exists is released, and why is said.
    const auto skip = [&](const std::string& reason) {
        releaseEgl(egl, display, glContext);
        std::printf("Result = SKIP (%s)\n", reason.c_str());
        return course::kExitNotApplicable;
    };

    // Step 2: the device; the driver's CUDA-GL functions; the EGL display on this GPU.
    course::printStep(2, "the CUDA device, its OpenGL interop functions, the EGL display on it");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", ordinal, name);
    CudaGl cudaGl;
    bool found = course::resolveDriverFunction("cuGraphicsGLRegisterBuffer", 3000, cudaGl.registerBuffer);
    found = course::resolveDriverFunction("cuGraphicsGLRegisterImage", 3000, cudaGl.registerImage) && found;
    found = course::resolveDriverFunction("cuGLGetDevices", 6050, cudaGl.getDevices) && found;
    if (!found) return skip("this driver does not export the CUDA-OpenGL interop functions");
    display = course::openEglDeviceDisplay(egl.core, device);
    if (!display.unavailable.empty()) return skip(display.unavailable);

    // Step 3: desktop OpenGL on that display (gl_context.h), current on this thread.
    course::printStep(3, "an OpenGL context on that display, current on this thread");
    const std::string noContext = lesson27::createGlContext(egl, display, glContext);
    if (!noContext.empty()) return skip(noContext);
    course::Verdict verdict;
    if (!egl.makeCurrent(display.display, glContext.surface, glContext.surface, glContext.context))
        course::reportEglError(egl.core, "eglMakeCurrent(display, surface, surface, context)");
    // OpenGL's rule: GL calls act on the context current on the calling thread, so without it there
    // is no buffer or texture to make. NVIDIA's CUDA Programming Guide (section 4.21.1.1) asks the
    // same of the CUDA-GL calls: "The OpenGL context whose resources are being shared has to be
    // current to the host thread making any OpenGL interoperability API calls." cudaGL.h says less:
    // it ties cuGLGetDevices to "the current OpenGL context" (cudaGL.h:249-253), and the comments of
    // cuGraphicsGLRegisterBuffer and cuGraphicsGLRegisterImage name no context (only the deprecated
    // cuGLRegisterBufferObject's does, cudaGL.h:366-368). The program follows the guide: this context
    // stays current from here until the last registration is gone (step 7 lets it go).
    if (!verdict.check("the OpenGL context is current on this thread", egl.getCurrentContext() == glContext.context)) {
        releaseEgl(egl, display, glContext);
        return verdict.finish();
    }
    lesson27::Gl gl;
    const std::string missing = lesson27::loadGl(egl, gl);
    if (!missing.empty()) return skip("eglGetProcAddress gives no " + missing);
    GLint major = 0, minor = 0;
    GL_CHECK(gl, GetIntegerv(GL_MAJOR_VERSION, &major));
    GL_CHECK(gl, GetIntegerv(GL_MINOR_VERSION, &minor));
    const auto text = [](const GLubyte* string) { return string ? reinterpret_cast<const char*>(string) : "?"; };
    std::printf("GL vendor: %s\n", text(GL_CHECK(gl, GetString(GL_VENDOR))));
    std::printf("GL renderer name: %s\n", text(GL_CHECK(gl, GetString(GL_RENDERER))));
    std::printf("GL version of the context: %d.%d\n", major, minor);

    // Step 4: CUDA on the same GPU. cuGLGetDevices names the CUDA devices of the current GL context.
    course::printStep(4, "a CUDA context on the GL context's GPU (cuGLGetDevices), the kernel, a stream");
    CUcontext context = nullptr;
    CHECK_DRIVER(course::ctxCreate(&context, 0, device));
    unsigned int glDeviceCount = 0;
    CUdevice glDevices[8] = {};
    const CUresult listed = REPORT_DRIVER(cudaGl.getDevices(&glDeviceCount, glDevices, 8, CU_GL_DEVICE_LIST_ALL));
    bool onChosen = false;
    std::string list;
    for (unsigned int i = 0; listed == CUDA_SUCCESS && i < glDeviceCount && i < 8; ++i) {
        onChosen = onChosen || glDevices[i] == device;
        list += (i > 0 ? ", device " : "device ") + std::to_string(glDevices[i]);
    }
    std::printf("CUDA devices of the GL context: %s\n",
                listed == CUDA_SUCCESS ? (std::to_string(glDeviceCount) + " (" + list + ")").c_str()
                                       : course::driverErrorName(listed));
    verdict.check("the GL context runs on the chosen CUDA device", listed == CUDA_SUCCESS && onChosen);
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("gl_pattern.fatbin").c_str()));
    CUfunction writePattern = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&writePattern, module, "writePattern"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    course::printStep(5, "a GL buffer: a kernel writes it through the mapped pointer, GL reads it back");
    bufferRoundTrip(gl, cudaGl, writePattern, stream, verdict);
    course::printStep(6, "a GL texture: a 2D copy writes it through the mapped array, GL reads it back");
    textureRoundTrip(gl, cudaGl, stream, verdict);

    // Step 7: newest first. The graphics resources went with their steps, before GL deleted the objects.
    course::printStep(7, "release in reverse order, and check");
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuCtxDestroy(context));
    std::printf("GL errors after the calls made through GL_CHECK: %d\n", gl.errors);
    verdict.check("no GL call raised an error", gl.errors == 0);
    const bool letGo = releaseEgl(egl, display, glContext);
    std::printf("released: stream, module, CUDA context, GL context, EGL display, libEGL.so.1\n");
    std::printf("a context current on this thread when the GL context was destroyed: %s\n", letGo ? "no" : "yes");
    verdict.check("the GL context was let go from this thread before it was destroyed", letGo);
    return verdict.finish();
}
#else
int main(int argc, char** argv) {
    return skipWithoutGl(argc, argv, "[--device N]");
}
#endif
