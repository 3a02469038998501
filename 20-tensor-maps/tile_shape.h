// tile_shape.h — the box (tile) shapes of lesson 20. The host programs encode them into the
// tensor maps and the kernels size their shared memory with them: one header, so that the two
// cannot disagree. Plain constants, so nvcc and the host compiler both read it.
#pragma once

namespace lesson20 {

// tile_copy and the swizzle demo: 32 x 32 floats (4 KiB). A row of the box is 32 x 4 = 128
// bytes: a multiple of 16 (every box) and no more than the 128-byte swizzle span.
constexpr unsigned int kTileCols = 32;
constexpr unsigned int kTileRows = 32;

// The copy benchmark: 128 x 32 floats (16 KiB) per box, fewer and larger copies.
constexpr unsigned int kCopyCols = 128;
constexpr unsigned int kCopyRows = 32;

// Threads per block of the tile kernels (transformTiles, readColumns): 8 warps.
constexpr unsigned int kTileThreads = 256;

// How long a kernel waits on its mbarrier (in nanoseconds of %globaltimer) before it gives up:
// 1 s. A wait that ends there means the bytes announced never all arrived (a byte count that
// does not match the box, a box that does not match the tile); the block counts itself late
// and skips its work, and the host program fails the run instead of hanging on it.
constexpr unsigned long long kWaitDeadlineNs = 1000000000ull;

}  // namespace lesson20
