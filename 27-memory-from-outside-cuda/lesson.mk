# Lesson 27: four programs, run in this order by make run-27.
#   vulkan_buffer           a Vulkan buffer and timeline semaphore imported into CUDA
#   vulkan_image_and_graph  a Vulkan image as a CUDA array; the semaphores as graph nodes
#   dma_buf                 device memory exported as a dma-buf and imported back
#   gl_interop              an OpenGL buffer and texture (headless, through EGL) mapped into CUDA
27-memory-from-outside-cuda_PROGRAMS := vulkan_buffer vulkan_image_and_graph dma_buf gl_interop
# The Vulkan side both Vulkan programs share: vulkan_device.cpp (loader, instance, device) and
# vulkan_objects.cpp (exportable memory and semaphores, submissions); vulkan_image.cpp is the image's.
27-memory-from-outside-cuda_vulkan_buffer_SOURCES := vulkan_device.cpp vulkan_objects.cpp
27-memory-from-outside-cuda_vulkan_image_and_graph_SOURCES := vulkan_device.cpp vulkan_objects.cpp vulkan_image.cpp
# Vulkan, OpenGL and EGL are optional. Their headers are needed to build: common/tools/setup.sh
# writes -DCOURSE_NO_VULKAN / -DCOURSE_NO_GL / -DCOURSE_NO_EGL when they are missing, and the
# programs that need them then print Result = SKIP with what to install, and exit 77.
# Their libraries are opened at run time (dlopen), not linked, so that a machine with the headers
# but without the loader (libvulkan.so.1, libEGL.so.1) also gets that SKIP instead of a program
# that cannot start. -ldl: dlopen lives in libdl before glibc 2.34.
# Read when the rule runs (=, not :=), after the set-up step has written them.
27-memory-from-outside-cuda_SETUP := egl gl vulkan
27-memory-from-outside-cuda_CXXFLAGS = $(file <$(BUILD)/setup/vulkan.cflags) $(file <$(BUILD)/setup/gl.cflags) \
                                       $(file <$(BUILD)/setup/egl.cflags)
27-memory-from-outside-cuda_LDLIBS := -ldl
