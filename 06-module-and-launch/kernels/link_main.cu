// The calling half of lesson 06's cuLink pair. linkedTransform is only declared here;
// kernels/link_helper.cu defines it. lesson.mk compiles both files with -rdc=true
// (relocatable device code), so this PTX keeps the call as an `.extern .func` reference
// that the JIT linker resolves in cuLinkComplete. Loaded alone, it cannot be resolved.
extern "C" __device__ float linkedTransform(float x);

extern "C" __global__ void applyLinked(const float* __restrict__ x, float* __restrict__ y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = linkedTransform(x[i]);
}
