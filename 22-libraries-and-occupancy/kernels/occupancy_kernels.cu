// Device code of lesson 22's occupancy program. The Makefile builds it to
// build/22-libraries-and-occupancy/kernels/occupancy_kernels.{ptx,cubin,fatbin}.
//
// The kernels measure occupancy themselves: each block counts itself in on the SM it runs on
// (%smid), stays resident for holdNs ticks of %globaltimer (nanoseconds: see globalTimer), and
// counts itself out. The most blocks one SM
// held at once is the residency the program compares with the driver's prediction. No block
// ever waits for another block, so a grid larger than the GPU holds at once cannot deadlock: the
// blocks that do not fit start when earlier ones leave.
//
// Clusters exist from compute capability 9.0 on: that code is compiled only for those SMs
// (__CUDA_ARCH__ >= 900), so the file still builds for sm_75 .. sm_89, where the program skips
// the cluster step.
#include <cooperative_groups.h>

#include "../kernel_types.h"

namespace cg = cooperative_groups;

namespace {

// The identifier of the SM this thread runs on (PTX %smid), and how many identifiers there are
// (%nsmid). From the PTX ISA manual, not a CUDA header: %smid is read at one moment, and a thread
// may run on another SM later (after a preemption, say); each block reads it once, when it counts
// itself in.
__device__ __forceinline__ unsigned int smId() {
    unsigned int id = 0;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

__device__ __forceinline__ unsigned int smIdCount() {
    unsigned int count = 0;
    asm volatile("mov.u32 %0, %%nsmid;" : "=r"(count));
    return count;
}

// PTX %globaltimer, a global timer the PTX ISA manual describes; no CUDA header gives its unit.
// The toolkit's own libcu++ reads it as nanoseconds (cuda::std::chrono::system_clock::now on the
// device, cuda/std/__cuda/chrono.h:43-44 under include/cccl), and so does holdNs. Each block only
// compares two of its own readings, so nothing here depends on how closely the SMs' readings agree.
__device__ __forceinline__ unsigned long long globalTimer() {
    unsigned long long t = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Thread 0 counts the block in, spins for holdNs, counts it out; the other threads wait at the
// barrier meanwhile, so the whole block (its warps, registers and shared memory) stays on the SM.
// A count is taken after the block has started and dropped before it ends. It could exceed the
// blocks resident on that SM only if the GPU preempted a counted block (see smId above): nothing
// here can tell when that happens.
__device__ __forceinline__ void holdResident(unsigned int* counters, unsigned long long holdNs) {
    if (threadIdx.x == 0) {
        if (blockIdx.x == 0) counters[lesson22::kSmIdCount] = smIdCount();
        const unsigned int sm = smId();
        if (sm < lesson22::kMaxSmIds) {
            const unsigned int now = atomicAdd(&counters[lesson22::kCurrent + sm], 1u) + 1u;
            atomicMax(&counters[lesson22::kPeak + sm], now);
            const unsigned long long until = globalTimer() + holdNs;
            while (globalTimer() < until) {
            }
            atomicSub(&counters[lesson22::kCurrent + sm], 1u);
        } else {
            atomicAdd(&counters[lesson22::kOutOfRange], 1u);
        }
    }
    __syncthreads();
}

}  // namespace

// Few registers, no static shared memory: the launch's block size and dynamic shared memory
// decide how many blocks fit. All three kernels take the same parameters, so the host passes
// one argument list to any of them (in and out are used by residentHeavy only).
extern "C" __global__ void resident(unsigned int* counters, unsigned long long holdNs, const volatile float* in,
                                    float* out) {
    (void)in;
    (void)out;
    holdResident(counters, holdNs);
}

// Many registers: kHeavyValues floats per thread are read before the block counts itself in and
// used after it counts itself out, so they stay in registers all the while (volatile reads: the
// compiler may not move them past the wait or read them again later). The host fills `in` with
// zeros, so the sum is 0 and nothing is written: `out` only keeps the values from being dropped.
extern "C" __global__ void residentHeavy(unsigned int* counters, unsigned long long holdNs, const volatile float* in,
                                         float* out) {
    float values[lesson22::kHeavyValues];
#pragma unroll
    for (int i = 0; i < lesson22::kHeavyValues; ++i) values[i] = in[i * blockDim.x + threadIdx.x];
    holdResident(counters, holdNs);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < lesson22::kHeavyValues; ++i) sum += values[i] * static_cast<float>(i + 1);
    if (sum == -1.0f) out[0] = sum;
}

// Clusters: block rank 0 of each cluster counts the cluster in and out. "a block cluster is
// guaranteed to be a cooperative group" (cooperative_groups.h:279-280), and the CUDA Programming
// Guide says the blocks of a cluster are co-scheduled, so cluster.sync() waits only for blocks
// that run at the same time; the second one keeps every block of the cluster resident until
// rank 0 has counted the cluster out.
extern "C" __global__ void residentCluster(unsigned int* counters, unsigned long long holdNs, const volatile float* in,
                                           float* out) {
    (void)in;
    (void)out;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    if (cluster.block_rank() == 0 && threadIdx.x == 0) {
        const unsigned int now = atomicAdd(&counters[lesson22::kClustersNow], 1u) + 1u;
        atomicMax(&counters[lesson22::kClustersPeak], now);
        const unsigned long long until = globalTimer() + holdNs;
        while (globalTimer() < until) {
        }
        atomicSub(&counters[lesson22::kClustersNow], 1u);
        atomicAdd(&counters[lesson22::kClustersDone], 1u);
    }
    cluster.sync();
#else
    (void)counters;
    (void)holdNs;
#endif
}
