// Device code of lesson 06. The Makefile builds this one file three ways, next to the
// programs in build/06-module-and-launch/kernels/:
//   vector_ops.ptx     PTX for the oldest SM listed (compute_75): the driver's JIT compiles it
//   vector_ops.cubin   SASS for one SM (CUBIN_ARCH: the GPU present): loads on that SM family only
//   vector_ops.fatbin  SASS for every SM listed plus PTX of the newest: the driver picks the best
// extern "C" keeps the names unmangled, so the host asks for "vectorAdd", not "_Z9vectorAdd...".
#include "../launch_limits.h"
#include "../param_types.h"

// c = a + b for n floats, written to run at memory speed:
// - a grid-stride loop, so any grid covers any n and the host can launch just enough
//   blocks to fill the GPU once (cuOccupancyMaxPotentialBlockSize);
// - 16-byte loads and stores (float4): a quarter of the memory instructions. They need
//   16-byte-aligned pointers; cuMemAlloc returns at least 256-byte-aligned ones, and the
//   kernel falls back to floats for any other pointer;
// - __restrict__: the arrays do not overlap, so loads may be issued ahead of stores.
extern "C" __global__ void vectorAdd(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                     unsigned long long n) {
    const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
    const unsigned long long first = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    const unsigned long long addressBits = reinterpret_cast<unsigned long long>(a) |
                                           reinterpret_cast<unsigned long long>(b) |
                                           reinterpret_cast<unsigned long long>(c);
    unsigned long long done = 0;  // elements handled by the float4 loop
    if ((addressBits & 15) == 0) {
        const unsigned long long quads = n / 4;
        const float4* a4 = reinterpret_cast<const float4*>(a);
        const float4* b4 = reinterpret_cast<const float4*>(b);
        float4* c4 = reinterpret_cast<float4*>(c);
        for (unsigned long long i = first; i < quads; i += stride) {
            const float4 x = a4[i];
            const float4 y = b4[i];
            c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
        }
        done = quads * 4;
    }
    // The tail (n % 4 elements), or everything when a pointer is not 16-byte aligned.
    for (unsigned long long i = done + first; i < n; i += stride) c[i] = a[i] + b[i];
}

// y = a * x + y, one element per thread: the classic shape, (n + 255) / 256 blocks.
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// A module-scope variable: the host finds it by name with cuModuleGetGlobal and writes it
// with cuMemcpyHtoD. __constant__ memory is read-only for kernels and cached for the case
// where every thread reads the same address. 1.0f is its value in the module image.
__constant__ float gScale = 1.0f;

extern "C" __global__ void scaleByGlobal(const float* __restrict__ x, float* __restrict__ y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = gScale * x[i];
}

// Does nothing: its launch time is the cost of a launch.
extern "C" __global__ void emptyKernel() {}

// Declared for blocks of at most 128 threads (lesson06::kBoundedKernelThreads). ptxas records
// the bound in the module (.maxntid 128), and the driver reports it as the function's
// CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, below the device's own limit of 1024.
extern "C" __global__ void __launch_bounds__(lesson06::kBoundedKernelThreads) boundedKernel() {}

// Needs about 100 registers per thread: 48 doubles are carried from one round of the loop to
// the next, so all of them stay live (2 registers each). 1024 such threads would need more
// registers than an SM gives one block (64 Ki), so the driver's
// CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK for this function is set by registers, below 1024
// (512 in the README's captured H200 run; the compiler decides the register count).
extern "C" __global__ void registerHungry(float* out, int rounds) {
    constexpr int kState = 48;
    double state[kState];
#pragma unroll
    for (int i = 0; i < kState; ++i) state[i] = threadIdx.x + i;
    for (int round = 0; round < rounds; ++round) {
#pragma unroll
        for (int i = 0; i < kState; ++i) state[i] = state[i] * 0.5 + state[(i + 1) % kState];
    }
    double sum = 0.0;
#pragma unroll
    for (int i = 0; i < kState; ++i) sum += state[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(sum);
}

// Writes back every argument it received, so the host can check that each one arrived
// intact: a float, a float4 (16-byte aligned), the padded struct, an int and a pointer.
// Parameter layout: a at 0, v at 16, s at 32 (32 bytes), n at 64, out at 72; 80 bytes.
extern "C" __global__ void echoParams(float a, float4 v, FloatAndFloat4 s, int n, float* out) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    out[0] = a;
    out[1] = v.x;
    out[2] = v.y;
    out[3] = v.z;
    out[4] = v.w;
    out[5] = s.f;
    out[6] = s.f4.x;
    out[7] = s.f4.y;
    out[8] = s.f4.z;
    out[9] = s.f4.w;
    out[10] = static_cast<float>(n);
}
