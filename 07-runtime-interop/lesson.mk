# Lesson 07 calls cuBLAS on driver-allocated memory. (The runtime comes in with
# scale_kernel.cu: a *.cu file at the lesson's top links cudart.)
07-runtime-interop_LDLIBS := -lcublas
