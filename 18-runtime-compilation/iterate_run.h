// iterate_run.h — templates_and_lto's step 5 for one linked module: the iterate kernel's
// registers and local memory as the driver reports them, its result against the host's, and
// its time.
#pragma once

#include <cuda.h>

#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace lesson18 {

struct IterateRun {
    int registers = 0;
    int localBytes = 0;
    bool exact = false;
    double milliseconds = 0.0;
};

// iterate on 2^20 floats, 2000 steps each. The time is the kernel's alone: events recorded
// around one launch, the median of 7 launches after one untimed one.
inline IterateRun runIterate(CUmodule module) {
    constexpr int kCount = 1 << 20;
    constexpr int kSteps = 2000;
    CUfunction iterate = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&iterate, module, "iterate"));
    IterateRun run;
    CHECK_DRIVER(cuFuncGetAttribute(&run.registers, CU_FUNC_ATTRIBUTE_NUM_REGS, iterate));
    CHECK_DRIVER(cuFuncGetAttribute(&run.localBytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, iterate));
    std::vector<float> in(kCount);
    for (int i = 0; i < kCount; ++i) in[i] = static_cast<float>(i % 1000);
    CUdeviceptr din = 0;
    CUdeviceptr dout = 0;
    CHECK_DRIVER(cuMemAlloc(&din, kCount * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&dout, kCount * sizeof(float)));
    CHECK_DRIVER(cuMemcpyHtoD(din, in.data(), kCount * sizeof(float)));
    CUevent start = nullptr;
    CUevent stop = nullptr;
    CHECK_DRIVER(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    int count = kCount;
    int steps = kSteps;
    void* params[] = {&din, &dout, &count, &steps};
    std::vector<double> samples;
    for (int i = -1; i < 7; ++i) {
        CHECK_DRIVER(cuEventRecord(start, nullptr));
        CHECK_DRIVER(cuLaunchKernel(iterate, kCount / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
        CHECK_DRIVER(cuEventRecord(stop, nullptr));
        CHECK_DRIVER(cuEventSynchronize(stop));
        float milliseconds = 0.0f;
        CHECK_DRIVER(cuEventElapsedTime(&milliseconds, start, stop));
        if (i >= 0) samples.push_back(milliseconds);
    }
    run.milliseconds = course::median(samples);
    std::vector<float> out(kCount);
    CHECK_DRIVER(cuMemcpyDtoH(out.data(), dout, kCount * sizeof(float)));
    // The host runs the same steps; x * 0.5f is exact, so fused multiply-add or not, one rounding.
    std::vector<float> expected(1000);
    for (int v = 0; v < 1000; ++v) {
        float x = static_cast<float>(v);
        for (int k = 0; k < kSteps; ++k) x = x * 0.5f + static_cast<float>(k & 3);
        expected[v] = x;
    }
    run.exact = true;
    for (int i = 0; i < kCount; ++i) run.exact = run.exact && out[i] == expected[i % 1000];
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    CHECK_DRIVER(cuMemFree(dout));
    CHECK_DRIVER(cuMemFree(din));
    return run;
}

}  // namespace lesson18
