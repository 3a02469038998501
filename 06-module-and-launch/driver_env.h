// driver_env.h — the environment variables that steer the driver's module loading, as this
// process sees them. The driver reads them once, in cuInit: print them before it.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace lesson06 {

// One line per variable: "NAME: value", or "NAME: (not set)".
//   CUDA_DISABLE_PTX_JIT=1      the driver compiles no PTX: PTX modules are refused, and a
//                               fatbin loads only if it holds SASS for this GPU
//   CUDA_MODULE_LOADING=EAGER   every kernel of a module reaches the GPU inside cuModuleLoad*
//                   =LAZY       only when first asked for (the default since CUDA 12.2)
//   CUDA_CACHE_DISABLE=1        no JIT cache (~/.nv/ComputeCache): every PTX load compiles
inline void printDriverEnvironment() {
    for (const char* name : {"CUDA_DISABLE_PTX_JIT", "CUDA_MODULE_LOADING", "CUDA_CACHE_DISABLE"}) {
        const char* value = std::getenv(name);
        std::printf("%s: %s\n", name, value != nullptr ? value : "(not set)");
    }
}

// Sets CUDA_CACHE_DISABLE=1 for this process unless the user set it, before cuInit, and says
// who chose. With the cache on, a PTX compiled before comes from ~/.nv/ComputeCache: no JIT
// runs, so its logs are empty, and even CUDA_DISABLE_PTX_JIT=1 lets that PTX load.
inline void disableJitCacheUnlessChosen() {
    const bool chosenByUser = std::getenv("CUDA_CACHE_DISABLE") != nullptr;
    if (!chosenByUser) setenv("CUDA_CACHE_DISABLE", "1", 1);
    std::printf("CUDA_CACHE_DISABLE chosen by: %s\n", chosenByUser ? "the environment" : "this program");
}

}  // namespace lesson06
