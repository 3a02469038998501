// Device code of lesson 25. The Makefile builds it to
// build/25-every-way-to-copy/kernels/copy_kernels.{ptx,cubin,fatbin}; the programs load the fatbin.
// extern "C" keeps the names unmangled for cuModuleGetFunction.

// Keeps the calling thread busy for `nanoseconds` of the GPU's global timer.
__device__ void waitNanoseconds(unsigned long long nanoseconds) {
    unsigned long long start = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    unsigned long long now = start;
    while (now - start < nanoseconds) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
}

// Keeps one thread busy for `nanoseconds`, so that work queued after it on the same stream has to
// wait: pointers and fills use it to hold a stream back.
extern "C" __global__ void spin(unsigned long long nanoseconds) {
    waitNanoseconds(nanoseconds);
}

// The same, and then `mark` into words[0] to words[count - 1]. A copy queued after it on the same
// stream into those words overwrites the mark; a copy that did not wait for the kernel lands first
// and is overwritten by it (batched_gather, step 5).
extern "C" __global__ void spinThenMark(unsigned long long nanoseconds, unsigned int* words, int count,
                                        unsigned int mark) {
    waitNanoseconds(nanoseconds);
    for (int i = 0; i < count; ++i) words[i] = mark;
}

// One fetch per thread from a mipmapped texture: at[i] = (u, v, level of detail, unused), u and v
// normalized coordinates (cuda.h: for mipmapped arrays CU_TRSF_NORMALIZED_COORDINATES "has to be
// set"). An integer level of detail L names level L itself: mipmapFilterMode applies only "when the
// calculated mipmap level lies between two defined mipmap levels" (cuda.h:22978).
extern "C" __global__ void sampleLevels(cudaTextureObject_t texture, const float4* at, float* values, int count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) values[i] = tex2DLod<float>(texture, at[i].x, at[i].y, at[i].z);
}
