// function_checks.h — what load_and_launch checks about a function taken from a loaded module:
// which code the driver took for it, and whether vectorAdd through it gives the host's sums.
// Every module it loads (fatbin, cubin, PTX, library) holds the same kernels: each must pass.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <vector>

#include "../common/check_driver.h"

namespace lesson06 {

// Which code the driver took for a function: the SASS architecture it runs (BINARY_VERSION)
// and the PTX ISA target that SASS was compiled from (PTX_VERSION), both as major * 10 + minor.
inline void printCodeTaken(const char* label, CUfunction function) {
    int binary = 0;
    int ptx = 0;
    CHECK_DRIVER(cuFuncGetAttribute(&binary, CU_FUNC_ATTRIBUTE_BINARY_VERSION, function));
    CHECK_DRIVER(cuFuncGetAttribute(&ptx, CU_FUNC_ATTRIBUTE_PTX_VERSION, function));
    std::printf("%s runs: SASS for sm_%d, compiled from compute_%d\n", label, binary, ptx);
}

// x and y on the device and on the host, z on the device, and the launch shape for vectorAdd.
struct VectorAddCheck {
    CUdeviceptr x, y, z;
    const std::vector<float>& hostX;
    const std::vector<float>& hostY;
    int gridBlocks, blockThreads;

    // z = x + y through one vectorAdd handle. The host does the same float additions, so the
    // sums must be equal bit for bit, whichever module the function came from.
    bool run(CUfunction vectorAdd, const char* how) const {
        const int count = static_cast<int>(hostX.size());
        unsigned long long n = hostX.size();
        CUdeviceptr a = x, b = y, c = z;
        void* params[] = {&a, &b, &c, &n};
        CHECK_DRIVER(cuMemsetD32(z, 0, hostX.size()));
        CHECK_DRIVER(cuLaunchKernel(vectorAdd, gridBlocks, 1, 1, blockThreads, 1, 1, 0, nullptr, params, nullptr));
        CHECK_DRIVER(cuCtxSynchronize());
        std::vector<float> hostZ(hostX.size());
        CHECK_DRIVER(cuMemcpyDtoH(hostZ.data(), z, hostZ.size() * sizeof(float)));
        int wrong = 0;
        for (int i = 0; i < count; ++i) wrong += hostZ[i] != hostX[i] + hostY[i];
        std::printf("vector add via %s: %s\n", how, wrong == 0 ? "exact" : "WRONG");
        return wrong == 0;
    }
};

}  // namespace lesson06
