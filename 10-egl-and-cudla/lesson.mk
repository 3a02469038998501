# Lesson 10: three programs, run in this order by make run-10.
#   egl_stream    EGLStream, producer and consumer on two threads (stream_producer.cpp, stream_consumer.cpp)
#   egl_sync      EGLSync with a gated producer; EGLImage explained
#   cudla_hybrid  cuDLA hybrid mode (Jetson only; built as a SKIP elsewhere)
10-egl-and-cudla_PROGRAMS := egl_stream egl_sync cudla_hybrid
10-egl-and-cudla_egl_stream_SOURCES := stream_producer.cpp stream_consumer.cpp egl_display.cpp
10-egl-and-cudla_egl_sync_SOURCES := egl_display.cpp
# The EGL programs link glvnd's libEGL.so.1 (Debian/Ubuntu: libegl-dev to build, libegl1 to
# run; the EGL device platform itself comes from NVIDIA's driver, libEGL_nvidia.so.0).
# The CUDA-EGL functions are not linked: the programs resolve them with cuGetProcAddress.
# EGL is optional: common/tools/setup.sh egl writes -lEGL, or -DCOURSE_NO_EGL when the
# headers or libEGL.so are missing (the EGL programs then print Result = SKIP and exit 77).
# Read when the rule runs (=, not :=), after the set-up step has written them.
10-egl-and-cudla_SETUP := egl
10-egl-and-cudla_LDLIBS = $(file <$(BUILD)/setup/egl.libs)
10-egl-and-cudla_CXXFLAGS = $(file <$(BUILD)/setup/egl.cflags)
# cuDLA exists only in aarch64 Jetson toolkits: link it where its header is (cudla_hybrid.cpp
# compiles its cuDLA part under the same condition, __has_include(<cudla.h>)).
ifneq ($(wildcard $(CUDA_PATH)/include/cudla.h),)
10-egl-and-cudla_LDLIBS += -lcudla
endif
