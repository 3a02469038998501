# Lesson 07: four programs. Each links the CUDA runtime; the two that launch a <<<>>>
# kernel add scale_kernel.cu, and shared_stream calls cuBLAS.
07-runtime-interop_PROGRAMS := current_context shared_stream device_reset device_identity
07-runtime-interop_CUDART := yes
07-runtime-interop_shared_stream_SOURCES := scale_kernel.cu
07-runtime-interop_device_reset_SOURCES := scale_kernel.cu
07-runtime-interop_LDLIBS := -lcublas
