// Device code of lesson 19's surfaces program. The Makefile builds it to
// build/19-arrays-textures-surfaces/kernels/surfaces.{ptx,cubin,fatbin}; the program loads the fatbin.
// CUsurfObject (host) and cudaSurfaceObject_t (here) are the same 64-bit handle, as for textures.

// Writes x + width * y into texel (x, y) of a float CUDA array through a surface. A surface's x
// coordinate is in BYTES: surface_indirect_functions.h gives only "int x", and the unit comes from the
// CUDA C++ Programming Guide ("Surface Memory": "surface memory uses byte addressing"); the surfaces
// program checks it (every texel read back). So texel x is at x * sizeof(float); y is in rows. The
// value is an integer below 2^24, exact as a float.
extern "C" __global__ void writeThroughSurface(cudaSurfaceObject_t surface, int width, int height) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < width && y < height) surf2Dwrite(static_cast<float>(x + width * y), surface, x * 4, y);
}

// Reads every texel of the same array through a texture (point sampling at texel centres) into
// pitched memory. It runs as a later kernel: within one kernel, texture fetches are not kept
// coherent with surface writes of that kernel (the guide's "Read/Write Coherency").
extern "C" __global__ void readThroughTexture(cudaTextureObject_t texture, float* out, size_t outPitch, int width,
                                              int height) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < width && y < height) {
        float* row = reinterpret_cast<float*>(reinterpret_cast<char*>(out) + y * outPitch);
        row[x] = tex2D<float>(texture, x + 0.5f, y + 0.5f);
    }
}
