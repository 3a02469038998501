// Lesson 18's kernel, compiled two ways from this one file: by nvcc when the course is built
// (kernels/saxpy.ptx, .cubin, .fatbin, the fatbin is what compile_cache --bench loads) and by
// NVRTC at run time (compile_and_load, compile_cache read this file next to the executable).
// So it includes nothing: the programs give NVRTC no include path, and nvcc needs none.
// extern "C": the symbol is plain "saxpy" whichever compiler made it, not a C++ mangled name.
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
