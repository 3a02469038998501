// Lesson 06, program 1 of 6 — a first kernel: load it, launch it, check every element.
//
// The whole path from kernels/vector_ops.cu to a checked result: the primary context, the
// fatbin the Makefile built, one kernel found by name, three buffers, one launch, one comparison.
//
//   first_kernel [--device N]
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

int main(int argc, char** argv) {
    course::Arguments options;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", options)) return course::kExitUsage;
    course::Verdict verdict;

    // Step 1: the primary context is the one cuda.h says is shared with the CUDA runtime API; the
    // runtime (and libraries on it) use it where no other context is current (lesson 04). Retaining
    // it does not make it current.
    course::printStep(1, "driver, device and the primary context");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, options.deviceOrdinal()));
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));

    // Step 2: the fatbin is looked for next to this executable, whatever the working directory.
    course::printStep(2, "load the module");
    const std::string fatbinPath = course::kernelPath("vector_ops.fatbin");
    CUmodule module = nullptr;
    if (REPORT_DRIVER(cuModuleLoad(&module, fatbinPath.c_str())) != CUDA_SUCCESS) {
        std::fprintf(stderr, "cannot load %s: make build-06 builds it next to the program\n", fatbinPath.c_str());
        CHECK_DRIVER(cuCtxSetCurrent(nullptr));  // an early return releases what it holds too
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
        return EXIT_FAILURE;
    }
    std::printf("cuModuleLoad(kernels/vector_ops.fatbin): loaded\n");

    // Step 3: the kernel is declared extern "C", so its name in the module is plain "vectorAdd".
    course::printStep(3, "find the kernel by name");
    CUfunction vectorAdd = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&vectorAdd, module, "vectorAdd"));
    std::printf("cuModuleGetFunction(vectorAdd): found\n");

    // Step 4: whole numbers whose sum stays below 2^24 add exactly in float (24 significant bits),
    // so the check below is equality. c starts as NaN: a launch that writes nothing cannot pass.
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
    CHECK_DRIVER(cuMemsetD32(dC, 0x7fc00000u, n));  // the bits of a float NaN in every element
    std::printf("elements: %llu\n", n);

    // Step 5: one pointer per kernel parameter. The driver copies each parameter from where its
    // pointer points, as many bytes as the kernel's image gives that parameter, so each variable
    // must have the parameter's exact type: CUdeviceptr for a pointer, unsigned long long for n.
    // One thread per element, the usual sizing: n / kThreads blocks, rounded up.
    course::printStep(5, "launch");
    void* args[] = {&dA, &dB, &dC, &n};
    constexpr unsigned int kThreads = 256;
    const unsigned int blocks = static_cast<unsigned int>((n + kThreads - 1) / kThreads);
    CHECK_DRIVER(cuLaunchKernel(vectorAdd, blocks, 1, 1, kThreads, 1, 1, 0, nullptr, args, nullptr));
    // cuCtxSynchronize waits for the context's work and "returns an error if one of the preceding
    // tasks failed": a kernel that faults is reported here, before the copy.
    CHECK_DRIVER(cuCtxSynchronize());
    std::printf("launch: %u blocks x %u threads\n", blocks, kThreads);
    // vectorAdd's grid-stride loop (four floats a thread where it can) covers n with any grid,
    // so the result cannot show a grid sized wrong: this looks at the grid itself. Enough threads
    // for every element, and not a whole block more.
    const unsigned long long threads = static_cast<unsigned long long>(blocks) * kThreads;
    verdict.check("one thread per element", threads >= n && threads - kThreads < n);

    // Step 6: every element, against the sum computed on the host.
    course::printStep(6, "copy back and check");
    CHECK_DRIVER(cuMemcpyDtoH(c.data(), dC, bytes));
    unsigned long long mismatch = 0;
    while (mismatch < n && c[mismatch] == a[mismatch] + b[mismatch]) ++mismatch;
    if (mismatch == n) std::printf("first mismatch: none\n");
    else std::printf("first mismatch: element %llu is %g, not %g\n", mismatch, c[mismatch], a[mismatch] + b[mismatch]);
    verdict.check("every element is a + b", mismatch == n);

    // Step 7: release in reverse order of creation. This process held the primary context once,
    // so its release is the last: cuda.h, "The context is automatically reset once the last
    // reference to it is released"; lesson 04 checks that cuDevicePrimaryCtxGetState then reports
    // it inactive, and so does this step.
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
