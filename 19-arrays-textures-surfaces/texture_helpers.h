// texture_helpers.h — lesson 19's small helpers for the texture programs: the two descriptors a
// texture object is made from, an upload into a 2D CUDA array, and a kernel launch that fetches a
// list of coordinates and brings the results back.
#pragma once

#include <cuda.h>

#include <vector>

#include "../common/check_driver.h"
#include "texture_reference.h"

namespace lesson19 {

// What a texture object reads: a CUDA array. The struct is zeroed first: its flags "must be set to
// zero", and the union is larger than any one member.
inline CUDA_RESOURCE_DESC arrayResource(CUarray array) {
    CUDA_RESOURCE_DESC resource{};
    resource.resType = CU_RESOURCE_TYPE_ARRAY;
    resource.res.array.hArray = array;
    return resource;
}

// ... or pitched device memory: its address, element format and channels, the size in elements and
// the pitch in bytes (cuda.h: the address aligned to CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, the pitch
// to CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT). A pitch from cuMemAllocPitch meets the second by
// cuda.h's guarantee; for the address no header promises it, and pitched_and_arrays shows it. The
// callers pass an allocation's base, never a texel inside it.
//
// These helpers, like the programs, rely on CHECK_DRIVER ending the process on a failure: fetch
// below, for one, would leak its two buffers if a check returned instead.
inline CUDA_RESOURCE_DESC pitchResource(CUdeviceptr memory, CUarray_format format, unsigned int channels, size_t width,
                                        size_t height, size_t pitch) {
    CUDA_RESOURCE_DESC resource{};
    resource.resType = CU_RESOURCE_TYPE_PITCH2D;
    resource.res.pitch2D.devPtr = memory;
    resource.res.pitch2D.format = format;
    resource.res.pitch2D.numChannels = channels;
    resource.res.pitch2D.width = width;
    resource.res.pitch2D.height = height;
    resource.res.pitch2D.pitchInBytes = pitch;
    return resource;
}

// How a texture object reads: one address mode for both dimensions, the filter, the flags
// (CU_TRSF_NORMALIZED_COORDINATES, CU_TRSF_READ_AS_INTEGER). Zeroed first, so that the mipmap fields
// and the border colour are 0 unless set.
inline CUDA_TEXTURE_DESC textureDesc(CUaddress_mode mode, CUfilter_mode filter, unsigned int flags) {
    CUDA_TEXTURE_DESC texture{};
    texture.addressMode[0] = mode;
    texture.addressMode[1] = mode;
    texture.filterMode = filter;
    texture.flags = flags;
    return texture;
}

// Copies a tightly packed host image (rows of rowBytes, no padding) into a 2D CUDA array.
inline void copyToArray(CUarray array, const void* host, size_t rowBytes, size_t rows) {
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_HOST;
    copy.srcHost = host;
    copy.srcPitch = rowBytes;
    copy.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    copy.dstArray = array;
    copy.WidthInBytes = rowBytes;
    copy.Height = rows;
    CHECK_DRIVER(cuMemcpy2D(&copy));
}

// Runs `kernel` (sampleFloat or sampleBytes: texture, positions, results, count) once over the
// samples and returns one result per sample. The texture object is passed like any 64-bit value:
// kernelParams holds a pointer to the host variable.
template <typename Result>
std::vector<Result> fetch(CUfunction kernel, CUtexObject texture, const std::vector<Sample>& samples) {
    const size_t count = samples.size();
    CUdeviceptr positions = 0;
    CUdeviceptr results = 0;
    CHECK_DRIVER(cuMemAlloc(&positions, count * sizeof(Sample)));
    CHECK_DRIVER(cuMemAlloc(&results, count * sizeof(Result)));
    CHECK_DRIVER(cuMemcpyHtoD(positions, samples.data(), count * sizeof(Sample)));
    int n = static_cast<int>(count);
    void* params[] = {&texture, &positions, &results, &n};
    CHECK_DRIVER(cuLaunchKernel(kernel, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr));
    std::vector<Result> values(count);
    CHECK_DRIVER(cuMemcpyDtoH(values.data(), results, count * sizeof(Result)));  // waits for the kernel
    CHECK_DRIVER(cuMemFree(results));
    CHECK_DRIVER(cuMemFree(positions));
    return values;
}

}  // namespace lesson19
