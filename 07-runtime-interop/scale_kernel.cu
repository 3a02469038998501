// scale_kernel.cu — a kernel launched by the CUDA runtime (<<<>>>), for lesson 07.
//
// Nothing here knows about the driver API: the runtime launches into whatever
// context is current on the calling thread, on whatever stream it is given.
// shared_stream.cpp and device_reset.cpp pass it driver-allocated memory and a CUstream.
#include "scale_kernel.h"

namespace {

__global__ void scaleKernel(float* data, float factor, int count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) data[i] *= factor;
}

}  // namespace

cudaError_t launchScale(float* data, float factor, int count, cudaStream_t stream) {
    constexpr int kThreads = 256;
    const int blocks = (count + kThreads - 1) / kThreads;
    scaleKernel<<<blocks, kThreads, 0, stream>>>(data, factor, count);
    // cudaGetLastError returns (and clears) the last error of any runtime call on this
    // thread (cuda_runtime_api.h): right after the launch, a launch that could not start
    // shows here. A fault while the kernel runs may show only in a later call.
    return cudaGetLastError();
}
