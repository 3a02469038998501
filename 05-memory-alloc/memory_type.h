// memory_type.h — what the driver records about an address (lesson 05).
#pragma once

#include <cuda.h>

#include <string>

#include "../common/check_driver.h"

namespace lesson05 {

inline const char* memoryTypeName(unsigned int type) {
    switch (type) {
        case CU_MEMORYTYPE_HOST: return "CU_MEMORYTYPE_HOST";
        case CU_MEMORYTYPE_DEVICE: return "CU_MEMORYTYPE_DEVICE";
        case CU_MEMORYTYPE_ARRAY: return "CU_MEMORYTYPE_ARRAY";
        case CU_MEMORYTYPE_UNIFIED: return "CU_MEMORYTYPE_UNIFIED";
        default: return "(unknown CUmemorytype)";
    }
}

// What cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMORY_TYPE) answers for an address: the
// memory type, or the error it returns for an address that no context allocated, mapped or
// registered (cuda.h: CUDA_ERROR_INVALID_VALUE). A host pointer is passed as the integer
// CUdeviceptr: with unified addressing host and device share one address space.
struct MemoryType {
    CUresult result = CUDA_SUCCESS;
    unsigned int type = 0;

    bool is(CUmemorytype wanted) const { return result == CUDA_SUCCESS && type == static_cast<unsigned int>(wanted); }
    bool unknownToDriver() const { return result != CUDA_SUCCESS; }
    // "CU_MEMORYTYPE_HOST", or "unknown to the driver (CUDA_ERROR_INVALID_VALUE)".
    std::string text() const {
        if (result == CUDA_SUCCESS) return memoryTypeName(type);
        return std::string("unknown to the driver (") + course::driverErrorName(result) + ")";
    }
};

// Not CHECK_DRIVER: "the driver does not know this address" is an answer the lesson checks
// (an unregistered or freed buffer), not a failure.
inline MemoryType memoryTypeOf(CUdeviceptr address) {
    MemoryType answer;
    answer.result = cuPointerGetAttribute(&answer.type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address);
    return answer;
}

}  // namespace lesson05
