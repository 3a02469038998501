// Device code of lesson 20. The Makefile builds it to build/20-tensor-maps/kernels/
// tensor_map_kernels.{ptx,cubin,fatbin}; the programs load the fatbin (tensor_maps.h says why).
// extern "C" keeps the names unmangled for cuModuleGetFunction.
//
// Tensor maps and the instructions that use them exist from compute capability 9.0 on. The
// kernel bodies that use them are compiled only for those SMs (__CUDA_ARCH__ >= 900); for older
// ones (the .ptx file, built for compute_75, and the fatbin's sm_75 .. sm_89 code) the body is
// __trap(), so a launch there fails loudly instead of doing nothing. The host programs never
// launch these kernels below 9.0.
//
// The PTX instructions are written out as inline asm, so that the lesson shows what the
// hardware is asked to do (libcu++'s cuda::ptx namespace wraps the same instructions). ptxas
// (CUDA 13.0) refuses every one of them for sm_89 except mbarrier.init (sm_80 and newer), and
// accepts every one for plain sm_90: none needs sm_90a. The "a" targets are for instructions
// such as wgmma and setmaxnreg, which ptxas refuses for sm_90; the CUDA documentation (nvcc,
// on architecture-specific features) describes sm_90a code as running on compute capability
// 9.0 only, where compute_90 PTX can also be compiled for newer GPUs.
//
// CUtensorMap came with the CUDA 12.0 headers: built with older ones, the four tensor-map
// kernels are left out (CUDA_VERSION < 12000) and the module holds copyFloat4 alone. The host
// programs then skip in step 1 and never look the others up.
#include <cuda.h>  // CUtensorMap: the 128-byte descriptor the kernels take by value

#include <cstdint>

#include "../tile_shape.h"

using lesson20::kCopyCols;
using lesson20::kCopyRows;
using lesson20::kIm2colChannels;
using lesson20::kIm2colFilter;
using lesson20::kIm2colPad;
using lesson20::kIm2colPixels;
using lesson20::kIm2colTaps;
using lesson20::kTileCols;
using lesson20::kTileRows;

#if CUDA_VERSION >= 12000
#define TENSOR_MAP_KERNELS 1
#else
#define TENSOR_MAP_KERNELS 0
#endif

#if TENSOR_MAP_KERNELS && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TENSOR_MAPS_AVAILABLE 1
#else
#define TENSOR_MAPS_AVAILABLE 0
#endif

#if TENSOR_MAPS_AVAILABLE
// sharedAddress, barrierInit, fenceProxyAsync, barrierArriveExpectBytes, electedThreadOfBlock,
// barrierWait (with its deadline): the synchronisation every kernel below uses.
#include "tma_sync.cuh"

// cp.async.bulk.tensor.2d ... .tile (load): the copy engine reads the box whose first element is
// column x, row y of the tensor that `map` describes (in elements, dimension 0 first; a box may
// hang over the edge, even start before it) and writes it to shared memory as the map says:
// swizzled or not, elements outside the tensor filled. .shared::cluster: the destination may be
// in any block of a cluster (a block launched without one is a cluster of one);
// .mbarrier::complete_tx::bytes: the bytes are counted off `barrier`. The map is addressed in
// the kernel's parameter space: a __grid_constant__ parameter has an address there.
__device__ __forceinline__ void loadTile(void* tile, const CUtensorMap& map, int x, int y, std::uint64_t* barrier) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
        "[%4];" ::"r"(sharedAddress(tile)),
        "l"(reinterpret_cast<std::uint64_t>(&map)), "r"(x), "r"(y), "r"(sharedAddress(barrier))
        : "memory");
}

// cp.async.bulk.tensor.2d ... .tile (store): the copy engine reads the tile from shared memory
// and writes it to the box at column x, row y; elements of the box outside the tensor are not
// written. .bulk_group: completion is tracked per thread, in groups (below).
__device__ __forceinline__ void storeTile(const CUtensorMap& map, int x, int y, const void* tile) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                     reinterpret_cast<std::uint64_t>(&map)),
                 "r"(x), "r"(y), "r"(sharedAddress(tile))
                 : "memory");
}

