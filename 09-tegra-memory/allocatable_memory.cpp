// Lesson 09, program 4 — how much can the GPU still allocate?
//
// A dGPU answers with cuMemGetInfo: the free part of its own DRAM. An iGPU shares DRAM
// with the CPU, and the kernel can move host pages to swap to make room, so the CUDA
// for Tegra application note estimates it from /proc/meminfo (meminfo_estimate.h,
// which also lists where that estimate is rough). The kernel's own MemAvailable is
// printed beside it.
//
//   allocatable_memory [--device N]
#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "meminfo_estimate.h"
#include "tegra_device.h"

using tegra::gib;

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;

    course::printStep(1, "device and context");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device name: %s\n", name);
    const int integrated = tegra::attribute(device, CU_DEVICE_ATTRIBUTE_INTEGRATED);
    std::printf("attribute CU_DEVICE_ATTRIBUTE_INTEGRATED: %d\n", integrated);
    CUcontext context = nullptr;  // cuMemGetInfo answers for the current context's device
    CHECK_DRIVER(course::ctxCreate(&context, 0, device));

    course::printStep(2, "what the driver says: cuMemGetInfo");
    size_t freeBytes = 0, totalBytes = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &totalBytes));
    std::printf("cuMemGetInfo free: %.2f GiB\n", gib(freeBytes));
    std::printf("cuMemGetInfo total: %.2f GiB\n", gib(totalBytes));
    course::Verdict verdict;
    verdict.check("cuMemGetInfo reports some memory", totalBytes > 0);
    verdict.check("cuMemGetInfo free within total", freeBytes <= totalBytes);

    // Step 3: the note's estimate, computed from the text of /proc/meminfo.
    course::printStep(3, "the application note's estimate from /proc/meminfo");
    bool estimated = false;
    if (const auto text = course::readFile("/proc/meminfo"); !text) {
        std::printf("section meminfo estimate: SKIP (/proc/meminfo cannot be read)\n");
    } else if (const meminfo::Result result = meminfo::estimateAllocatable(*text); !result.estimate) {
        std::printf("meminfo estimate: none (%s)\n", result.reason.c_str());
    } else {
        const meminfo::Estimate& e = *result.estimate;
        std::printf("meminfo MemTotal: %.2f GiB\n", gib(e.totalPhysicalBytes));
        std::printf("meminfo used (MemTotal - MemFree, page cache included): %.2f GiB\n", gib(e.usedPhysicalBytes));
        std::printf("meminfo SwapFree: %.2f GiB\n", gib(e.freeSwapBytes));
        std::printf("meminfo NvMapMemUsed present: %s\n", tegra::yesNo(e.nvMapPresent));
        std::printf("device allocated (NvMapMemUsed): %.2f GiB\n", gib(e.deviceAllocatedBytes));
        std::printf("host allocated: %.2f GiB\n", gib(e.hostAllocatedBytes));
        std::printf("estimate branch: %s\n", meminfo::branchName(e.branch));
        std::printf("estimate of device-allocatable memory (an estimate, not a bound): %.2f GiB\n",
                    gib(e.allocatableBytes));
        if (e.availableBytes) {
            std::printf("meminfo MemAvailable (the kernel's estimate, without swap): %.2f GiB\n",
                        gib(*e.availableBytes));
        } else {
            std::printf("meminfo MemAvailable: not reported by this kernel\n");
        }
        estimated = true;
    }
    // The estimate needs a Linux /proc/meminfo with the fields the note uses.
    verdict.check("the note's estimate computed from /proc/meminfo", estimated);

    // Step 4: which number to trust on this device.
    course::printStep(4, "why they differ");
    if (integrated) {
        std::printf(
            "why they differ: cuMemGetInfo ignores swap, which the CPU can page host memory out to; the "
            "estimate counts swap but also page cache as used, so read it beside MemAvailable\n");
    } else {
        std::printf(
            "why they differ: here they measure different memories: cuMemGetInfo is the GPU's own DRAM, "
            "/proc/meminfo the host's; the estimate is meaningful only for an iGPU\n");
    }
    std::printf("QNX note: QNX has no swap, so there cuMemGetInfo's free is itself a fair estimate\n");

    course::printStep(5, "release and check");
    CHECK_DRIVER(cuCtxDestroy(context));
    return verdict.finish();
}
