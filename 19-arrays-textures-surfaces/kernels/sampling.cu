// Device code of lesson 19's texture programs (filtering, address_and_read_modes). The Makefile
// builds it to build/19-arrays-textures-surfaces/kernels/sampling.{ptx,cubin,fatbin}; the programs
// load the fatbin. extern "C" keeps the names unmangled for cuModuleGetFunction.
//
// A texture object reaches a kernel as an ordinary 64-bit parameter: the host passes the CUtexObject
// that cuTexObjectCreate returned, and the kernel declares it cudaTextureObject_t. Both are typedefs
// of unsigned long long, and cuda_runtime_api.h ("Interactions between CUtexObject and
// cudaTextureObject_t") says the two "represent the same data type": one handle, two spellings.
// The texture's description (array or pitched memory, format, filter, address mode) lives in the
// object, not in the kernel, so one kernel serves every texture whose fetch returns a float:
// sampleFloat. The one texture read as integers gets a second kernel, sampleBytes, whose fetch asks
// for the element type.

// One fetch per thread at at[i] (x, y): float results, for float textures and for 8-bit textures
// read as normalized floats (the default read mode).
extern "C" __global__ void sampleFloat(cudaTextureObject_t texture, const float2* at, float* values, int count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) values[i] = tex2D<float>(texture, at[i].x, at[i].y);
}

// The same for an 8-bit texture created with CU_TRSF_READ_AS_INTEGER: the fetch returns the stored
// byte itself, and the kernel asks for unsigned char, the element type. texture_indirect_functions.h
// declares tex2D for every integer type and does not say which fetch type goes with which read mode.
// Observed on the H100 (the mutants integer-texture-without-flag and normalized-texture-reads-integers):
// an unsigned char fetch of a texture read as normalized floats did not return the bytes, and a float
// fetch of a texture read as integers did not return byte / 255.
extern "C" __global__ void sampleBytes(cudaTextureObject_t texture, const float2* at, unsigned int* values, int count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) values[i] = tex2D<unsigned char>(texture, at[i].x, at[i].y);
}
