// driver_env.h — the environment variables that steer the driver's module loading, as this
// process sees them. No header names them (cuda.h: loading mode "is controlled by
// CUDA_MODULE_LOADING env variable"); NVIDIA's CUDA documentation lists them among its
// environment variables. The programs set and print them before cuInit.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace lesson06 {

// One line per variable: "NAME: value", or "NAME: (not set)".
//   CUDA_DISABLE_PTX_JIT=1      the driver compiles no PTX: PTX modules are refused, and a
//                               fatbin loads only if it holds SASS for this GPU
//   CUDA_MODULE_LOADING=EAGER   or LAZY: cuModuleGetLoadingMode reports which; what LAZY defers
//                               is described in the Programming Guide's lazy loading section
//   CUDA_CACHE_DISABLE=1        no JIT cache (~/.nv/ComputeCache): every PTX load compiles
inline void printDriverEnvironment() {
    for (const char* name : {"CUDA_DISABLE_PTX_JIT", "CUDA_MODULE_LOADING", "CUDA_CACHE_DISABLE"}) {
        const char* value = std::getenv(name);
        std::printf("%s: %s\n", name, value != nullptr ? value : "(not set)");
    }
}

// Sets CUDA_CACHE_DISABLE=1 for this process unless the user set it, before cuInit, and says
// who chose. With the cache on, a PTX compiled before may come from ~/.nv/ComputeCache, with
// no JIT run and empty logs; what CUDA_DISABLE_PTX_JIT=1 does to such a cached PTX no header
// says. With the cache off neither question arises.
inline void disableJitCacheUnlessChosen() {
    const bool chosenByUser = std::getenv("CUDA_CACHE_DISABLE") != nullptr;
    if (!chosenByUser) setenv("CUDA_CACHE_DISABLE", "1", 1);
    std::printf("CUDA_CACHE_DISABLE chosen by: %s\n", chosenByUser ? "the environment" : "this program");
}

}  // namespace lesson06
