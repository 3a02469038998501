// Device code for lesson 10: a producer kernel that paints a pitch-linear ARGB frame,
// and consumer kernels that check one.
//
// CU_EGL_COLOR_FORMAT_ARGB stores each pixel as four bytes in B, G, R, A order.
// The pattern makes every frame identifiable and every pixel checkable:
//   B = x, G = y, R = frame number, A = 255   (x, y < 256)

extern "C" __global__ void writeFrame(unsigned char* base, unsigned int pitch, unsigned int width, unsigned int height,
                                      unsigned int frameNumber) {
    const unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    unsigned char* pixel = base + static_cast<size_t>(y) * pitch + 4u * x;
    pixel[0] = static_cast<unsigned char>(x);
    pixel[1] = static_cast<unsigned char>(y);
    pixel[2] = static_cast<unsigned char>(frameNumber);
    pixel[3] = 255;
}

// result[0] = the frame number read from pixel (0, 0); result[1] = pixels that do not
// follow the pattern for that frame number. The host zeroes result before the launch.
__device__ void countMismatches(const unsigned char* base, unsigned int pitch, unsigned int width,
                                unsigned int height, unsigned int* result) {
    const unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const unsigned char frameNumber = base[2];
    if (x == 0 && y == 0) result[0] = frameNumber;
    const unsigned char* pixel = base + static_cast<size_t>(y) * pitch + 4u * x;
    const bool ok = pixel[0] == static_cast<unsigned char>(x) && pixel[1] == static_cast<unsigned char>(y) &&
                    pixel[2] == frameNumber && pixel[3] == 255;
    if (!ok) atomicAdd(&result[1], 1u);
}

// Checks a frame in memory this program painted (egl_sync).
extern "C" __global__ void checkFrame(const unsigned char* base, unsigned int pitch, unsigned int width,
                                      unsigned int height, unsigned int* result) {
    countMismatches(base, pitch, width, height, result);
}

// Checks a frame an EGLStream handed to the consumer (egl_stream), in place. The same check
// under its own name: the driver filled this memory with a copy compute-sanitizer's initcheck
// cannot see, so sanitizer-initcheck.args leaves exactly this kernel out of initcheck.
extern "C" __global__ void checkAcquiredFrame(const unsigned char* base, unsigned int pitch, unsigned int width,
                                              unsigned int height, unsigned int* result) {
    countMismatches(base, pitch, width, height, result);
}
