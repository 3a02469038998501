// Lesson 09 — memory on Tegra: shared DRAM, attach hints, and what this device is.
//
// NVIDIA's "CUDA for Tegra" application note explains how an integrated GPU (iGPU)
// that shares DRAM with the CPU changes the choice of memory. This program asks
// the device the questions that decide that choice, runs the note's image pipeline
// the discrete-GPU way and the Tegra way (managed memory + cuStreamAttachMemAsync),
// runs its matrix-multiply example, estimates allocatable memory from /proc/meminfo,
// checks the driver/toolkit pair the way a Jetson upgrade package needs, and shows
// how to detect each feature the note lists as unsupported on Tegra.
//
//   09-tegra-memory [--device N] [--bench]
#include <cuda.h>
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "meminfo_estimate.h"
#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"

namespace {

constexpr int kWidth = 1024;  // the app note's 1024 x 1024 int image: 4 MiB per buffer
constexpr int kHeight = 1024;
constexpr size_t kImageBytes = sizeof(int) * kWidth * kHeight;

// The note's readImage(): the CPU produces the input image.
void readImage(int* image) {
    for (int y = 0; y < kHeight; ++y)
        for (int x = 0; x < kWidth; ++x) image[y * kWidth + x] = (x * 7 + y * 13) & 0xFF;
}

// The note's UseImageonCPU(): the CPU reads every output pixel.
long long useImageOnCpu(const int* image) {
    long long sum = 0;
    for (size_t i = 0; i < static_cast<size_t>(kWidth) * kHeight; ++i) sum += image[i];
    return sum;
}

// k1 -> k2 -> k3 on the CPU, for checking.
std::vector<int> cpuPipeline() {
    std::vector<int> a(static_cast<size_t>(kWidth) * kHeight), b(a.size()), c(a.size()), d(a.size());
    readImage(a.data());
    for (int y = 0; y < kHeight; ++y)
        for (int x = 0; x < kWidth; ++x)
            b[y * kWidth + x] =
                a[y * kWidth + std::max(x - 1, 0)] + a[y * kWidth + x] + a[y * kWidth + std::min(x + 1, kWidth - 1)];
    for (int y = 0; y < kHeight; ++y)
        for (int x = 0; x < kWidth; ++x)
            c[y * kWidth + x] =
                b[std::max(y - 1, 0) * kWidth + x] + b[y * kWidth + x] + b[std::min(y + 1, kHeight - 1) * kWidth + x];
    for (size_t i = 0; i < d.size(); ++i) d[i] = 9 * 255 - c[i];
    return d;
}

// A managed allocation is one address for CPU and GPU: the CUdeviceptr is also a host pointer.
int* hostView(CUdeviceptr managed) {
    return reinterpret_cast<int*>(static_cast<std::uintptr_t>(managed));
}

// Jetson and DRIVE boards describe their SoC in the device tree as "nvidia,tegra...".
bool runningOnTegraSoc() {
    std::ifstream compatible("/proc/device-tree/compatible", std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(compatible)), std::istreambuf_iterator<char>());
    return text.find("nvidia,tegra") != std::string::npos;
}

double gib(std::uint64_t bytes) {
    return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
}

