// residency.h — how lesson 22's occupancy program counts blocks on the GPU: the device limits and
// buffers every measurement needs, the kernels' parameters, one launch with freshly cleared
// counters, and what the counters say (their layout: kernel_types.h).
#pragma once

#include <cuda.h>

#include <algorithm>
#include <vector>

#include "../common/check_driver.h"
#include "kernel_types.h"

namespace lesson22 {

// Each block stays resident 1 ms, reading %globaltimer as nanoseconds (occupancy_kernels.cu).
constexpr unsigned long long kHoldNs = 1000000;

// What every measurement needs: the SM count and the limits of one SM (step 1), the grid size,
// and the buffers the kernels take.
struct Gpu {
    int sms = 0;
    int threadsPerSm = 0;
    int blocksPerSm = 0;
    int registersPerSm = 0;
    int warpSize = 0;
    unsigned int blocks = 0;  // 2 x SMs x the most blocks an SM can hold: more than can be resident at once
    CUdeviceptr counters = 0;
    CUdeviceptr in = 0;
    CUdeviceptr out = 0;
};

// The four parameters every occupancy kernel takes (counters, holdNs, in, out), as the array of
// pointers cuLaunchKernel and cuLaunchKernelEx read. Not copyable: `pointers` points at its members.
struct KernelParams {
    explicit KernelParams(const Gpu& gpu) : counters(gpu.counters), in(gpu.in), out(gpu.out) {}
    KernelParams(const KernelParams&) = delete;
    KernelParams& operator=(const KernelParams&) = delete;
    CUdeviceptr counters;
    unsigned long long hold = kHoldNs;
    CUdeviceptr in;
    CUdeviceptr out;
    void* pointers[4] = {&counters, &hold, &in, &out};
};

// Clears the counters, starts one launch (`launch`, given the kernel parameters) and returns the
// counters its blocks left (kernel_types.h); the copy waits for the kernel. Every measurement,
// clusters included, goes through here, so that none starts from what an earlier one left.
template <typename Launch>
std::vector<unsigned int> counted(const Gpu& gpu, Launch launch) {
    CHECK_DRIVER(cuMemsetD32(gpu.counters, 0, kCounterWords));
    KernelParams params(gpu);
    launch(params.pointers);
    std::vector<unsigned int> host(kCounterWords);
    CHECK_DRIVER(cuMemcpyDtoH(host.data(), gpu.counters, host.size() * sizeof(unsigned int)));
    return host;
}

// Launches `function` over gpu.blocks blocks of blockSize threads, dynamicBytes of dynamic shared
// memory each, and returns the counters.
inline std::vector<unsigned int> measure(const Gpu& gpu, CUfunction function, int blockSize, size_t dynamicBytes) {
    return counted(gpu, [&](void** params) {
        CHECK_DRIVER(cuLaunchKernel(function, gpu.blocks, 1, 1, static_cast<unsigned int>(blockSize), 1, 1,
                                    static_cast<unsigned int>(dynamicBytes), nullptr, params, nullptr));
    });
}

// The blocks of blockSize threads that one SM's registers hold when each thread uses `registers`,
// worked out from CU_FUNC_ATTRIBUTE_NUM_REGS and the device's attributes by the rules of
// cuda_occupancy.h's cudaOccMaxBlocksPerSMRegsLimit (lines 1482-1580): registers go to whole
// warps, registers x warp size rounded up to 256 a warp (the granularity it gives for compute
// capability 3.x to 12.x, lines 680-700); the SM's registers are split evenly among 4
// sub-partitions (2 on compute capability 6.0, lines 708-733), and each warp's come from one of
// them. The per-block and per-thread register limits it also applies are left out: residentHeavy
// is far below them. cuda.h states none of these rules; they are the toolkit's own calculator's.
inline int blocksByRegisters(const Gpu& gpu, int capability, int registers, int blockSize) {
    constexpr int kGranularity = 256;
    const int subPartitions = capability == 60 ? 2 : 4;
    const int perWarp = (registers * gpu.warpSize + kGranularity - 1) / kGranularity * kGranularity;
    const int warpsPerBlock = (blockSize + gpu.warpSize - 1) / gpu.warpSize;
    if (perWarp <= 0 || warpsPerBlock <= 0) return 0;
    const int warpsPerSm = gpu.registersPerSm / subPartitions / perWarp * subPartitions;
    return warpsPerSm / warpsPerBlock;
}

// The most blocks any SM held at once.
inline unsigned int peakOf(const std::vector<unsigned int>& counters) {
    return *std::max_element(counters.begin() + kPeak,
                             counters.begin() + kPeak + kMaxSmIds);
}

// How many SMs held at least `blocks` at once (with 1: how many ran blocks).
inline unsigned int smsHolding(const std::vector<unsigned int>& counters, unsigned int blocks) {
    unsigned int count = 0;
    for (unsigned int sm = 0; sm < kMaxSmIds; ++sm) count += counters[kPeak + sm] >= blocks ? 1 : 0;
    return count;
}

}  // namespace lesson22
