// iterate_run.h — templates_and_lto's step 5 for one linked module: the iterate kernel's
// registers and local memory as the driver reports them, its result against the host's, and
// its time.
#pragma once

#include <cuda.h>

#include <cstdint>
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

// The host's step, the same as step.cu's: x * 1664525 + 1013904223 + k, modulo 2^32. The
// multiplier is odd, so each step is a bijection: two different inputs never meet, and the
// result depends on the element read and on every step taken.
inline std::uint32_t hostStep(std::uint32_t x, int k) {
    return x * 1664525u + 1013904223u + static_cast<std::uint32_t>(k);
}

// iterate on 2^20 unsigned integers in[i] = i, 2000 steps each. The time is the kernel's alone:
// events recorded around one launch, the median of 7 launches after one untimed one.
inline IterateRun runIterate(CUmodule module) {
    constexpr int kCount = 1 << 20;
    constexpr int kSteps = 2000;
    CUfunction iterate = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&iterate, module, "iterate"));
    IterateRun run;
    CHECK_DRIVER(cuFuncGetAttribute(&run.registers, CU_FUNC_ATTRIBUTE_NUM_REGS, iterate));
    CHECK_DRIVER(cuFuncGetAttribute(&run.localBytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, iterate));
    std::vector<std::uint32_t> in(kCount);
    for (int i = 0; i < kCount; ++i) in[i] = static_cast<std::uint32_t>(i);  // every element its own value
    CUdeviceptr din = 0;
    CUdeviceptr dout = 0;
    CHECK_DRIVER(cuMemAlloc(&din, kCount * sizeof(std::uint32_t)));
    CHECK_DRIVER(cuMemAlloc(&dout, kCount * sizeof(std::uint32_t)));
    CHECK_DRIVER(cuMemcpyHtoD(din, in.data(), kCount * sizeof(std::uint32_t)));
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
    std::vector<std::uint32_t> out(kCount);
    CHECK_DRIVER(cuMemcpyDtoH(out.data(), dout, kCount * sizeof(std::uint32_t)));
    // Integer arithmetic modulo 2^32: exact on both sides. The 2000 steps together are one affine
    // map x -> A x + B (mod 2^32), the same for every element, so the host runs the steps twice,
    // from 0 (which gives B) and from 1 (A + B), and then checks every element bit for bit.
    std::uint32_t fromZero = 0;
    std::uint32_t fromOne = 1;
    for (int k = 0; k < kSteps; ++k) {
        fromZero = hostStep(fromZero, k);
        fromOne = hostStep(fromOne, k);
    }
    const std::uint32_t b = fromZero;
    const std::uint32_t a = fromOne - fromZero;
    run.exact = true;
    for (int i = 0; i < kCount; ++i) run.exact = run.exact && out[i] == a * in[i] + b;
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    CHECK_DRIVER(cuMemFree(dout));
    CHECK_DRIVER(cuMemFree(din));
    return run;
}

}  // namespace lesson18
