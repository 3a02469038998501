// growable_buffer.cpp — reserve once, map chunks as the buffer grows, release newest first.
#include "growable_buffer.h"

#include "../common/check_driver.h"

CUmemLocation deviceMemoryLocation(CUdevice device) {
    CUmemLocation location{};
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = device;
    return location;
}

CUmemAllocationProp deviceMemoryProperties(CUdevice device) {
    CUmemAllocationProp properties{};                 // zero: no shareable handle, no compression, no flags
    properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;  // resident on the device, never migrated
    properties.location = deviceMemoryLocation(device);
    return properties;
}

CUmemAccessDesc accessFor(CUdevice device, CUmemAccess_flags flags) {
    CUmemAccessDesc access{};
    access.location = deviceMemoryLocation(device);
    access.flags = flags;
    return access;
}

GrowableBuffer reserveGrowable(size_t reservedBytes) {
    GrowableBuffer buffer;
    // Alignment 0: the default alignment (cuda.h: "a power of two or zero for default
    // alignment"). Address hint 0: the driver chooses. No memory is mapped yet; step 3 of
    // the lesson shows cuMemGetInfo not moving.
    CHECK_DRIVER(cuMemAddressReserve(&buffer.base, reservedBytes, 0, 0, 0));
    buffer.reserved = reservedBytes;
    return buffer;
}

void growTo(GrowableBuffer& buffer, size_t newSize, CUdevice device) {
    const size_t added = newSize - buffer.size;
    const CUmemAllocationProp properties = deviceMemoryProperties(device);
    CUmemGenericAllocationHandle chunk = 0;
    CHECK_DRIVER(cuMemCreate(&chunk, added, &properties, 0));
    // The chunk goes right after the mapped part: the bytes already there do not move.
    const CUdeviceptr at = buffer.base + buffer.size;
    CHECK_DRIVER(cuMemMap(at, added, 0, chunk, 0));
    // A new mapping is not accessible to anyone until access is granted; only the new
    // bytes need it, the old ones keep theirs.
    const CUmemAccessDesc readWrite = accessFor(device, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_DRIVER(cuMemSetAccess(at, added, &readWrite, 1));
    buffer.chunks.push_back(chunk);
    buffer.chunkBytes.push_back(added);
    buffer.size = newSize;
}

void release(GrowableBuffer& buffer) {
    // Unmap, then release: a handle released while still mapped keeps its memory until
    // the last mapping goes, so unmapping first is what really gives the bytes back.
    while (!buffer.chunks.empty()) {
        buffer.size -= buffer.chunkBytes.back();
        CHECK_DRIVER(cuMemUnmap(buffer.base + buffer.size, buffer.chunkBytes.back()));
        CHECK_DRIVER(cuMemRelease(buffer.chunks.back()));
        buffer.chunks.pop_back();
        buffer.chunkBytes.pop_back();
    }
    // Addresses last: the whole reservation, exactly as reserved.
    CHECK_DRIVER(cuMemAddressFree(buffer.base, buffer.reserved));
    buffer.base = 0;
    buffer.reserved = 0;
}
