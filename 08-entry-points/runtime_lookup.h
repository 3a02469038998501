// runtime_lookup.h — lesson 08's step 8: the runtime's own front door to the driver's
// entry points (cudaGetDriverEntryPointByVersion, CUDA 12.5+; cudaGetDriverEntryPoint before).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdio>

#include "../common/course_util.h"
#include "lookup_names.h"

namespace lesson08 {

// Step 8: cuMemAlloc through the runtime, compared with the driver's answer at 3020. Checks
// that the runtime gave a function; which one it is is printed, not judged, and never called
// (cudaGetDriverEntryPoint takes no version: its ABI is the runtime's, not a typedef's).
inline void lookUpThroughRuntime(void* library, void* driverMemAlloc, course::Verdict& verdict) {
    void* runtimeMemAlloc = nullptr;
#if CUDART_VERSION >= 12050
    const char* runtimeCall = "cudaGetDriverEntryPointByVersion(\"cuMemAlloc\", 3020)";
    const cudaError_t runtimeResult =
        cudaGetDriverEntryPointByVersion("cuMemAlloc", &runtimeMemAlloc, 3020, cudaEnableDefault);
#else
    // Older toolkits: the ABI is the one of the runtime's own version (CUDART_VERSION).
    // cudaGetDriverEntryPoint is deprecated from CUDA 13.0, where this branch is not compiled.
    const char* runtimeCall = "cudaGetDriverEntryPoint(\"cuMemAlloc\")";
    const cudaError_t runtimeResult = cudaGetDriverEntryPoint("cuMemAlloc", &runtimeMemAlloc, cudaEnableDefault);
#endif
    if (runtimeResult != cudaSuccess) {
        std::printf("%s: %s\n", runtimeCall, cudaGetErrorName(runtimeResult));
    } else if (runtimeMemAlloc == nullptr) {
        std::printf("%s: cudaSuccess, pointer NULL\n", runtimeCall);
    } else {
        Lookup runtimeAnswer;
        runtimeAnswer.function = runtimeMemAlloc;
        std::printf("%s: %s\n", runtimeCall, describe(library, "cuMemAlloc", runtimeAnswer).c_str());
    }
    const bool sameAsDriver = runtimeMemAlloc == driverMemAlloc;
    std::printf("same function as cuGetProcAddress(\"cuMemAlloc\", 3020): %s\n", sameAsDriver ? "yes" : "no");
    verdict.check("runtime gives a cuMemAlloc entry point", runtimeResult == cudaSuccess && runtimeMemAlloc != nullptr);
}

}  // namespace lesson08
