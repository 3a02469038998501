# Lesson 10 links glvnd's libEGL.so.1 (Debian/Ubuntu: libegl-dev to build, libegl1 to
# run; the EGL device platform itself comes from NVIDIA's driver, libEGL_nvidia.so.0).
# The CUDA-EGL functions are not linked: the program resolves them with cuGetProcAddress.
10-egl-and-cudla_LDLIBS := -lEGL
10-egl-and-cudla_SETUP := egl
# cuDLA exists only in aarch64 Tegra toolkits: link it where its header is (main.cpp
# compiles the cuDLA part under the same condition, __has_include(<cudla.h>)).
ifneq ($(wildcard $(CUDA_PATH)/include/cudla.h),)
10-egl-and-cudla_LDLIBS += -lcudla
endif
