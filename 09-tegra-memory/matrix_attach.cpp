// Lesson 09, program 3 — the CUDA for Tegra application note's matrix multiply with
// attach hints: inputs attached to the host while the CPU fills them, attached
// globally for the kernel, the result attached back to the host before the CPU reads it.
//
//   matrix_attach [--device N]
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "tegra_device.h"

using tegra::hostView;

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;

    course::printStep(1, "device, context, kernel, stream");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device name: %s\n", name);
    if (!tegra::attribute(device, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)) {
        std::printf(
            "Result = SKIP (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 0: no managed memory on this device, as on a "
            "dGPU attached to Tegra)\n");
        return course::kExitNotApplicable;
    }
    CUcontext context = nullptr;
    CHECK_DRIVER(course::ctxCreate(&context, 0, device));
    const auto fatbin = course::readFile(course::kernelPath("tegra_kernels.fatbin"));
    if (!fatbin) return EXIT_FAILURE;
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoadData(&module, fatbin->data()));
    CUfunction matrixMul = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&matrixMul, module, "matrixMul"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_DEFAULT));

    // Step 2: p and q start attached to the host: the CPU may write them even on a
    // device with concurrentManagedAccess = 0 while other GPU work runs. The host keeps
    // its own copy of the inputs for the check, so that it never reads p or q again
    // after they were attached globally.
    course::printStep(2, "inputs attached to the host while the CPU fills them");
    int hp = 64, wp = 48, hq = 48, wq = 32;
    CUdeviceptr p = 0, q = 0, r = 0;
    CHECK_DRIVER(cuMemAllocManaged(&p, sizeof(int) * hp * wp, CU_MEM_ATTACH_HOST));
    CHECK_DRIVER(cuMemAllocManaged(&q, sizeof(int) * hq * wq, CU_MEM_ATTACH_HOST));
    CHECK_DRIVER(cuMemAllocManaged(&r, sizeof(int) * hp * wq, CU_MEM_ATTACH_GLOBAL));
    unsigned int state = 12345u;  // a small LCG: the same "random" values on every run
    auto next = [&state]() { return static_cast<int>((state = state * 1103515245u + 12345u) >> 16) % 16; };
    std::vector<int> hostP(static_cast<size_t>(hp) * wp), hostQ(static_cast<size_t>(hq) * wq);
    for (size_t i = 0; i < hostP.size(); ++i) hostView(p)[i] = hostP[i] = next();
    for (size_t i = 0; i < hostQ.size(); ++i) hostView(q)[i] = hostQ[i] = next();
    std::printf("p: %dx%d, q: %dx%d, filled by the CPU\n", hp, wp, hq, wq);

    // Step 3: attached globally (the prefetch-to-GPU hint), the kernel, the note's
    // optional extra synchronisation (it keeps the driver's callback threads out of the
    // next attach call, for predictable timing), then r attached to the host.
    course::printStep(3, "attach globally, multiply, attach the result to the host");
    CHECK_DRIVER(cuStreamAttachMemAsync(stream, p, 0, CU_MEM_ATTACH_GLOBAL));
    CHECK_DRIVER(cuStreamAttachMemAsync(stream, q, 0, CU_MEM_ATTACH_GLOBAL));
    void* params[] = {&p, &q, &r, &hp, &hq, &wp, &wq};
    CHECK_DRIVER(cuLaunchKernel(matrixMul, (wq + 15) / 16, (hp + 15) / 16, 1, 16, 16, 1, 0, stream, params, nullptr));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    CHECK_DRIVER(cuStreamAttachMemAsync(stream, r, 0, CU_MEM_ATTACH_HOST));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    std::printf("in stream order: p, q attached GLOBAL; matrixMul; synchronise; r attached HOST; synchronise\n");

    // Step 4: r is the host's again; the CPU checks every element against its own inputs.
    course::printStep(4, "check on the CPU");
    int mismatches = 0;
    for (int row = 0; row < hp; ++row)
        for (int col = 0; col < wq; ++col) {
            int sum = 0;
            for (int k = 0; k < wp; ++k) sum += hostP[row * wp + k] * hostQ[k * wq + col];
            mismatches += sum != hostView(r)[row * wq + col];
        }
    std::printf("r[0][0..3]: %d %d %d %d\n", hostView(r)[0], hostView(r)[1], hostView(r)[2], hostView(r)[3]);
    std::printf("matrix multiply (%dx%d * %dx%d) matches the CPU: %s\n", hp, wp, hq, wq, tegra::yesNo(mismatches == 0));
    course::Verdict verdict;
    verdict.check("matrix multiply matches the CPU", mismatches == 0);

    course::printStep(5, "release");
    CHECK_DRIVER(cuMemFree(r));
    CHECK_DRIVER(cuMemFree(q));
    CHECK_DRIVER(cuMemFree(p));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuCtxDestroy(context));
    return verdict.finish();
}
