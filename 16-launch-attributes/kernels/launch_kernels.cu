// Device code of lesson 16. The Makefile builds it to build/16-launch-attributes/kernels/
// launch_kernels.{ptx,cubin,fatbin}; the programs load the fatbin (SASS for every listed
// SM plus PTX), so the driver picks the code for the GPU it runs on.
// extern "C" keeps the names unmangled for cuModuleGetFunction.
//
// Clusters, distributed shared memory and programmatic dependent launch exist from
// compute capability 9.0 on: that code is compiled only for those SMs
// (__CUDA_ARCH__ >= 900), so the same file still builds SASS for sm_75 .. sm_89. The
// host programs skip those sections on older GPUs, so the empty bodies never run.
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

// The device functions of programmatic dependent launch are inline wrappers of the PTX
// instructions griddepcontrol.launch_dependents / griddepcontrol.wait
// (cuda_device_runtime_api.h) and run on sm_90 and newer. They are compiled here only with a
// CUDA 12.0 or newer toolkit, the version the host programs need anyway.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDACC_VER_MAJOR__ >= 12
#define PROGRAMMATIC_LAUNCH_AVAILABLE 1
#else
#define PROGRAMMATIC_LAUNCH_AVAILABLE 0
#endif

// The GPU's nanosecond clock, the same on every SM: times taken by different blocks and
// different kernels can be compared.
__device__ __forceinline__ unsigned long long globalTimer() {
    unsigned long long t = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// ---------------------------------------------------------------------------
// clusters: each block fills its shared tile, then reads the tile of the next block
// of its cluster (rank + 1, wrapping) through distributed shared memory.
// out[block * blockDim + t] = 1000 * (the neighbour's blockIdx.x) + t.
extern "C" __global__ void cluster_neighbour(int* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __shared__ int tile[256];
    cg::cluster_group cluster = cg::this_cluster();
    tile[threadIdx.x] = static_cast<int>(blockIdx.x * 1000 + threadIdx.x);
    // Every block of the cluster has written its tile before anyone reads a neighbour's.
    cluster.sync();
    const unsigned int neighbour = (cluster.block_rank() + 1) % cluster.num_blocks();
    const int* remote = cluster.map_shared_rank(tile, neighbour);
    out[blockIdx.x * blockDim.x + threadIdx.x] = remote[threadIdx.x];
    // A block's shared memory ends with the block: it waits until its neighbours have read it.
    cluster.sync();
#else
    (void)out;
#endif
}

// ---------------------------------------------------------------------------
// cooperative: phase 1 writes data[i]; grid.sync(); phase 2 reads the element one block
// further on, written by another block, which may run on another SM. Without a grid-wide
// barrier that block might not have run yet (or, if the grid does not fit on the GPU at
// once, might be waiting for this one to finish).
extern "C" __global__ void grid_rotate(int* data, int* out, int n) {
    cg::grid_group grid = cg::this_grid();
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) data[i] = 3 * i + 1;
    grid.sync();
    if (i < n) out[i] = data[(i + static_cast<int>(blockDim.x)) % n];
}

// ---------------------------------------------------------------------------
// timer_step (one thread): reads %globaltimer until it has changed 64 times and writes the
// smallest change seen, in ns: the finest gap these timestamps can resolve on this GPU.
extern "C" __global__ void timer_step(unsigned long long* smallest) {
    unsigned long long last = globalTimer();
    unsigned long long step = ~0ull;
    for (int changes = 0; changes < 64;) {
        const unsigned long long now = globalTimer();
        if (now != last) {
            step = now - last < step ? now - last : step;
            last = now;
            ++changes;
        }
    }
    *smallest = step;
}

// ---------------------------------------------------------------------------
// dependent launch. times[0]: the latest end of a producer block (atomicMax);
// times[1]: the earliest start of a consumer block; times[2]: the earliest moment a
// consumer block was past cudaGridDependencySynchronize (both atomicMin).

// Spins for spinNs nanoseconds (a kernel long enough to see the gap after it), then
// writes data[i] = 2 * i + 1.
extern "C" __global__ void producer(int* data, int n, unsigned long long spinNs, unsigned long long* times) {
#if PROGRAMMATIC_LAUNCH_AVAILABLE
    // Lets the stream launch the dependent kernel now: this only allows its blocks to be
    // scheduled; it says nothing about memory (the consumer waits for that, below).
    cudaTriggerProgrammaticLaunchCompletion();
#endif
    const unsigned long long start = globalTimer();
    while (globalTimer() - start < spinNs) {
    }
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) data[i] = 2 * i + 1;
    __syncthreads();
    if (threadIdx.x == 0) atomicMax(&times[0], globalTimer());
}

// out[i] = data[i] + 1, so a stale read (data still 0) shows as 1 instead of 2 * i + 2.
extern "C" __global__ void consumer(const int* data, int* out, int n, unsigned long long* times) {
    if (threadIdx.x == 0) atomicMin(&times[1], globalTimer());  // the prologue: no producer data used
#if PROGRAMMATIC_LAUNCH_AVAILABLE
    // Waits until the producer grid has completed and its writes are visible. Without
    // the launch attribute the stream already waited, and this returns at once.
    cudaGridDependencySynchronize();
#endif
    if (threadIdx.x == 0) atomicMin(&times[2], globalTimer());
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = data[i] + 1;
}

// ---------------------------------------------------------------------------
// hints: out[i] = i + offset. The kernel uses no fence and nothing reads its output before
// the host has synchronized the stream, so no attribute of program 4 may change the result.
extern "C" __global__ void fill_index(int* out, int n, int offset) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = i + offset;
}
