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

constexpr unsigned long long kHoldNs = 1000000;  // each block stays resident 1 ms

// What every measurement needs: the SM count and the limits of one SM (step 1), the grid size,
// and the buffers the kernels take.
struct Gpu {
    int sms = 0;
    int threadsPerSm = 0;
    int blocksPerSm = 0;
    int registersPerSm = 0;
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
