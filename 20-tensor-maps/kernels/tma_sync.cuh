// Lesson 20's device-side synchronisation, shared by the kernels of kernels/tensor_map_kernels.cu:
// shared-memory addresses, the mbarrier a bulk copy completes on, the proxy fence, one elected
// thread per block, and a wait that gives up at a deadline. Included only where the instructions
// exist (compute capability 9.0 and newer: tensor_map_kernels.cu includes it under
// TENSOR_MAPS_AVAILABLE).
#pragma once

#include <cstdint>

#include "../tile_shape.h"

// A shared-memory pointer as the 32-bit address the .shared instructions take.
__device__ __forceinline__ unsigned int sharedAddress(const void* pointer) {
    return static_cast<unsigned int>(__cvta_generic_to_shared(pointer));
}

// mbarrier.init: an mbarrier is a 64-bit object in shared memory that completes a "phase" once
// the given number of threads have arrived and, since sm_90, once the byte count announced for
// the phase ("transactions") has arrived too. One thread initialises it.
__device__ __forceinline__ void barrierInit(std::uint64_t* barrier, unsigned int arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sharedAddress(barrier)), "r"(arrivals) : "memory");
}

// fence.proxy.async.shared::cta: ordinary loads and stores reach shared memory through the
// "generic proxy", the copy engine through the "async proxy". The fence orders this thread's
// accesses through one proxy before its later accesses through the other. It is needed after
// mbarrier.init (so that the copy engine sees an initialised barrier) and after threads wrote a
// tile that a bulk store reads next (each writing thread fences, then the block synchronises).
__device__ __forceinline__ void fenceProxyAsync() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// mbarrier.arrive.expect_tx: arrive once and announce `bytes` more bytes for the current phase.
// The copies count them off as they land (their .mbarrier::complete_tx::bytes); the phase
// completes when the arrivals and the bytes are all in.
__device__ __forceinline__ void barrierArriveExpectBytes(std::uint64_t* barrier, unsigned int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sharedAddress(barrier)), "r"(bytes)
                 : "memory");
}

// elect.sync: one lane of the (converged) calling warp is elected and gets true, every other
// lane false. Every lane of the warp must call it together. NVIDIA's CUDA Programming Guide
// (section 4.12.2.1) issues the bulk copies from a lane elected this way rather than under
// `threadIdx.x == 0`, for which the compiler "may insert a peeling loop" around the copy.
__device__ __forceinline__ bool electOneLane() {
    unsigned int elected = 0;
    asm volatile("{\n\t.reg .pred p;\n\telect.sync _|p, 0xffffffff;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(elected)
                 :
                 : "memory");
    return elected != 0;
}

// One thread of the block does a block's single-thread work: an elected lane of warp 0. The
// first test is the same in every lane of a warp, so warp 0 reaches elect.sync converged (the
// lesson's blocks are whole warps).
__device__ __forceinline__ bool electedThreadOfBlock() {
    return threadIdx.x / 32 == 0 && electOneLane();
}

// %globaltimer: a nanosecond clock, the deadline's measure.
__device__ __forceinline__ unsigned long long globalTimerNs() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// mbarrier.try_wait.parity: has the phase of this parity completed? (The first phase has parity
// 0, the next 1, then 0 again.) try_wait may hold the thread for a while before it answers "not
// yet"; the loop asks again. A phase completes only when its arrivals and all its announced
// bytes are in, so a byte count that never arrives would keep the loop going for ever: it gives
// up after kWaitDeadlineNs and returns false.
__device__ __forceinline__ bool barrierWait(std::uint64_t* barrier, unsigned int parity) {
    const unsigned long long start = globalTimerNs();
    for (;;) {
        unsigned int done = 0;
        asm volatile(
            "{\n\t.reg .pred complete;\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, complete;\n\t}"
            : "=r"(done)
            : "r"(sharedAddress(barrier)), "r"(parity)
            : "memory");
        if (done != 0) return true;
        if (globalTimerNs() - start > lesson20::kWaitDeadlineNs) return false;
    }
}
