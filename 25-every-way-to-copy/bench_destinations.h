// bench_destinations.h — copy_bench's pool and sizes, where each way writes, and what one run of
// each way must leave there, judged on the host against the bytes the host uploaded.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "../common/check_driver.h"
#include "copy_helpers.h"

namespace lesson25::bench {

constexpr size_t kBlocks = 16384;
constexpr size_t kBlockBytes = 4096;
constexpr size_t kPieces = 4096;
constexpr size_t kGathered = kPieces * kBlockBytes;  // 16 MiB
constexpr size_t kGuard = 4096;                      // after each gather's bytes: must keep the fill
// The strided copies: 4000-byte rows, 4096 of them (2-D), or 128 rows x 256 slices of 500 bytes
// (3-D): 16,384,000 bytes each, in memory from cuMemAllocPitch.
constexpr size_t k2DWidth = 4000;
constexpr size_t k2DRows = 4096;
constexpr size_t k3DWidth = 500;
constexpr size_t k3DRows = 128;
constexpr size_t k3DSlices = 256;
constexpr size_t kStridedBytes = k2DWidth * k2DRows;

inline size_t blockOf(size_t piece) {  // 4099 is odd: 4096 distinct blocks spread over the pool
    return (piece * 4099 + 977) % kBlocks;
}

// Where each way writes, as the main program allocated it: the three gathers and the flat copy
// (each kGathered bytes with kGuard after them), and the pitched 2-D and 3-D destinations.
struct Destinations {
    CUdeviceptr gathered[3];  // batched, one call per piece, contiguous
    CUdeviceptr flat;
    CUdeviceptr image;
    size_t imagePitch;
    CUdeviceptr volume;
    size_t volumePitch;
};

// Every destination back to 0xa5, queued on the stream ahead of the copies that write it.
inline void refill(const Destinations& to, CUstream stream) {
    for (const CUdeviceptr gathered : to.gathered)
        CHECK_DRIVER(cuMemsetD8Async(gathered, lesson25::kFill, kGathered + kGuard, stream));
    CHECK_DRIVER(cuMemsetD8Async(to.flat, lesson25::kFill, kGathered + kGuard, stream));
    CHECK_DRIVER(cuMemsetD8Async(to.image, lesson25::kFill, to.imagePitch * k2DRows, stream));
    CHECK_DRIVER(cuMemsetD8Async(to.volume, lesson25::kFill, to.volumePitch * k3DRows * k3DSlices, stream));
}

// Rows of `width` bytes, `pitch` apart, of a pitched destination (filled with 0xa5 before the
// copy) against the host bytes its source was uploaded from (the pool's first pitch x rows bytes):
// the rows whose `width` bytes differ from the host's, or whose padding (the rest of the pitch) no
// longer holds the fill. The reference is the host's, not the source read back after the copy: a
// copy run the wrong way, destination into source, would leave the two equal.
inline size_t rowsWrong(CUdeviceptr destination, size_t pitch, size_t width, size_t rows,
                        const std::vector<unsigned char>& poolHost) {
    const std::vector<unsigned char> to = lesson25::download(destination, pitch * rows);
    size_t wrong = 0;
    for (size_t r = 0; r < rows; ++r)
        wrong += std::memcmp(&poolHost[r * pitch], &to[r * pitch], width) != 0 ||
                         lesson25::notFill(&to[r * pitch + width], pitch - width) != 0
                     ? 1
                     : 0;
    return wrong;
}

// What one run of each way left in its destination, judged on the host against the pool's bytes.
struct Judged {
    size_t intact[3] = {};     // gathers: pieces equal to their block
    size_t guardKept[3] = {};  // gathers: guard bytes after the pieces still the fill
    size_t flatWrong = 0;      // flat copy: bytes other than the pool's first kStridedBytes, then the fill
    size_t rows2D = 0;         // strided copies: rows wrong (data or padding)
    size_t rows3D = 0;
    bool gatherRight(int way) const { return intact[way] == kPieces && guardKept[way] == kGuard; }
};

// Every destination read back whole (16 MiB and its guard, each pitch with its padding).
inline Judged judge(const Destinations& to, const std::vector<unsigned char>& poolHost) {
    Judged judged;
    for (int way = 0; way < 3; ++way) {
        const std::vector<unsigned char> got = lesson25::download(to.gathered[way], kGathered + kGuard);
        for (size_t i = 0; i < kPieces; ++i) {
            const size_t from = way == 2 ? i : blockOf(i);  // the contiguous copy: blocks in order
            judged.intact[way] +=
                std::memcmp(&got[i * kBlockBytes], &poolHost[from * kBlockBytes], kBlockBytes) == 0 ? 1 : 0;
        }
        judged.guardKept[way] = kGuard - lesson25::notFill(&got[kGathered], kGuard);
    }
    const std::vector<unsigned char> flat = lesson25::download(to.flat, kGathered + kGuard);
    judged.flatWrong = lesson25::differences(flat.data(), poolHost.data(), kStridedBytes) +
                       lesson25::notFill(&flat[kStridedBytes], kGathered + kGuard - kStridedBytes);
    judged.rows2D = rowsWrong(to.image, to.imagePitch, k2DWidth, k2DRows, poolHost);
    judged.rows3D = rowsWrong(to.volume, to.volumePitch, k3DWidth, k3DRows * k3DSlices, poolHost);
    return judged;
}

}  // namespace lesson25::bench
