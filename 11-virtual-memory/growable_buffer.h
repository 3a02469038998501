// growable_buffer.h — a device buffer that grows without moving.
//
// One range of virtual addresses is reserved up front, far larger than the buffer
// will ever be; reserving costs no device memory. Growing creates a physical chunk
// for the new bytes only and maps it right after the last one, so the buffer's
// address never changes and nothing is copied. The chunks' handles are kept so that
// release() can unmap and free them, newest first, before the addresses go back.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <vector>

struct GrowableBuffer {
    CUdeviceptr base = 0;  // the start of the reserved range: the buffer's address, for good
    size_t reserved = 0;   // bytes of addresses reserved
    size_t size = 0;       // bytes mapped (and readable and writable) from base
    std::vector<CUmemGenericAllocationHandle> chunks;  // physical chunks, in address order
    std::vector<size_t> chunkBytes;                    // their sizes
};

// Reserves `reservedBytes` of addresses (a multiple of the minimum granularity); maps nothing yet.
GrowableBuffer reserveGrowable(size_t reservedBytes);

// Maps a new chunk of (newSize - size) bytes at base + size and opens it to `device`.
// newSize must be a multiple of the minimum granularity and fit in the reservation.
void growTo(GrowableBuffer& buffer, size_t newSize, CUdevice device);

// Unmaps and releases every chunk, newest first, then frees the addresses.
void release(GrowableBuffer& buffer);

// The allocation properties the lesson uses: plain device memory (pinned, not shareable) on `device`.
CUmemAllocationProp deviceMemoryProperties(CUdevice device);

// Where memory of `device` lives: for cuMemGetAccess and the two functions above.
CUmemLocation deviceMemoryLocation(CUdevice device);

// Access for `device` with `flags` (CU_MEM_ACCESS_FLAGS_PROT_READ or _READWRITE).
CUmemAccessDesc accessFor(CUdevice device, CUmemAccess_flags flags);
