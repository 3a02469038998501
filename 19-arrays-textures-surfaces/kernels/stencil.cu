// Device code of lesson 19's copy_and_stencil program. The Makefile builds it to
// build/19-arrays-textures-surfaces/kernels/stencil.{ptx,cubin,fatbin}; the program loads the fatbin.
//
// A 5-point average, out(x, y) = (c + left + right + up + down) * 0.2, with the edge texel repeated
// beyond the image, computed two ways from the same pitched image: through a texture object (point
// sampling, clamp addressing does the edges) and with plain global loads (the kernel clamps the
// indices itself). Both add in the same order and round the same way, so their results, and the
// host's, are equal bit for bit.

__device__ inline float* rowOf(float* image, size_t pitch, int y) {
    return reinterpret_cast<float*>(reinterpret_cast<char*>(image) + y * pitch);
}

__device__ inline const float* rowOf(const float* image, size_t pitch, int y) {
    return reinterpret_cast<const float*>(reinterpret_cast<const char*>(image) + y * pitch);
}

// Unnormalized coordinates: texel (x, y) has its centre at (x + 0.5, y + 0.5).
extern "C" __global__ void stencilTexture(cudaTextureObject_t in, float* out, size_t outPitch, int width, int height) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const float cx = x + 0.5f;
    const float cy = y + 0.5f;
    float sum = tex2D<float>(in, cx, cy);
    sum += tex2D<float>(in, cx - 1.0f, cy);
    sum += tex2D<float>(in, cx + 1.0f, cy);
    sum += tex2D<float>(in, cx, cy - 1.0f);
    sum += tex2D<float>(in, cx, cy + 1.0f);
    rowOf(out, outPitch, y)[x] = sum * 0.2f;
}

extern "C" __global__ void stencilGlobal(const float* in, size_t inPitch, float* out, size_t outPitch, int width,
                                         int height) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const int left = x > 0 ? x - 1 : 0;
    const int right = x < width - 1 ? x + 1 : width - 1;
    const int up = y > 0 ? y - 1 : 0;
    const int down = y < height - 1 ? y + 1 : height - 1;
    const float* row = rowOf(in, inPitch, y);
    float sum = row[x];
    sum += row[left];
    sum += row[right];
    sum += rowOf(in, inPitch, up)[x];
    sum += rowOf(in, inPitch, down)[x];
    rowOf(out, outPitch, y)[x] = sum * 0.2f;
}
