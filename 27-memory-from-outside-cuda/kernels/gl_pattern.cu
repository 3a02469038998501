// Device code of lesson 27's gl_interop. The Makefile builds it to
// build/27-memory-from-outside-cuda/kernels/gl_pattern.{ptx,cubin,fatbin}; the program loads the
// fatbin. extern "C" keeps the name unmangled for cuModuleGetFunction.

// Writes element i of a mapped OpenGL buffer: i * 3 + 7, a value the buffer did not hold before
// (GL filled it with 0xFFFFFFFF), so the host can tell every element CUDA wrote. `count` comes
// from the size cuGraphicsResourceGetMappedPointer returned, so no thread writes past the mapping.
extern "C" __global__ void writePattern(unsigned int* values, unsigned int count) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) values[i] = i * 3u + 7u;
}
