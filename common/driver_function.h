// driver_function.h — a driver function resolved at run time, for the graphics-interop calls
// of lessons 10 and 27.
//
// The x86-64 stub libcuda.so that programs link against does not export the graphics-interop
// functions (cuEGL*, cuGraphicsEGL*, cuGraphicsGL*, cuGLGetDevices); the real driver does, and
// an aarch64 Tegra toolkit's stub exports the EGL ones too. So calling them directly fails to
// link here. Looking them up with cuGetProcAddress (lesson 08) links everywhere and turns "this
// driver lacks it" into a printed answer.
#pragma once

#include <cuda.h>

#include <cstdio>

#include "check_driver.h"
#include "cuda_compat.h"

namespace course {

// Resolves `symbol` into `function` and prints "driver entry point SYMBOL: found / not found".
// `abiVersion` is the version its PFN typedef names (PFN_..._v7000 -> 7000): cuGetProcAddress
// returns the newest ABI not newer than that, so the pointer has the type it is cast to even
// after a later driver adds another ABI under the same name.
template <typename Function>
bool resolveDriverFunction(const char* symbol, int abiVersion, Function& function) {
    void* address = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    // A function this driver lacks is an answer, not an error: cuGetProcAddress returns
    // CUDA_SUCCESS with a NULL pointer (and, from CUDA 12.0, SYMBOL_NOT_FOUND in `status`).
    CHECK_DRIVER(course::getProcAddress(symbol, &address, abiVersion, CU_GET_PROC_ADDRESS_DEFAULT, &status));
    const bool found = status == CU_GET_PROC_ADDRESS_SUCCESS && address != nullptr;
    function = found ? reinterpret_cast<Function>(address) : nullptr;
    std::printf("driver entry point %s: %s\n", symbol, found ? "found" : "not found");
    return found;
}

}  // namespace course
