// Device code of lesson 26. The Makefile builds it to build/26-managed-memory-and-pools/kernels/
// managed_kernels.{ptx,cubin,fatbin}; the programs load the fatbin (SASS for every listed SM plus
// PTX), so the driver picks the best code for the GPU it runs on.
// extern "C" keeps the names unmangled for cuModuleGetFunction. Every kernel walks its array with
// a grid-stride loop, so one launch shape covers any length, 1 GiB included.

// Word i of test data number `seed`. The host computes the same function on its own to judge
// what the GPU wrote (lesson26::patternWord in managed_helpers.h): neighbouring words differ,
// and so do two seeds.
__device__ __forceinline__ unsigned int patternWord(unsigned long long i, unsigned int seed) {
    return static_cast<unsigned int>(i * 2654435761ull) ^ (seed * 0x9E3779B9u);
}

// data[i] = data[i] * mul + add: reads what is there (the CPU's data, on managed memory) and
// writes it back changed.
extern "C" __global__ void scaleAdd(unsigned int* data, unsigned long long n, unsigned int mul, unsigned int add) {
    const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
    for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride)
        data[i] = data[i] * mul + add;
}

// data[i] = patternWord(i, seed): writes every word without reading any, the "first touch" of
// memory that nothing has touched before.
extern "C" __global__ void fillPattern(unsigned int* data, unsigned long long n, unsigned int seed) {
    const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
    for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride)
        data[i] = patternWord(i, seed);
}

// out[i] = 3 * in[i] + 1. Nothing here says where `in` lives: in pools_across_devices it is an
// allocation from a pool of another GPU, readable here because the pool's access was granted.
extern "C" __global__ void tripleAndIncrement(const unsigned int* __restrict__ in, unsigned int* __restrict__ out,
                                              unsigned long long n) {
    const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
    for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride)
        out[i] = 3u * in[i] + 1u;
}
