// grow_in_place.cpp — step 7: the buffer grows, and the address kept before still maps the
// same memory and reads the same data.
#include "grow_in_place.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include "../common/check_driver.h"
#include "growable_buffer.h"

std::string sizeText(size_t bytes) {
    constexpr size_t kMiB = size_t{1} << 20;
    return bytes >= 1024 * kMiB ? std::to_string(bytes / (1024 * kMiB)) + " GiB"
                                : std::to_string(bytes / kMiB) + " MiB";
}

size_t wordsEqualTo(CUdeviceptr address, size_t bytes, std::uint32_t word) {
    std::vector<std::uint32_t> host(bytes / 4);
    if (REPORT_DRIVER(cuMemcpyDtoH(host.data(), address, bytes)) != CUDA_SUCCESS) return 0;
    return static_cast<size_t>(std::count(host.begin(), host.end(), word));
}

namespace {

// The word each chunk of the growable buffer is filled with: its number, marked.
std::uint32_t chunkWord(size_t chunk) {
    return 0x600d0000u + static_cast<std::uint32_t>(chunk);
}

// The handle of the memory mapped at `address`, asked of the driver. cuda.h: "The handle is
// guaranteed to be the same handle value used to map the memory. If the address requested
// is not mapped, the function will fail." The retain takes a reference; it is dropped at once.
std::optional<CUmemGenericAllocationHandle> handleMappedAt(CUdeviceptr address) {
    CUmemGenericAllocationHandle handle = 0;
    void* where = reinterpret_cast<void*>(static_cast<std::uintptr_t>(address));
    if (REPORT_DRIVER(cuMemRetainAllocationHandle(&handle, where)) != CUDA_SUCCESS) return std::nullopt;
    CHECK_DRIVER(cuMemRelease(handle));
    return handle;
}

// Reads back every chunk but the newest through `address`, the buffer's address before
// the growth, and counts the words that still hold their chunk's word.
size_t wordsKeptBeforeNewestChunk(const GrowableBuffer& buffer, CUdeviceptr address) {
    size_t kept = 0;
    size_t start = 0;
    for (size_t chunk = 0; chunk + 1 < buffer.chunks.size(); ++chunk) {
        kept += wordsEqualTo(address + start, buffer.chunkBytes[chunk], chunkWord(chunk));
        start += buffer.chunkBytes[chunk];
    }
    return kept;
}

}  // namespace

void growInPlace(course::Verdict& verdict, CUdevice device, size_t firstSize, size_t lastSize, size_t reservedBytes) {
    GrowableBuffer buffer = reserveGrowable(reservedBytes);
    growTo(buffer, firstSize, device);
    const CUdeviceptr address = buffer.base;  // what a user of the buffer keeps
    const std::optional<CUmemGenericAllocationHandle> firstChunk = handleMappedAt(address);
    CHECK_DRIVER(cuMemsetD32(address, chunkWord(0), firstSize / 4));
    std::printf("reserved %s of addresses at 0x%llx\n", sizeText(buffer.reserved).c_str(),
                static_cast<unsigned long long>(address));
    // cuda.h: the retained handle "is guaranteed to be the same handle value used to map the memory".
    bool sameMemory = firstChunk == buffer.chunks.front();
    std::printf("first chunk mapped at the kept address: %s\n", sameMemory ? "yes" : "no");
    bool allKept = true;
    for (size_t size = 2 * firstSize; size <= lastSize && sameMemory; size *= 2) {
        const size_t before = buffer.size;
        growTo(buffer, size, device);
        const std::optional<CUmemGenericAllocationHandle> nowMapped = handleMappedAt(address);
        sameMemory = nowMapped == buffer.chunks.front();
        std::printf("memory at the kept address after growing %s -> %s: %s\n", sizeText(before).c_str(),
                    sizeText(size).c_str(), sameMemory ? "the first chunk, as before" : "NOT the first chunk");
        if (!sameMemory) break;  // the kept address lost its memory: nothing to read back there
        const size_t kept = wordsKeptBeforeNewestChunk(buffer, address);
        std::printf("words written before growing to %s, read back at the same address: %zu of %zu\n",
                    sizeText(size).c_str(), kept, before / 4);
        allKept = allKept && kept == before / 4;
        CHECK_DRIVER(cuMemsetD32(address + before, chunkWord(buffer.chunks.size() - 1), (size - before) / 4));
    }
    verdict.check("kept address still maps the first chunk after every growth", sameMemory);
    if (sameMemory) verdict.check("data kept at the kept address after every growth", allKept);
    const size_t chunkCount = buffer.chunks.size();
    release(buffer);
    std::printf("released: %zu chunks unmapped and released newest first, then the addresses freed\n", chunkCount);
}
