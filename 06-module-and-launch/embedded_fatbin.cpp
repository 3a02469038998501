// Lesson 06, program 2 of 6 — the exercise solved: the fatbin inside the executable.
//
// first_kernel, except that the module comes from memory: the build turns vector_ops.fatbin
// into a C array with the toolkit's bin2c (kernels/vector_ops_fatbin.h, generated next to the
// fatbin), this file includes it, and cuModuleLoadData loads it. One file to ship, no kernels/.
//
//   embedded_fatbin [--device N]
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
// Written at build time by: bin2c --const --static --type longlong --name kVectorOpsFatbin
// vector_ops.fatbin. cuda.h asks of a cuModuleLoadData image only that it be a cubin or fatbin
// as nvcc writes it (or NUL-terminated PTX), and says nothing of its alignment. An array of
// unsigned long long is 8-byte aligned, as the toolkit's own wrapper for an embedded fatbin
// (fatbinary_section.h) points at its data: `const unsigned long long* data`.
#include "vector_ops_fatbin.h"

int main(int argc, char** argv) {
    course::Arguments options;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", options)) return course::kExitUsage;

    // Step 1: the primary context, as in first_kernel (the one shared with the CUDA runtime API).
    course::printStep(1, "driver, device and the primary context");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, options.deviceOrdinal()));
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));

    // Step 2: the image is already in memory, in this executable: no file is opened.
    course::printStep(2, "load the module from the executable");
    std::printf("embedded fatbin: %zu bytes\n", sizeof(kVectorOpsFatbin));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoadData(&module, kVectorOpsFatbin));
    std::printf("cuModuleLoadData(embedded fatbin): loaded\n");

    course::printStep(3, "find the kernel by name");
    CUfunction vectorAdd = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&vectorAdd, module, "vectorAdd"));
    std::printf("cuModuleGetFunction(vectorAdd): found\n");

    course::printStep(4, "inputs on the device");
    unsigned long long n = 1ull << 20;
    const std::size_t bytes = n * sizeof(float);
    std::vector<float> a(n), b(n), c(n);
    for (unsigned long long i = 0; i < n; ++i) {
        a[i] = static_cast<float>(i);
        b[i] = static_cast<float>(2 * i);
    }
    CUdeviceptr dA = 0, dB = 0, dC = 0;
    CHECK_DRIVER(cuMemAlloc(&dA, bytes));
    CHECK_DRIVER(cuMemAlloc(&dB, bytes));
    CHECK_DRIVER(cuMemAlloc(&dC, bytes));
    CHECK_DRIVER(cuMemcpyHtoD(dA, a.data(), bytes));
    CHECK_DRIVER(cuMemcpyHtoD(dB, b.data(), bytes));
    CHECK_DRIVER(cuMemsetD32(dC, 0x7fc00000u, n));  // NaN everywhere: a launch that writes nothing fails
    std::printf("elements: %llu\n", n);

    // Step 5: the same launch as first_kernel's (each kernelParams entry of the parameter's type).
    course::printStep(5, "launch");
    void* args[] = {&dA, &dB, &dC, &n};
    const unsigned int blocks = static_cast<unsigned int>((n + 255) / 256);
    CHECK_DRIVER(cuLaunchKernel(vectorAdd, blocks, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
    CHECK_DRIVER(cuCtxSynchronize());
    std::printf("launch: %u blocks x 256 threads\n", blocks);

    course::printStep(6, "copy back and check");
    CHECK_DRIVER(cuMemcpyDtoH(c.data(), dC, bytes));
    unsigned long long mismatch = 0;
    while (mismatch < n && c[mismatch] == a[mismatch] + b[mismatch]) ++mismatch;
    if (mismatch == n) std::printf("first mismatch: none\n");
    else std::printf("first mismatch: element %llu is %g, not %g\n", mismatch, c[mismatch], a[mismatch] + b[mismatch]);
    course::Verdict verdict;
    verdict.check("every element is a + b", mismatch == n);

    // Step 7: as in first_kernel, the last release leaves the primary context inactive.
    course::printStep(7, "release");
    CHECK_DRIVER(cuMemFree(dC));
    CHECK_DRIVER(cuMemFree(dB));
    CHECK_DRIVER(cuMemFree(dA));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: 3 buffers, 1 module, the primary context\n");
    unsigned int primaryFlags = 0;
    int active = -1;
    CHECK_DRIVER(cuDevicePrimaryCtxGetState(device, &primaryFlags, &active));
    std::printf("primary context active after the release: %d\n", active);
    verdict.check("primary context inactive after its release", active == 0);
    return verdict.finish();
}
