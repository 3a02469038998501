// interop.h — what the three programs of lesson 07 share: the runtime's check macro,
// the address crossing between the two APIs, and two small questions to the driver.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/check_driver.h"

// The runtime reports cudaError_t, not CUresult: the same fail-fast form as CHECK_DRIVER,
// with the runtime's own names.
#define CHECK_RUNTIME(call)                                                                                          \
    do {                                                                                                             \
        const cudaError_t checkRuntimeResult_ = (call);                                                              \
        if (checkRuntimeResult_ != cudaSuccess) {                                                                    \
            std::fflush(stdout);                                                                                     \
            std::fprintf(stderr, "CUDA runtime call failed: %s\n  error: %s (code %d): %s\n  at:    %s:%d\n", #call, \
                         cudaGetErrorName(checkRuntimeResult_), static_cast<int>(checkRuntimeResult_),               \
                         cudaGetErrorString(checkRuntimeResult_), __FILE__, __LINE__);                               \
            std::exit(EXIT_FAILURE);                                                                                 \
        }                                                                                                            \
    } while (0)

namespace interop {

// The two APIs share one virtual address space: unified addressing "is automatically
// enabled in 64-bit processes" (cuda.h; CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING says it per
// device), so a device address is the same number in both. The driver
// spells it as an integer (CUdeviceptr, 64 bits), the runtime as a typed pointer; the
// cast goes through uintptr_t, the integer type made to hold a pointer. Nothing is
// copied or translated: it is the same allocation.
inline float* asRuntimePointer(CUdeviceptr address) {
    return reinterpret_cast<float*>(static_cast<std::uintptr_t>(address));
}
inline CUdeviceptr asDriverAddress(const void* pointer) {
    return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(pointer));
}

// How many of the values match what the host computed. The values are small
// integers, exact in float, so the comparison is exact.
inline int countMatching(const std::vector<float>& got, const std::vector<float>& expected) {
    int matching = 0;
    for (size_t i = 0; i < got.size(); ++i) matching += got[i] == expected[i] ? 1 : 0;
    return matching;
}

// The primary context's "active" flag: set while it is initialised (someone retained
// it, or the runtime started in it), cleared by a reset or the last release. Its flags
// word (the same call answers both) goes to *flags when asked for.
inline bool primaryContextActive(CUdevice device, unsigned int* flags = nullptr) {
    unsigned int stateFlags = 0;
    int active = 0;
    CHECK_DRIVER(cuDevicePrimaryCtxGetState(device, &stateFlags, &active));
    if (flags != nullptr) *flags = stateFlags;
    return active != 0;
}

// What a worker thread hands back to main instead of exiting. CHECK_DRIVER and CHECK_RUNTIME
// end the process with std::exit, which must not be called from a worker thread: it runs the
// process's exit handlers (the runtime's teardown among them) while main may still be using
// CUDA. The worker records the first call that failed and its error; main reports it.
struct WorkerStatus {
    const char* failedCall = nullptr;  // nullptr: every call succeeded
    const char* error = "";
    bool driver(CUresult result, const char* call) {
        if (result != CUDA_SUCCESS && failedCall == nullptr) {
            failedCall = call;
            error = course::driverErrorName(result);
        }
        return result == CUDA_SUCCESS;
    }
    bool runtime(cudaError_t result, const char* call) {
        if (result != cudaSuccess && failedCall == nullptr) {
            failedCall = call;
            error = cudaGetErrorName(result);
        }
        return result == cudaSuccess;
    }
};

inline const char* yesNo(bool value) {
    return value ? "yes" : "no";
}

}  // namespace interop
