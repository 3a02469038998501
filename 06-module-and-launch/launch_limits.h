// launch_limits.h — which error cuLaunchKernel answers for a block one thread wider than a
// function's CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK. Arithmetic only, no driver calls, so a
// CPU test checks the rule with known numbers.
//
// Where the function's limit comes from decides the code:
//   the device's block limit (1024)            the block is out of range for any function:
//                                              CUDA_ERROR_INVALID_VALUE, as observed on the H200
//   a bound the module declares                the block is outside the function's declared
//   (__launch_bounds__(128) -> .maxntid 128)   range: CUDA_ERROR_INVALID_VALUE as well, observed
//   the register file (many registers          a legal block whose registers do not fit:
//   per thread)                                CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, which cuda.h
//                                              documents as "the kernel launch specifies too many
//                                              threads for the kernel's register count"
// cuda.h names no error for the first two cases; the README's captured H200 run shows the codes.
#pragma once

#include <cuda.h>

namespace lesson06 {

// The block size boundedKernel declares in kernels/vector_ops.cu (__launch_bounds__): one
// constant for the kernel and for the host that checks the driver reports it.
constexpr int kBoundedKernelThreads = 128;

// Registers as cuda_occupancy.h counts them: a warp's registers (per thread x 32) rounded up to
// the allocation granularity, 256 for compute capabilities 3 to 12 (cudaOccRegAllocationGranularity),
// which is per thread a multiple of 8.
constexpr int allocatedRegisters(int registersPerThread) {
    return (registersPerThread + 7) / 8 * 8;
}

// True when the register file sets the function's limit: a block of the device's full size
// would need more registers than one block may have (CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK),
// so the driver lowered the limit for this function's register count.
constexpr bool limitedByRegisters(int registersPerThread, int deviceMaxThreads, int registersPerBlock) {
    return allocatedRegisters(registersPerThread) * deviceMaxThreads > registersPerBlock;
}

// The code a launch with functionMaxThreads + 1 threads per block gets.
constexpr CUresult tooWideLaunchCode(int functionMaxThreads, int registersPerThread, int deviceMaxThreads,
                                     int registersPerBlock) {
    if (functionMaxThreads + 1 > deviceMaxThreads) return CUDA_ERROR_INVALID_VALUE;
    if (limitedByRegisters(registersPerThread, deviceMaxThreads, registersPerBlock))
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace lesson06
