// Device code of lesson 22's libraries and contexts programs. The Makefile builds it to
// build/22-libraries-and-occupancy/kernels/library_kernels.{ptx,cubin,fatbin}; the programs
// load the fatbin as a library (cuLibraryLoadFromFile / cuLibraryLoadData).
// extern "C" gives them C linkage: cuKernelGetName "may return a mangled name if the function is
// not declared as having C linkage" (cuda.h:8482-8483); these are declared so.
// The library holds four kernels: addOffset, mixedParams, reverseTile, dynamicSum.
#include "../kernel_types.h"

// A __device__ global. A library is loaded into each context that uses it, and each context
// gets its own copy of the global: cuLibraryGetGlobal returns the copy of the current context.
__device__ int gOffset = 7;

// A __managed__ variable: managed memory, reachable from the host through the pointer
// cuLibraryGetManaged returns. addOffset counts its launches in it.
__managed__ unsigned int gLaunches = 0;

// out[i] = i + gOffset; the first thread also counts the launch in gLaunches.
extern "C" __global__ void addOffset(int* out, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = i + gOffset;
    if (i == 0) atomicAdd(&gLaunches, 1u);
}

// Five parameters of different sizes and alignments: the libraries program reads where each
// one sits (cuKernelGetParamInfo) and compares with the C++ layout of the same types.
extern "C" __global__ void mixedParams(char c, double d, short s, lesson22::FloatAndDouble p, double* out) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[0] = c;
        out[1] = d;
        out[2] = s;
        out[3] = p.f;
        out[4] = p.d;
    }
}

// A declared block limit and a static shared array: cuKernelGetAttribute reports both
// (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES).
extern "C" __global__ void __launch_bounds__(lesson22::kBoundedThreads) reverseTile(float* out) {
    __shared__ float tile[lesson22::kTileFloats];
    tile[threadIdx.x] = static_cast<float>(threadIdx.x);
    __syncthreads();
    out[threadIdx.x] = tile[lesson22::kTileFloats - 1 - threadIdx.x];
}

// Dynamic shared memory: n ints, each thread writes some and adds up others; *out gets
// 0 + 1 + ... + (n - 1). The launch must give n * sizeof(int) bytes of dynamic shared memory.
extern "C" __global__ void dynamicSum(unsigned int* out, int n) {
    extern __shared__ int buffer[];
    for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) buffer[i] = i;
    __syncthreads();
    unsigned int sum = 0;
    for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x))
        sum += static_cast<unsigned int>(buffer[n - 1 - i]);
    atomicAdd(out, sum);
}
