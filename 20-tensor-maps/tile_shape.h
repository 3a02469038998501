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

// im2col: an NHWC input of kIm2colImages images of kIm2colHeight x kIm2colWidth pixels with
// kIm2colChannels floats each (32 bytes: a multiple of 16), and a kIm2colFilter x kIm2colFilter
// filter with stride 1 and kIm2colPad pixels of padding, so that each image has as many output
// pixels as input pixels. One im2col load per filter tap brings every output pixel's pixel under
// that tap: kIm2colPixels pixels of kIm2colChannels floats (4 KiB).
constexpr unsigned int kIm2colImages = 2;
constexpr unsigned int kIm2colHeight = 8;
constexpr unsigned int kIm2colWidth = 8;
constexpr unsigned int kIm2colChannels = 8;
constexpr unsigned int kIm2colFilter = 3;
constexpr unsigned int kIm2colPad = (kIm2colFilter - 1) / 2;
constexpr unsigned int kIm2colTaps = kIm2colFilter * kIm2colFilter;
constexpr unsigned int kIm2colPixels = kIm2colImages * kIm2colHeight * kIm2colWidth;

// Threads per block of the tile kernels (transformTiles, readColumns, im2colTaps): 8 warps.
constexpr unsigned int kTileThreads = 256;

// How long a kernel waits on its mbarrier (in nanoseconds of %globaltimer) before it gives up:
// 1 s. A wait that ends there means the bytes announced never all arrived (a byte count that
// does not match the box, a box that does not match the tile); the block counts itself late
// and skips its work, and the host program fails the run instead of hanging on it.
constexpr unsigned long long kWaitDeadlineNs = 1000000000ull;

}  // namespace lesson20
