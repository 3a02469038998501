// Device code of lesson 22's modules program. The Makefile builds it to
// build/22-libraries-and-occupancy/kernels/module_kernels.{ptx,cubin,fatbin}; the program reads
// the fatbin into memory and loads it with cuModuleLoadFatBinary.
// Three kernels with C linkage and one without: cuFuncGetName "may return a mangled name if the
// function is not declared as having C linkage" (cuda.h:17337-17338). The modules program shows
// which name it returns for the C++ one, and under which name cuModuleGetFunction finds it.

// x[i] = i.
extern "C" __global__ void fillIndex(float* x, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) x[i] = static_cast<float>(i);
}

// x[i] += 1.
extern "C" __global__ void addOne(float* x, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) x[i] += 1.0f;
}

// Does nothing; a module may hold kernels nobody launches.
extern "C" __global__ void noop() {}

// C++ linkage: the Itanium C++ ABI (what nvcc and g++ use on Linux) names scale(float*, float,
// int) "_Z5scalePffi": _Z, the name's length and the name, then one code per parameter type
// (Pf = pointer to float, f = float, i = int).
__global__ void scale(float* x, float factor, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) x[i] *= factor;
}