const char* yesNo(bool value) {
    return value ? "yes" : "no";
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const bool bench = args.has("--bench");
    const int passes = bench ? 20 : 3;

    // Step 1: the usual start, plus one created stream: the note's attach hints are
    // stream-ordered operations, and this lesson enqueues them on a stream it owns.
    course::printStep(1, "device, context, kernels, stream");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device name: %s\n", name);
    CUcontext context = nullptr;
    CHECK_DRIVER(course::ctxCreate(&context, 0, device));
    const std::string fatbinPath = course::kernelPath("tegra_kernels.fatbin");
    const auto fatbin = course::readFile(fatbinPath);
    if (!fatbin) return EXIT_FAILURE;
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoadData(&module, fatbin->data()));
    CUfunction k1 = nullptr, k2 = nullptr, k3 = nullptr, matrixMul = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&k1, module, "k1RowSum"));
    CHECK_DRIVER(cuModuleGetFunction(&k2, module, "k2ColumnSum"));
    CHECK_DRIVER(cuModuleGetFunction(&k3, module, "k3Invert"));
    CHECK_DRIVER(cuModuleGetFunction(&matrixMul, module, "matrixMul"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_DEFAULT));
    std::printf("kernels: %s\n", fatbinPath.substr(fatbinPath.rfind('/') + 1).c_str());

    // Step 2: the attributes that decide which memory a program should use.
    course::printStep(2, "attributes that decide the memory choice");
    int integrated = 0, ccMajor = 0, ccMinor = 0, hostRegister = 0, hostPointerForRegistered = 0;
    int pageableAccess = 0, concurrentManaged = 0, managedMemory = 0;
    const struct {
        CUdevice_attribute attribute;
        const char* label;
        int* value;
    } attributes[] = {
        {CU_DEVICE_ATTRIBUTE_INTEGRATED, "CU_DEVICE_ATTRIBUTE_INTEGRATED", &integrated},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR", &ccMajor},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR", &ccMinor},
        {CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, "CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED", &hostRegister},
        {CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
         "CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM", &hostPointerForRegistered},
        {CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, "CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS", &pageableAccess},
        {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, "CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS",
         &concurrentManaged},
        {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, "CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY", &managedMemory},
    };
    for (const auto& a : attributes) {
        CHECK_DRIVER(cuDeviceGetAttribute(a.value, a.attribute, device));
        std::printf("attribute %s: %d\n", a.label, *a.value);
    }
    // Xavier (7.2) was the first Tegra SoC whose iGPU snoops the CPU caches (I/O coherency):
    // from there on pinned memory is cached on the CPU and cuMemHostRegister works.
    const bool ccAtLeast72 = ccMajor > 7 || (ccMajor == 7 && ccMinor >= 2);
    std::printf("compute capability: %d.%d\n", ccMajor, ccMinor);
    std::printf("compute capability >= 7.2 (I/O coherent when it is a Tegra iGPU): %s\n", yesNo(ccAtLeast72));

    // Step 3: the note's table 1. On Tegra one DRAM holds device, host and managed
    // memory; what differs between the kinds is who may cache them.
    course::printStep(3, "app note table 1: caching by memory type");
    std::printf("%-24s | %-38s | %-66s | %s\n", "memory type", "CPU", "iGPU", "Tegra-connected dGPU");
    std::printf("%-24s | %-38s | %-66s | %s\n", "device memory", "not directly accessible", "cached", "cached");
    std::printf("%-24s | %-38s | %-66s | %s\n", "pageable host memory", "cached",
                "cached if pageableMemoryAccess = 1, else not accessible", "not directly accessible");
    std::printf("%-24s | %-38s | %-66s | %s\n", "pinned host memory", "uncached if CC < 7.2, cached if >= 7.2",
                "uncached", "uncached");
    std::printf("%-24s | %-38s | %-66s | %s\n", "registered host memory", "cached",
                "CC >= 7.2 only; cached with sysmem full coherency, else uncached", "uncached");
    std::printf("%-24s | %-38s | %-66s | %s\n", "unified memory", "cached",
                "cached if concurrentManagedAccess = 0, else UVM decides", "not supported");
    const bool tegraSoc = runningOnTegraSoc();
    std::printf("host is a Tegra SoC (device tree 'nvidia,tegra'): %s\n", yesNo(tegraSoc));
    const char* column =
        integrated ? "iGPU" : (tegraSoc ? "Tegra-connected dGPU" : "none (a discrete GPU on a non-Tegra host)");
    std::printf("this device's column: %s\n", column);
    if (integrated) {
        std::printf("this device, pageable host memory: %s\n",
                    pageableAccess ? "cached on the iGPU (pageableMemoryAccess = 1)"
                                   : "not directly accessible on the iGPU (pageableMemoryAccess = 0)");
        std::printf("this device, pinned host memory: %s on the CPU, uncached on the iGPU\n",
                    ccAtLeast72 ? "cached" : "uncached");
        std::printf("this device, registered host memory: %s\n",
                    hostRegister ? "supported" : "not supported (CC < 7.2 or QNX)");
        std::printf("this device, unified memory: %s\n",
                    concurrentManaged ? "UVM driver decides (concurrentManagedAccess = 1, Thor+)"
                                      : "cached on CPU and iGPU, coherence kept by the driver at launch and sync");
    } else {
        std::printf(
            "section iGPU caching of this device: SKIP (CU_DEVICE_ATTRIBUTE_INTEGRATED = 0: this GPU has "
            "its own memory, so table 1's iGPU column does not describe it)\n");
    }

    const unsigned int gridX = (kWidth + 15) / 16, gridY = (kHeight + 15) / 16;
    int width = kWidth, height = kHeight;
    auto launchStage = [&](CUfunction stage, CUdeviceptr in, CUdeviceptr out) {
        void* params[] = {&in, &out, &width, &height};
        CHECK_DRIVER(cuLaunchKernel(stage, gridX, gridY, 1, 16, 16, 1, 0, stream, params, nullptr));
    };
    // Both ways keep the intermediates (k1's and k2's outputs) in device memory: only
    // the GPU touches them, which is the note's rule for device memory.
    CUdeviceptr intermediateB = 0, intermediateC = 0;
    CHECK_DRIVER(cuMemAlloc(&intermediateB, kImageBytes));
    CHECK_DRIVER(cuMemAlloc(&intermediateC, kImageBytes));

    // Step 4: the dGPU way — pinned host buffers so the copies run at full speed
    // (lesson 05), device buffers on the GPU, explicit copies both ways.
    course::printStep(4, "image pipeline, the dGPU way (pinned host + explicit copies)");
    void* pinnedIn = nullptr;
    void* pinnedOut = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&pinnedIn, kImageBytes));
    CHECK_DRIVER(cuMemAllocHost(&pinnedOut, kImageBytes));
    CUdeviceptr deviceIn = 0, deviceOut = 0;
    CHECK_DRIVER(cuMemAlloc(&deviceIn, kImageBytes));
    CHECK_DRIVER(cuMemAlloc(&deviceOut, kImageBytes));
    auto dgpuPass = [&]() {
        readImage(static_cast<int*>(pinnedIn));
        CHECK_DRIVER(cuMemcpyHtoDAsync(deviceIn, pinnedIn, kImageBytes, stream));
        launchStage(k1, deviceIn, intermediateB);
        launchStage(k2, intermediateB, intermediateC);
        launchStage(k3, intermediateC, deviceOut);
        CHECK_DRIVER(cuMemcpyDtoHAsync(pinnedOut, deviceOut, kImageBytes, stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
        return useImageOnCpu(static_cast<const int*>(pinnedOut));
    };
    double dgpuBestMs = 1e30;
    long long dgpuChecksum = 0;
    for (int pass = 0; pass < passes; ++pass) {
        const auto start = std::chrono::steady_clock::now();
        dgpuChecksum = dgpuPass();
        const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
        dgpuBestMs = std::min(dgpuBestMs, took.count());
    }
    const std::vector<int> dgpuResult(static_cast<const int*>(pinnedOut),
                                      static_cast<const int*>(pinnedOut) + kWidth * kHeight);
    std::printf("dGPU way output checksum: %lld\n", dgpuChecksum);
    CHECK_DRIVER(cuMemFree(deviceOut));
    CHECK_DRIVER(cuMemFree(deviceIn));
    CHECK_DRIVER(cuMemFreeHost(pinnedOut));
    CHECK_DRIVER(cuMemFreeHost(pinnedIn));

    // Step 5: the Tegra way — input and output in managed memory, no copies. The
    // attach flag says who may touch the buffer; changing it is the note's prefetch
    // hint (table 2): HOST -> GLOBAL prefetches to the GPU, GLOBAL -> HOST to the CPU.
    course::printStep(5, "image pipeline, the Tegra way (managed memory + attach hints)");
    std::vector<int> tegraResult;
    double tegraBestMs = 0.0;
    if (!managedMemory) {
        std::printf(
            "section Tegra way: SKIP (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 0: no managed memory here, "
            "e.g. a dGPU attached to Tegra)\n");
    } else {
        CUdeviceptr managedIn = 0, managedOut = 0;
        // Attached to the host: the CPU may fill it while the GPU runs other work,
        // even where concurrentManagedAccess is 0.
        CHECK_DRIVER(cuMemAllocManaged(&managedIn, kImageBytes, CU_MEM_ATTACH_HOST));
        CHECK_DRIVER(cuMemAllocManaged(&managedOut, kImageBytes, CU_MEM_ATTACH_GLOBAL));
        auto tegraPass = [&]() {
            readImage(hostView(managedIn));
            // length 0 = the whole allocation; the hint takes effect in stream order.
            CHECK_DRIVER(cuStreamAttachMemAsync(stream, managedIn, 0, CU_MEM_ATTACH_GLOBAL));
            // The previous pass handed the output to the host; the GPU needs it back before k3 writes.
            CHECK_DRIVER(cuStreamAttachMemAsync(stream, managedOut, 0, CU_MEM_ATTACH_GLOBAL));
            launchStage(k1, managedIn, intermediateB);
            launchStage(k2, intermediateB, intermediateC);
            launchStage(k3, intermediateC, managedOut);
            CHECK_DRIVER(cuStreamAttachMemAsync(stream, managedIn, 0, CU_MEM_ATTACH_HOST));
            CHECK_DRIVER(cuStreamAttachMemAsync(stream, managedOut, 0, CU_MEM_ATTACH_HOST));
            // Only after this may the CPU touch the buffers on a concurrentManagedAccess = 0 device.
            CHECK_DRIVER(cuStreamSynchronize(stream));
            return useImageOnCpu(hostView(managedOut));
        };
        tegraBestMs = 1e30;
        long long tegraChecksum = 0;
        for (int pass = 0; pass < passes; ++pass) {
            const auto start = std::chrono::steady_clock::now();
            tegraChecksum = tegraPass();
            const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
            tegraBestMs = std::min(tegraBestMs, took.count());
        }
        tegraResult.assign(hostView(managedOut), hostView(managedOut) + kWidth * kHeight);
        std::printf("Tegra way output checksum: %lld\n", tegraChecksum);
        CHECK_DRIVER(cuMemFree(managedOut));
        CHECK_DRIVER(cuMemFree(managedIn));
    }
    CHECK_DRIVER(cuMemFree(intermediateC));
    CHECK_DRIVER(cuMemFree(intermediateB));

    // Step 6: same answer both ways (and the CPU's), then the clock.
    course::printStep(6, "compare the two ways and time them");
    const std::vector<int> reference = cpuPipeline();
    const bool dgpuMatches = dgpuResult == reference;
    std::printf("dGPU way matches the CPU reference: %s\n", yesNo(dgpuMatches));
    bool pipelinesOk = dgpuMatches;
    if (managedMemory) {
        const bool tegraMatches = tegraResult == reference;
        std::printf("Tegra way matches the CPU reference: %s\n", yesNo(tegraMatches));
        std::printf("pipelines agree: %s\n", yesNo(tegraResult == dgpuResult));
        pipelinesOk = pipelinesOk && tegraMatches && tegraResult == dgpuResult;
    }
    std::printf("dGPU way, best of %d passes: %.3f ms\n", passes, dgpuBestMs);
    if (managedMemory) {
        std::printf("Tegra way, best of %d passes: %.3f ms\n", passes, tegraBestMs);
        std::printf("Tegra way / dGPU way: %.2fx\n", tegraBestMs / dgpuBestMs);
    }
    // The note's rule, from what the device is (the timings above are this run's evidence).
    if (integrated && !ccAtLeast72) {
        std::printf("favoured on this device: Tegra way\n");
        std::printf(
            "reason: CC < 7.2 has no I/O coherency, so pinned memory is uncached on the CPU and "
            "readImage() on it is slow; managed memory is cached on the CPU\n");
    } else if (integrated) {
        std::printf("favoured on this device: Tegra way\n");
        std::printf(
            "reason: CPU and iGPU share DRAM, so the copies only duplicate data; with I/O coherency "
            "pinned memory is CPU-cached too, so the note says to measure both\n");
    } else {
        std::printf("favoured on this device: dGPU way\n");
        std::printf(
            "reason: device memory is the GPU's own DRAM; managed pages must migrate over the bus, "
            "and the attach flags are only coherence hints here\n");
    }
    if (bench) {
        std::printf("bench: image pipeline 1024x1024, dGPU way = %.3f ms\n", dgpuBestMs);
        if (managedMemory) std::printf("bench: image pipeline 1024x1024, Tegra way = %.3f ms\n", tegraBestMs);
    }

    // Step 7: the note's matrix multiply: inputs attached to the host while the CPU
    // fills them, attached globally for the kernel, the result attached back to the host.
    course::printStep(7, "matrix multiply with attach hints");
    bool matrixOk = true;
    if (!managedMemory) {
        std::printf("section matrix multiply: SKIP (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 0)\n");
    } else {
        int hp = 64, wp = 48, hq = 48, wq = 32;
        CUdeviceptr p = 0, q = 0, r = 0;
        CHECK_DRIVER(cuMemAllocManaged(&p, sizeof(int) * hp * wp, CU_MEM_ATTACH_HOST));
        CHECK_DRIVER(cuMemAllocManaged(&q, sizeof(int) * hq * wq, CU_MEM_ATTACH_HOST));
        CHECK_DRIVER(cuMemAllocManaged(&r, sizeof(int) * hp * wq, CU_MEM_ATTACH_GLOBAL));
        unsigned int seed = 12345u;  // a small LCG: the same "random" values on every run
        auto next = [&seed]() { return static_cast<int>((seed = seed * 1103515245u + 12345u) >> 16) % 16; };
        for (int i = 0; i < hp * wp; ++i) hostView(p)[i] = next();
        for (int i = 0; i < hq * wq; ++i) hostView(q)[i] = next();
        CHECK_DRIVER(cuStreamAttachMemAsync(stream, p, 0, CU_MEM_ATTACH_GLOBAL));
        CHECK_DRIVER(cuStreamAttachMemAsync(stream, q, 0, CU_MEM_ATTACH_GLOBAL));
        void* params[] = {&p, &q, &r, &hp, &hq, &wp, &wq};
        CHECK_DRIVER(
            cuLaunchKernel(matrixMul, (wq + 15) / 16, (hp + 15) / 16, 1, 16, 16, 1, 0, stream, params, nullptr));
        // The note's optional extra synchronisation: it keeps the driver's callback
        // threads out of the next attach call, for predictable timing.
        CHECK_DRIVER(cuStreamSynchronize(stream));
        CHECK_DRIVER(cuStreamAttachMemAsync(stream, r, 0, CU_MEM_ATTACH_HOST));
        CHECK_DRIVER(cuStreamSynchronize(stream));
        int mismatches = 0;
        for (int row = 0; row < hp; ++row)
            for (int col = 0; col < wq; ++col) {
                int sum = 0;
                for (int k = 0; k < wp; ++k) sum += hostView(p)[row * wp + k] * hostView(q)[k * wq + col];
                mismatches += sum != hostView(r)[row * wq + col];
            }
        std::printf("r[0][0..3]: %d %d %d %d\n", hostView(r)[0], hostView(r)[1], hostView(r)[2], hostView(r)[3]);
        std::printf("matrix multiply (%dx%d * %dx%d) matches the CPU: %s\n", hp, wp, hq, wq, yesNo(mismatches == 0));
        matrixOk = mismatches == 0;
        CHECK_DRIVER(cuMemFree(r));
        CHECK_DRIVER(cuMemFree(q));
        CHECK_DRIVER(cuMemFree(p));
    }

    // Step 8: how much can the GPU still allocate? A dGPU answers with cuMemGetInfo.
    // An iGPU shares DRAM with the CPU, which can move pages to swap: the note's
    // estimate from /proc/meminfo (09-tegra-memory/meminfo_estimate.h) accounts for that.
    course::printStep(8, "allocatable memory: /proc/meminfo estimate beside cuMemGetInfo");
    size_t freeBytes = 0, totalBytes = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &totalBytes));
    std::printf("cuMemGetInfo free: %.2f GiB\n", gib(freeBytes));
    std::printf("cuMemGetInfo total: %.2f GiB\n", gib(totalBytes));
    if (const auto text = course::readFile("/proc/meminfo"); !text) {
        std::printf("section meminfo estimate: SKIP (/proc/meminfo cannot be read)\n");
    } else {
        const meminfo::Result result = meminfo::estimateAllocatable(*text);
        if (!result.estimate) {
            std::printf("meminfo estimate: none (%s)\n", result.reason.c_str());
        } else {
            const meminfo::Estimate& e = *result.estimate;
            std::printf("meminfo MemTotal: %.2f GiB\n", gib(e.totalPhysicalBytes));
            std::printf("meminfo used (MemTotal - MemFree): %.2f GiB\n", gib(e.usedPhysicalBytes));
            std::printf("meminfo SwapFree: %.2f GiB\n", gib(e.freeSwapBytes));
            std::printf("meminfo NvMapMemUsed present: %s\n", yesNo(e.nvMapPresent));
            std::printf("device allocated (NvMapMemUsed): %.2f GiB\n", gib(e.deviceAllocatedBytes));
            std::printf("host allocated: %.2f GiB\n", gib(e.hostAllocatedBytes));
            std::printf("estimate branch: %s\n", meminfo::branchName(e.branch));
            std::printf("estimate of device-allocatable memory: %.2f GiB\n", gib(e.allocatableBytes));
        }
        if (integrated) {
            std::printf(
                "why they differ: cuMemGetInfo ignores swap; the CPU can page host memory out to make room, "
                "so the estimate is the better upper bound on this iGPU\n");
        } else {
            std::printf(
                "why they differ: here they measure different memories: cuMemGetInfo is the GPU's own DRAM, "
                "/proc/meminfo the host's; the estimate is meaningful only for an iGPU\n");
        }
    }
    std::printf("QNX note: QNX has no swap, so there cuMemGetInfo's free is itself a fair estimate\n");

    // Step 9: Jetson's CUDA upgrade package (cuda-compat) ships a newer libcuda.so.1 in
    // /usr/local/cuda-X.Y/compat, chosen with LD_LIBRARY_PATH. Two errors from cuInit
    // tell a deployment that the pairing is wrong; the check below is what to log.
    course::printStep(9, "CUDA upgrade package check");
    std::printf(
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = %d (%s): the upgraded CUDA driver does not match the "
        "installed kernel-mode/JetPack drivers\n",
        static_cast<int>(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH),
        course::driverErrorName(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH));
    std::printf(
        "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = %d (%s): the system runs the upgrade package but this "
        "hardware does not support that configuration\n",
        static_cast<int>(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE),
        course::driverErrorName(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("driver CUDA version: %s\n", course::formatCudaVersion(driverVersion).c_str());
    std::printf("compiled with CUDA_VERSION: %s\n", course::formatCudaVersion(CUDA_VERSION).c_str());
    const course::CudaVersion driverV = course::decodeCudaVersion(driverVersion);
    const course::CudaVersion toolkitV = course::decodeCudaVersion(CUDA_VERSION);
    if (driverVersion >= CUDA_VERSION) {
        std::printf("upgrade package needed: no (the driver is as new as the toolkit)\n");
    } else if (driverV.major == toolkitV.major) {
        std::printf(
            "upgrade package needed: only for PTX JIT or new driver APIs (minor-version compatibility "
            "runs this toolkit's SASS)\n");
    } else {
        std::printf("upgrade package needed: yes (on Jetson: cuda-compat-%d-%d, if JetPack supports it)\n",
                    toolkitV.major, toolkitV.minor);
    }
    // Which libcuda.so.1 did the loader pick? RTLD_NOLOAD finds the copy already in the process.
    if (void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD); handle != nullptr) {
        link_map* map = nullptr;
        if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
            std::printf("libcuda.so.1 loaded from: %s\n", map->l_name);
            std::printf("libcuda.so.1 from a cuda-compat folder: %s\n",
                        yesNo(std::strstr(map->l_name, "/compat/") != nullptr));
        }
        dlclose(handle);
    }

    // Step 10: app note section "CUDA Features Not Supported on Tegra" (§4.6; §4.7
    // in the 13.x edition). Each line says how a program finds out at run time.
    course::printStep(10, "features not supported on Tegra, detected at run time");
    bool featuresOk = true;
    if (hostRegister) {
        // Run it: register pageable memory, reach it through its device pointer
        // (cuMemHostGetDevicePointer is the portable way; no unified-addressing magic).
        constexpr size_t registerBytes = 64 * 1024;
        void* pageable = std::aligned_alloc(4096, registerBytes);
        CHECK_DRIVER(cuMemHostRegister(pageable, registerBytes, CU_MEMHOSTREGISTER_DEVICEMAP));
        CUdeviceptr registeredDevice = 0;
        CHECK_DRIVER(cuMemHostGetDevicePointer(&registeredDevice, pageable, 0));
        CHECK_DRIVER(cuMemsetD32(registeredDevice, 0x2A2A2A2Au, registerBytes / sizeof(std::uint32_t)));
        CHECK_DRIVER(cuCtxSynchronize());
        const auto* words = static_cast<const std::uint32_t*>(pageable);
        const bool written = std::all_of(words, words + registerBytes / sizeof(std::uint32_t),
                                         [](std::uint32_t w) { return w == 0x2A2A2A2Au; });
        std::printf("feature cuMemHostRegister: supported, ran (CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED = 1)\n");
        std::printf("registered buffer written through its device pointer: %s\n", yesNo(written));
        std::printf("device pointer equals host pointer: %s\n",
                    yesNo(registeredDevice == reinterpret_cast<std::uintptr_t>(pageable)));
        CHECK_DRIVER(cuMemHostUnregister(pageable));
        std::free(pageable);
        featuresOk = featuresOk && written;
    } else {
        std::printf(
            "feature cuMemHostRegister: not supported (CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED = 0: "
            "Tegra with CC < 7.2, or QNX); use cuMemAllocHost / cuMemHostAlloc\n");
    }
    std::printf("feature system-wide atomics: %s (rule: unsupported on an integrated GPU with CC < 7.2)\n",
                integrated && !ccAtLeast72 ? "not supported" : "supported");
    std::printf(
        "feature unified memory: %s (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = %d; a dGPU attached to Tegra "
        "has none)\n",
        managedMemory ? "supported" : "not supported", managedMemory);
    if (concurrentManaged) {
        constexpr size_t prefetchBytes = 1024 * 1024;
        CUdeviceptr prefetched = 0;
        CHECK_DRIVER(cuMemAllocManaged(&prefetched, prefetchBytes, CU_MEM_ATTACH_GLOBAL));
        std::memset(hostView(prefetched), 0, prefetchBytes);
        CHECK_DRIVER(course::memPrefetchToDevice(prefetched, prefetchBytes, device, stream));
        CHECK_DRIVER(course::memPrefetchToHost(prefetched, prefetchBytes, stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
        CHECK_DRIVER(cuMemFree(prefetched));
        std::printf("feature cuMemPrefetchAsync: supported, ran (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 1)\n");
    } else {
        std::printf(
            "feature cuMemPrefetchAsync: not supported (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0); "
            "use cuStreamAttachMemAsync hints as in steps 5 and 7\n");
    }
    void* nvml = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    std::printf(
        "feature NVML: %s (dlopen libnvidia-ml.so.1; on Tegra only Thor and later, elsewhere use "
        "tegrastats)\n",
        nvml != nullptr ? "available" : "not available");
    if (nvml != nullptr) dlclose(nvml);
#if CUDA_VERSION >= 12000
    int ipcEvents = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&ipcEvents, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, device));
    std::printf("feature IPC events: %s (CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED = %d)\n",
                ipcEvents ? "supported" : "not supported", ipcEvents);
