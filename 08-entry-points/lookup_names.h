// lookup_names.h — what a cuGetProcAddress answer was, in words: the status's name, and the
// exported name of libcuda.so.1 that the returned pointer belongs to (found with dlsym).
// No lookups of its own: main.cpp asks, these functions only name the answers.
#pragma once

#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "../common/check_driver.h"
#include "../common/cuda_compat.h"  // CUdriverProcAddressQueryResult before CUDA 12.0

namespace lesson08 {

inline const char* statusName(CUdriverProcAddressQueryResult status) {
    switch (status) {
        case CU_GET_PROC_ADDRESS_SUCCESS: return "CU_GET_PROC_ADDRESS_SUCCESS";
        case CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND: return "CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND";
        case CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT: return "CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT";
        default: return "(unknown status)";
    }
}

// One cuGetProcAddress answer: the call's result, the pointer, the symbol status.
struct Lookup {
    CUresult result = CUDA_SUCCESS;
    void* function = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
};

// The exported name of libcuda.so.1 at this address: the base name, its _v2.._v4
// versions, and their per-thread forms (_ptsz for stream functions, _ptds for the
// synchronous ones). Empty when none matches.
inline std::string exportedName(void* library, const std::string& base, void* function) {
    for (const char* version : {"", "_v2", "_v3", "_v4"}) {
        for (const char* perThread : {"", "_ptsz", "_ptds"}) {
            const std::string name = base + version + perThread;
            if (dlsym(library, name.c_str()) == function) return name;
        }
    }
    return "";
}

// What a lookup gave, in words: the function's exported name, or why there is none.
inline std::string describe(void* library, const std::string& base, const Lookup& answer) {
    if (answer.result != CUDA_SUCCESS) return course::driverErrorName(answer.result);
    if (answer.function == nullptr) return std::string("CUDA_SUCCESS, pointer NULL, ") + statusName(answer.status);
    const std::string name = exportedName(library, base, answer.function);
    if (!name.empty()) return name;
    char address[32];
    std::snprintf(address, sizeof(address), "%p", answer.function);
    return std::string(address) + " (matches no exported name)";
}

}  // namespace lesson08
