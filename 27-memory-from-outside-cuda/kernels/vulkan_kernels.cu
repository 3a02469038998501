// Device code of lesson 27's Vulkan programs. The Makefile builds it to build/27-memory-from-
// outside-cuda/kernels/vulkan_kernels.{ptx,cubin,fatbin}; the programs load the fatbin.
// extern "C" keeps the names unmangled for cuModuleGetFunction.

// vulkan_buffer: reads what Vulkan wrote into the shared buffer, keeps a copy of it in `seen`
// (CUDA's own memory, for the host to check what CUDA read), and writes 3 * value + 7 back into
// the shared buffer for Vulkan to read. One element per thread; unsigned arithmetic wraps.
extern "C" __global__ void transform(unsigned int* shared, unsigned int* seen, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned int value = shared[i];
    seen[i] = value;
    shared[i] = 3u * value + 7u;
}

// vulkan_image_and_graph: the graph's kernel node. Each launch of the graph adds 1 to every
// element, so after N launches every element holds N.
extern "C" __global__ void countLaunch(unsigned int* counter, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) counter[i] += 1u;
}