#endif
    int posixFd = 0;
    CHECK_DRIVER(
        cuDeviceGetAttribute(&posixFd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device));
    std::printf(
        "feature memory sharing by cuMemExportToShareableHandle (POSIX fd): %s "
        "(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = %d; legacy cuIpc* memory "
        "sharing on Tegra needs Thor's open driver)\n",
        posixFd ? "supported" : "not supported", posixFd);
    int rdma = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, device));
    std::printf("feature GPUDirect RDMA: %s (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = %d)\n",
                rdma ? "supported" : "not supported", rdma);
    // JIT costs CPU time and bandwidth and is not allowed in a safety context. The
    // driver refuses PTX JIT when CUDA_DISABLE_PTX_JIT=1, so a run with it set proves
    // that every module carried SASS for this GPU (this lesson's fatbin does for sm_75..sm_90).
    const char* disableJit = std::getenv("CUDA_DISABLE_PTX_JIT");
    std::printf("feature JIT-free start: run with CUDA_DISABLE_PTX_JIT=1 to prove it (set now: %s)\n",
                yesNo(disableJit != nullptr && std::strcmp(disableJit, "1") == 0));
    int deviceCount = 0;
    CHECK_DRIVER(cuDeviceGetCount(&deviceCount));
    if (deviceCount < 2) {
        std::printf("feature peer-to-peer: n/a (1 device visible; never supported on Tegra)\n");
    } else {
        for (int other = 0; other < deviceCount; ++other) {
            CUdevice peer = 0;
            CHECK_DRIVER(cuDeviceGet(&peer, other));
            if (peer == device) continue;
            int canAccess = 0;
            CHECK_DRIVER(cuDeviceCanAccessPeer(&canAccess, device, peer));
            std::printf("feature peer-to-peer with device %d: %s (cuDeviceCanAccessPeer)\n", other,
                        canAccess ? "supported" : "not supported");
        }
    }
#if defined(__QNX__)
    std::printf("feature cuSOLVER: not supported (this is QNX)\n");
#else
    std::printf("feature cuSOLVER: supported on Linux (not on QNX: a property of the OS, not of the driver)\n");
#endif
    std::printf(
        "feature nvGRAPH, CUB: library-level (nvGRAPH is not supported, CUB is experimental on Tegra); "
        "nothing to ask the driver\n");

    // Step 11: release in reverse order, then the verdict.
    course::printStep(11, "release and check");
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuCtxDestroy(context));
    const bool pass = pipelinesOk && matrixOk && featuresOk;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