// cp.async.bulk.tensor.4d ... .im2col (load), for an NHWC tensor: the copy engine loads the
// map's pixelsPerColumn pixels, channelsPerPixel channels each, into shared memory, one pixel's
// channels after the other. Coordinates {c, w, h, n} (dimension 0 first): the first channel, and
// the first pixel's filter base, which "must be within the bounding box" the map's corners set
// (PTX ISA, im2col mode); the pixels after it go on through the box, W before H, and on into the
// next image. The im2col offsets {w, h} (16-bit, 0 to 255 for a 4-D tensor) "are added to the
// filter base coordinates": the pixel loaded is base + offset, filled (zeros here) where that
// lies outside the tensor.
__device__ __forceinline__ void loadIm2col(void* tile, const CUtensorMap& map, int c, int w, int h, int n,
                                           std::uint16_t offsetW, std::uint16_t offsetH, std::uint64_t* barrier) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
        "%5}], [%6], {%7, %8};" ::"r"(sharedAddress(tile)),
        "l"(reinterpret_cast<std::uint64_t>(&map)), "r"(c), "r"(w), "r"(h), "r"(n), "r"(sharedAddress(barrier)),
        "h"(offsetW), "h"(offsetH)
        : "memory");
}

// cp.async.bulk.commit_group closes a group of this thread's bulk stores; wait_group.read 0
// waits until the copy engine has read the shared memory of every committed group, so the
// block may reuse it or exit. (Without .read it would also wait for the writes to global memory.)
__device__ __forceinline__ void commitStoresAndWaitForReads() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

// ld.shared.v4.f32: 16 bytes from shared memory. asm volatile keeps every read in the timed
// loop, where the compiler could otherwise keep values it already read in registers.
__device__ __forceinline__ float4 loadShared16(unsigned int address) {
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(address)
                 : "memory");
    return v;
}

// One elected thread starts a load into shared memory (`startLoad`, whose bytes are counted off
// `barrier`); every thread of the block waits for it. Returns whether all `bytes` arrived before
// the deadline, the same answer in every thread.
// It waits for phase 0 (parity 0) of a barrier it has just initialised, so it works once per
// barrier: a loop that loads tile after tile through the same barrier must wait for parity 1
// the second time, 0 the third, and so on (or initialise the barrier again once every thread
// has finished waiting on it).
template <typename StartLoad>
__device__ __forceinline__ bool loadForBlock(unsigned int bytes, std::uint64_t* barrier, StartLoad startLoad) {
    if (electedThreadOfBlock()) {
        barrierInit(barrier, 1);
        fenceProxyAsync();
    }
    // No thread waits on the barrier before it is initialised; and every thread's earlier writes
    // to the tile (transformTiles poisons it) come before the elected thread starts the load.
    __syncthreads();
    if (electedThreadOfBlock()) {
        // The whole box's bytes, edge boxes too: the load sets the box's out-of-bounds
        // elements to the fill (PTX ISA, "Out of Boundary Access") and counts "the amount of data
        // copied in bytes" off the barrier (PTX ISA, cp.async.bulk.tensor). A count the copy
        // never reaches keeps the phase open until the deadline (the late-block checks).
        barrierArriveExpectBytes(barrier, bytes);
        startLoad();
    }
    const bool arrived = barrierWait(barrier, 0);
    // One late thread makes the block late: every thread then takes the same branch.
    return __syncthreads_and(arrived) != 0;
}

// The box at (x, y) of a tiled map, into `tile`, for the whole block.
__device__ __forceinline__ bool loadTileForBlock(void* tile, unsigned int bytes, const CUtensorMap& map, int x, int y,
                                                 std::uint64_t* barrier) {
    return loadForBlock(bytes, barrier, [&] { loadTile(tile, map, x, y, barrier); });
}

// Thread 0 of a block whose box did not arrive in time counts the block in `lateBlocks`, which
// the host reads back and checks. The block then leaves without its work: the run has failed,
// and what it would compute from a box that never fully arrived means nothing.
//
// Not a pattern to copy: the block leaves with its load possibly still in flight, writing into
// shared memory and an mbarrier that the block no longer owns (the SM may give them to the
// next block). The deadline is here only to turn a wrong byte count, this lesson's mistake on
// purpose, into a FAIL rather than a hang. A real program should treat a missed deadline as
// fatal (__trap()); this lesson does not, because a trap leaves the context unusable and the
// host would end in a CHECK_DRIVER error instead of the check that names what went wrong.
__device__ __forceinline__ void countLateBlock(unsigned int* lateBlocks) {
    if (threadIdx.x == 0) atomicAdd(lateBlocks, 1u);
}
#endif

