// Device code of lesson 19's texture programs (filtering, address_and_read_modes). The Makefile
// builds it to build/19-arrays-textures-surfaces/kernels/sampling.{ptx,cubin,fatbin}; the programs
// load the fatbin. extern "C" keeps the names unmangled for cuModuleGetFunction.
//
// A texture object reaches a kernel as an ordinary 64-bit parameter: the host passes the CUtexObject
// that cuTexObjectCreate returned, and the kernel declares it cudaTextureObject_t. Both are typedefs
// of unsigned long long, and cuda_runtime_api.h ("Interactions between CUtexObject and
// cudaTextureObject_t") says the two "represent the same data type": one handle, two spellings.
// The texture's description (array or pitched memory, format, filter, address mode, read mode)
// lives in the object, not in the kernel, so one kernel serves every texture of a lesson.

// One fetch per thread at at[i] (x, y): float results, for float textures and for 8-bit textures
// read as normalized floats (the default read mode).
extern "C" __global__ void sampleFloat(cudaTextureObject_t texture, const float2* at, float* values, int count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) values[i] = tex2D<float>(texture, at[i].x, at[i].y);
}

// The same for an 8-bit texture created with CU_TRSF_READ_AS_INTEGER: the fetch returns the stored
// byte itself, so the kernel asks for unsigned char (the element type), not float.
extern "C" __global__ void sampleBytes(cudaTextureObject_t texture, const float2* at, unsigned int* values, int count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) values[i] = tex2D<unsigned char>(texture, at[i].x, at[i].y);
}
