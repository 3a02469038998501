// memory_type.h — what the driver records about an address (lesson 05).
#pragma once

#include <cuda.h>

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

// The memory type the driver records for an address. A host pointer is passed as the
// integer CUdeviceptr: with unified addressing host and device share one address space.
inline unsigned int memoryTypeOf(CUdeviceptr address) {
    unsigned int type = 0;
    CHECK_DRIVER(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address));
    return type;
}

}  // namespace lesson05
