// Lesson 09, program 1 — the attributes that decide which memory to use, and the
// CUDA for Tegra application note's table 1 (who caches which kind of memory).
//
// The course's toolkits (CUDA 11.4 and later) reach only Tegra iGPUs of compute
// capability 7.2 and above (Xavier, Orin, Thor): all I/O coherent, so the note's
// CC < 7.2 entries (TX2, Nano: JetPack 4, CUDA 10.2) are left out.
//
//   memory_attributes [--device N]
#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "tegra_device.h"

using tegra::yesNo;

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;

    course::printStep(1, "device");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device name: %s\n", name);

    // Step 2: what the driver says about this device's memory. No context is needed.
    course::printStep(2, "attributes that decide the memory choice");
    int integrated = 0, ccMajor = 0, ccMinor = 0, hostRegister = 0, hostPointerForRegistered = 0;
    int pageableAccess = 0, concurrentManaged = 0, managedMemory = 0, mapHost = 0, nativeAtomics = 0;
    int unifiedAddressing = 0;
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
        {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, "CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY", &mapHost},
        {CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, "CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED",
         &nativeAtomics},
        {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING", &unifiedAddressing},
    };
    for (const auto& a : attributes) {
        CHECK_DRIVER(cuDeviceGetAttribute(a.value, a.attribute, device));
        std::printf("attribute %s: %d\n", a.label, *a.value);
    }
    std::printf("compute capability: %d.%d\n", ccMajor, ccMinor);
    // One address space for host and device is what lets every way of this lesson hand the
    // GPU a host address (mapped, registered or managed memory). cuda.h: "Unified addressing
    // is automatically enabled in 64-bit processes", on an iGPU and a dGPU alike.
    course::Verdict verdict;
    verdict.check("unified addressing in a 64-bit process", sizeof(void*) != 8 || unifiedAddressing == 1);

    // Step 3: the note's table 1. On Tegra one DRAM holds device, host and managed
    // memory; what differs between the kinds is who may cache them.
    course::printStep(3, "app note table 1: caching by memory type");
    std::printf("%-24s | %-26s | %-62s | %s\n", "memory type", "CPU", "iGPU", "Tegra-connected dGPU");
    std::printf("%-24s | %-26s | %-62s | %s\n", "device memory", "not directly accessible", "cached", "cached");
    std::printf("%-24s | %-26s | %-62s | %s\n", "pageable host memory", "cached",
                "cached if pageableMemoryAccess = 1, else not accessible", "not directly accessible");
    std::printf("%-24s | %-26s | %-62s | %s\n", "pinned host memory", "cached (CC >= 7.2)", "uncached", "uncached");
    std::printf("%-24s | %-26s | %-62s | %s\n", "registered host memory", "cached",
                "cached with sysmem full coherency (Thor), else uncached", "uncached");
    std::printf("%-24s | %-26s | %-62s | %s\n", "unified memory", "cached",
                "cached if concurrentManagedAccess = 0, else UVM decides", "not supported");
    const bool tegraSoc = tegra::runningOnTegraSoc();
    std::printf("host is a Tegra SoC (device tree 'nvidia,tegra'): %s\n", yesNo(tegraSoc));
    const char* column =
        integrated ? "iGPU" : (tegraSoc ? "Tegra-connected dGPU" : "none (a discrete GPU on a non-Tegra host)");
    std::printf("this device's column: %s\n", column);
    if (integrated) {
        // An iGPU shares the CPU's memory, so it must be able to map host memory.
        verdict.check("an iGPU can map host memory", mapHost == 1);
        std::printf("this device, pageable host memory: %s\n",
                    pageableAccess ? "cached on the iGPU (pageableMemoryAccess = 1)"
                                   : "not directly accessible on the iGPU (pageableMemoryAccess = 0)");
        std::printf("this device, pinned host memory: cached on the CPU, uncached on the iGPU\n");
        std::printf("this device, registered host memory: %s\n",
                    hostRegister ? "supported" : "not supported (CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED = 0)");
        std::printf("this device, unified memory: %s\n",
                    concurrentManaged ? "UVM driver decides (concurrentManagedAccess = 1, Thor+)"
                                      : "cached on CPU and iGPU, coherence kept by the driver at launch and sync");
    } else {
        std::printf(
            "section iGPU caching of this device: SKIP (CU_DEVICE_ATTRIBUTE_INTEGRATED = 0: this GPU has "
            "its own memory, so table 1's iGPU column does not describe it)\n");
    }

    // Step 4: each check above printed its line where the program read the answer.
    course::printStep(4, "check");
    return verdict.finish();
}