#if TENSOR_MAP_KERNELS
// tile_copy: block (bx, by) loads the box at column bx * kTileCols, row by * kTileRows of
// `input`, replaces each element v by 2 v + 1 in shared memory, and stores the box at the same
// place of `output`. The last block (bottom right: its box hangs over the matrix's edge) also
// writes the box as it was loaded, out-of-bounds fill included, to edgeBox (row-major floats).
// A block whose box did not arrive before the deadline adds 1 to *lateBlocks and stores nothing
// (countLateBlock says why that return is no pattern to copy).
extern "C" __global__ void transformTiles(const __grid_constant__ CUtensorMap input,
                                          const __grid_constant__ CUtensorMap output, float* edgeBox,
                                          unsigned int* lateBlocks) {
#if TENSOR_MAPS_AVAILABLE
    // Without swizzle a tensor copy needs a 128-byte aligned shared-memory address.
    __shared__ __align__(128) float tile[kTileRows * kTileCols];
    __shared__ std::uint64_t barrier;
    const int x = static_cast<int>(blockIdx.x * kTileCols);
    const int y = static_cast<int>(blockIdx.y * kTileRows);
    // The tile poisoned first: the edge box the host checks then shows what the engine wrote,
    // not what shared memory happened to hold. The poison is neither 0, a NaN nor 2 v + 1 of any
    // input (all >= 1), so that a zero or NaN in the edge box was written by the copy engine.
    // Each thread fences its writes (generic proxy) before the engine's (async proxy);
    // loadTileForBlock's __syncthreads orders them before the load starts.
    constexpr float kTilePoison = -2.0f;
    for (unsigned int i = threadIdx.x; i < kTileRows * kTileCols; i += blockDim.x) tile[i] = kTilePoison;
    fenceProxyAsync();
    if (!loadTileForBlock(tile, sizeof(tile), input, x, y, &barrier)) {
        countLateBlock(lateBlocks);  // returns with the load possibly in flight: see countLateBlock
        return;
    }
    const bool edge = blockIdx.x == gridDim.x - 1 && blockIdx.y == gridDim.y - 1;
    for (unsigned int i = threadIdx.x; i < kTileRows * kTileCols; i += blockDim.x) {
        if (edge) edgeBox[i] = tile[i];
        tile[i] = 2.0f * tile[i] + 1.0f;
    }
    // This thread's writes to the tile, before the copy engine reads it: the threads wrote
    // through the generic proxy, the store reads through the async proxy, and only a proxy fence
    // orders the two. (No check here can show it missing: a run without it may well store the
    // same values. The rule, not an observation, is why it is here.)
    fenceProxyAsync();
    __syncthreads();  // every thread's writes, before the elected thread starts the store
    if (electedThreadOfBlock()) {
        storeTile(output, x, y, tile);
        // Until the engine has read the tile, the block may neither overwrite it nor exit.
        // (Nothing here touches the tile after the store, so no check can show the wait missing.)
        commitStoresAndWaitForReads();
    }
#else
    __trap();
#endif
}

// swizzle_bench: every block loads the box at (0, 0) of `map` (kTileRows rows of 128 bytes;
// swizzled or not, as the map says, and `swizzled` tells the kernel which). Then, `rounds`
// times, warp w reads a column of 16-byte chunks: lane l reads chunk j = (w + round) % 8 of row
// l — where the 128-byte swizzle put it, when `swizzled` — and adds (j + 1) times the sum of its
// 4 floats to its total (weighted, so that a chunk read from the wrong place changes the total).
// sums[block * blockDim + thread] gets each thread's total; block 0 also writes the tile as it
// lies in shared memory to rawTile (kTileRows * kTileCols floats). A block whose box did not
// arrive before the deadline adds 1 to *lateBlocks and reads nothing.
extern "C" __global__ void readColumns(const __grid_constant__ CUtensorMap map, int swizzled, int rounds, float* sums,
                                       float* rawTile, unsigned int* lateBlocks) {
#if TENSOR_MAPS_AVAILABLE
    // 128-byte swizzle: the pattern is computed from the shared-memory address and repeats every
    // 1024 bytes, so the tile starts on a 1024-byte boundary and row 0 starts the pattern.
    __shared__ __align__(1024) float tile[kTileRows * kTileCols];
    __shared__ std::uint64_t barrier;
    if (!loadTileForBlock(tile, sizeof(tile), map, 0, 0, &barrier)) {
        countLateBlock(lateBlocks);  // returns with the load possibly in flight: see countLateBlock
        return;
    }
    if (blockIdx.x == 0)
        for (unsigned int i = threadIdx.x; i < kTileRows * kTileCols; i += blockDim.x) rawTile[i] = tile[i];
    const unsigned int lane = threadIdx.x % 32;  // = the row this thread reads (kTileRows is 32)
    const unsigned int warp = threadIdx.x / 32;
    const unsigned int row = sharedAddress(tile) + lane * kTileCols * sizeof(float);
    float sum = 0.0f;
    for (int round = 0; round < rounds; ++round) {
        const unsigned int chunk = (warp + static_cast<unsigned int>(round)) % 8;
        // The 128-byte swizzle: the 16-byte chunk index (address bits 4-6) XOR the row within
        // the 1024-byte pattern (address bits 7-9).
        const unsigned int place = swizzled ? chunk ^ (lane % 8) : chunk;
        const float4 v = loadShared16(row + place * 16);
        sum += static_cast<float>(chunk + 1) * (v.x + v.y + v.z + v.w);
    }
    sums[blockIdx.x * blockDim.x + threadIdx.x] = sum;
#else
    __trap();
#endif
}

