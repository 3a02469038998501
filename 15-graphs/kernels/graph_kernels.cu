// Device code of lesson 15. The Makefile builds it to build/15-graphs/kernels/
// graph_kernels.{ptx,cubin,fatbin}; the programs load the fatbin (SASS for every listed
// SM plus PTX), so the driver picks the best code for the GPU it runs on.
// extern "C" keeps the names unmangled for cuModuleGetFunction.

// x = a * x + b, one element per thread. Kernel nodes and captured launches take the
// same four parameters, so the host code changes a and b to show parameter updates.
extern "C" __global__ void axpb(float* __restrict__ x, float a, float b, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i] + b;
}

// The smallest useful kernel: one thread adds 1 to a counter. A chain of N of them
// on one stream (or in one graph) leaves N in the counter only if each one ran after
// the one before it, and it costs almost nothing on the GPU, so timing a chain
// measures launch overhead.
extern "C" __global__ void increment(unsigned int* counter) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *counter += 1;
}
