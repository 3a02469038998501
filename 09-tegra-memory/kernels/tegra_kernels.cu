// Device code for lesson 09: the app note's three-stage image pipeline (k1 -> k2 -> k3)
// and its matrix-multiply example. Integer arithmetic only, so the host can check
// every element exactly.
//
// Image values start in 0..255. k1 sums each pixel with its left and right
// neighbours (edges clamped): 0..765. k2 sums each of those with the rows above
// and below: 0..2295. k3 inverts: 2295 - value.

extern "C" __global__ void k1RowSum(const int* in, int* out, int width, int height) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const int left = x > 0 ? x - 1 : x;
    const int right = x < width - 1 ? x + 1 : x;
    const int* row = in + static_cast<long long>(y) * width;
    out[static_cast<long long>(y) * width + x] = row[left] + row[x] + row[right];
}

extern "C" __global__ void k2ColumnSum(const int* in, int* out, int width, int height) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const int up = y > 0 ? y - 1 : y;
    const int down = y < height - 1 ? y + 1 : y;
    out[static_cast<long long>(y) * width + x] = in[static_cast<long long>(up) * width + x] +
                                                 in[static_cast<long long>(y) * width + x] +
                                                 in[static_cast<long long>(down) * width + x];
}

extern "C" __global__ void k3Invert(const int* in, int* out, int width, int height) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const long long i = static_cast<long long>(y) * width + x;
    out[i] = 9 * 255 - in[i];
}

// r (hp x wq) = p (hp x wp) * q (hq x wq), with wp == hq; row-major; one thread per element of r.
extern "C" __global__ void matrixMul(const int* p, const int* q, int* r, int hp, int hq, int wp, int wq) {
    const int column = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= hp || column >= wq || wp != hq) return;
    int sum = 0;
    for (int k = 0; k < wp; ++k) sum += p[row * wp + k] * q[k * wq + column];
    r[row * wq + column] = sum;
}