// swizzle_bench's copy: each block copies one kCopyCols x kCopyRows box from `source` to
// `destination` through shared memory; its thread only starts the copies and waits. A block
// whose box did not arrive before the deadline adds 1 to *lateBlocks and stores nothing.
extern "C" __global__ void copyTiles(const __grid_constant__ CUtensorMap source,
                                     const __grid_constant__ CUtensorMap destination, unsigned int* lateBlocks) {
#if TENSOR_MAPS_AVAILABLE
    // One thread does everything: it initialises, arms and waits on the barrier with no
    // __syncthreads in between, which is right only if no other thread touches the barrier or
    // the tile. The host launches blocks of one thread; any further thread leaves here.
    if (threadIdx.x != 0) return;
    __shared__ __align__(128) float tile[kCopyRows * kCopyCols];
    __shared__ std::uint64_t barrier;
    const int x = static_cast<int>(blockIdx.x * kCopyCols);
    const int y = static_cast<int>(blockIdx.y * kCopyRows);
    barrierInit(&barrier, 1);
    fenceProxyAsync();
    barrierArriveExpectBytes(&barrier, sizeof(tile));
    loadTile(tile, source, x, y, &barrier);
    if (!barrierWait(&barrier, 0)) {
        countLateBlock(lateBlocks);  // returns with the load possibly in flight: see countLateBlock
        return;
    }
    storeTile(destination, x, y, tile);
    commitStoresAndWaitForReads();
#else
    __trap();
#endif
}

// im2col: block t loads, for filter tap t (filter row t / kIm2colFilter, column t % kIm2colFilter),
// the input pixel under that tap for every output pixel, all kIm2colPixels of them in one im2col
// load, and writes them to the tap's columns of the im2col matrix: row p is output pixel p (image,
// row, column, in that order), columns t * kIm2colChannels + c. The first filter base is
// (-kIm2colPad, -kIm2colPad) of image 0, output pixel 0's filter corner in the padding. A block
// whose load did not arrive before the deadline adds 1 to *lateBlocks and writes nothing.
extern "C" __global__ void im2colTaps(const __grid_constant__ CUtensorMap input, float* matrix,
                                      unsigned int* lateBlocks) {
#if TENSOR_MAPS_AVAILABLE
    __shared__ __align__(128) float tile[kIm2colPixels * kIm2colChannels];
    __shared__ std::uint64_t barrier;
    const unsigned int tap = blockIdx.x;
    const auto offsetW = static_cast<std::uint16_t>(tap % kIm2colFilter);
    const auto offsetH = static_cast<std::uint16_t>(tap / kIm2colFilter);
    const int corner = -static_cast<int>(kIm2colPad);
    if (!loadForBlock(sizeof(tile), &barrier,
                      [&] { loadIm2col(tile, input, 0, corner, corner, 0, offsetW, offsetH, &barrier); })) {
        countLateBlock(lateBlocks);  // returns with the load possibly in flight: see countLateBlock
        return;
    }
    constexpr unsigned int kRowFloats = kIm2colTaps * kIm2colChannels;
    for (unsigned int i = threadIdx.x; i < kIm2colPixels * kIm2colChannels; i += blockDim.x)
        matrix[i / kIm2colChannels * kRowFloats + tap * kIm2colChannels + i % kIm2colChannels] = tile[i];
#else
    __trap();
#endif
}
#endif  // TENSOR_MAP_KERNELS

// swizzle_bench's comparison: the plain coalesced copy, 16 bytes per thread and step, with a
// grid-stride loop (any grid size covers all `count` float4s).
extern "C" __global__ void copyFloat4(const float4* __restrict__ source, float4* __restrict__ destination,
                                      unsigned long long count) {
    for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < count;
         i += static_cast<unsigned long long>(gridDim.x) * blockDim.x)
        destination[i] = source[i];
}
