// Device code of lesson 14. The Makefile builds it to build/14-multi-gpu/kernels/
// peer_read.{ptx,cubin,fatbin}; peer_access loads the fatbin (SASS for every listed SM plus
// PTX), so the driver picks the best code for the GPU it runs on.
// extern "C" keeps the name unmangled for cuModuleGetFunction.

// out[i] = 2 * in[i] + 1. Nothing here says where `in` lives: with unified addressing a
// pointer names one byte in one device's memory, and once the context this kernel runs in
// has peer access to that device, its loads go over the link (NVLink or PCIe) to it.
extern "C" __global__ void doubleAndIncrement(const unsigned int* __restrict__ in, unsigned int* __restrict__ out,
                                              unsigned int n) {
    const unsigned int stride = gridDim.x * blockDim.x;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = 2u * in[i] + 1u;
}
