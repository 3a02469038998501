// Lesson 09, program 6 — the features the CUDA for Tegra application note lists as
// not supported on Tegra (§4.6; §4.7 in the 13.x edition), each detected the way a
// program can at run time: by a device attribute, by trying it, or, where the driver
// has nothing to ask, by the note's rule, said as a rule.
//
//   tegra_features [--device N]
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "tegra_device.h"

using tegra::yesNo;

namespace {

// Registers pageable memory and writes it through the device pointer the driver gives
// for it (cuMemHostGetDevicePointer: the portable way). True when every word arrived.
bool registerAndWrite() {
    constexpr size_t registerBytes = 64 * 1024;
    constexpr size_t words = registerBytes / sizeof(std::uint32_t);
    void* pageable = std::aligned_alloc(4096, registerBytes);
    CHECK_DRIVER(cuMemHostRegister(pageable, registerBytes, CU_MEMHOSTREGISTER_DEVICEMAP));
    CUdeviceptr registeredDevice = 0;
    CHECK_DRIVER(cuMemHostGetDevicePointer(&registeredDevice, pageable, 0));
    CHECK_DRIVER(cuMemsetD32(registeredDevice, 0x2A2A2A2Au, words));
    CHECK_DRIVER(cuCtxSynchronize());
    const auto* values = static_cast<const std::uint32_t*>(pageable);
    const bool written = std::all_of(values, values + words, [](std::uint32_t w) { return w == 0x2A2A2A2Au; });
    std::printf("registered buffer written through its device pointer: %s\n", yesNo(written));
    std::printf("device pointer equals host pointer: %s\n",
                yesNo(registeredDevice == reinterpret_cast<std::uintptr_t>(pageable)));
    CHECK_DRIVER(cuMemHostUnregister(pageable));
    std::free(pageable);
    return written;
}

// Migrates a managed buffer to the device and back with cuMemPrefetchAsync.
void prefetchBothWays(CUdevice device, CUstream stream) {
    constexpr size_t prefetchBytes = 1024 * 1024;
    CUdeviceptr prefetched = 0;
    CHECK_DRIVER(cuMemAllocManaged(&prefetched, prefetchBytes, CU_MEM_ATTACH_GLOBAL));
    std::memset(tegra::hostView(prefetched), 0, prefetchBytes);
    CHECK_DRIVER(course::memPrefetchToDevice(prefetched, prefetchBytes, device, stream));
    CHECK_DRIVER(course::memPrefetchToHost(prefetched, prefetchBytes, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    CHECK_DRIVER(cuMemFree(prefetched));
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;

    course::printStep(1, "device, context, stream");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device name: %s\n", name);
    CUcontext context = nullptr;
    CHECK_DRIVER(course::ctxCreate(&context, 0, device));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_DEFAULT));
    const int integrated = tegra::attribute(device, CU_DEVICE_ATTRIBUTE_INTEGRATED);
    std::printf("attribute CU_DEVICE_ATTRIBUTE_INTEGRATED: %d\n", integrated);

    // Step 2: memory features, from attributes; two of them run.
    course::printStep(2, "memory features");
    course::Verdict verdict;
    if (tegra::attribute(device, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED)) {
        std::printf("feature cuMemHostRegister: supported, ran (CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED = 1)\n");
        verdict.check("registered buffer written through its device pointer", registerAndWrite());
    } else {
        std::printf(
            "feature cuMemHostRegister: not supported (CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED = 0); use "
            "cuMemAllocHost / cuMemHostAlloc\n");
    }
    // CPU and GPU atomics on the same host memory are atomic with respect to each other
    // only over a native link. On a Tegra iGPU the note's rule applies instead (from
    // CC 7.2, every iGPU the course's toolkits reach): the driver has no attribute for it.
    const int nativeAtomics = tegra::attribute(device, CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED);
    if (integrated) {
        std::printf(
            "feature system-wide atomics: supported (the note's rule for Tegra iGPUs of CC >= 7.2; "
            "CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED = %d)\n",
            nativeAtomics);
    } else {
        std::printf("feature system-wide atomics: %s (CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED = %d)\n",
                    nativeAtomics ? "native over the host link"
                                  : "not native over the host link: GPU atomics on host memory are not atomic "
                                    "for the CPU",
                    nativeAtomics);
    }
    const int managedMemory = tegra::attribute(device, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
    std::printf(
        "feature unified memory: %s (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = %d; a dGPU attached to Tegra "
        "has none)\n",
        managedMemory ? "supported" : "not supported", managedMemory);
    if (tegra::attribute(device, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)) {
        prefetchBothWays(device, stream);
        std::printf("feature cuMemPrefetchAsync: supported, ran (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 1)\n");
    } else {
        std::printf(
            "feature cuMemPrefetchAsync: not supported (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0); "
            "use cuStreamAttachMemAsync hints as image_pipeline and matrix_attach do\n");
    }

    // Step 3: sharing and system features, from attributes and the loader.
    course::printStep(3, "sharing and system features");
    void* nvml = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    std::printf(
        "feature NVML: %s (dlopen libnvidia-ml.so.1; on Tegra only Thor and later, elsewhere use "
        "tegrastats)\n",
        nvml != nullptr ? "available" : "not available");
    if (nvml != nullptr) dlclose(nvml);
#if CUDA_VERSION >= 12000
    const int ipcEvents = tegra::attribute(device, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED);
    std::printf("feature IPC events: %s (CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED = %d)\n",
                ipcEvents ? "supported" : "not supported", ipcEvents);
#else
    std::printf("feature IPC events: SKIP (CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED needs CUDA 12.0 headers)\n");
#endif
    const int posixFd = tegra::attribute(device, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
    std::printf(
        "feature memory sharing by cuMemExportToShareableHandle (POSIX fd): %s "
        "(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = %d; legacy cuIpc* memory "
        "sharing on Tegra needs Thor's open driver)\n",
        posixFd ? "supported" : "not supported", posixFd);
    const int rdma = tegra::attribute(device, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED);
    std::printf("feature GPUDirect RDMA: %s (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = %d)\n",
                rdma ? "supported" : "not supported", rdma);
    // JIT costs CPU time and bandwidth and is not allowed in a safety context. The
    // driver refuses PTX JIT when CUDA_DISABLE_PTX_JIT=1, so a run with it set proves
    // that every module carried SASS for this GPU (image_pipeline's fatbin does for sm_75..sm_90).
    const char* disableJit = std::getenv("CUDA_DISABLE_PTX_JIT");
    std::printf("feature JIT-free start: run image_pipeline with CUDA_DISABLE_PTX_JIT=1 to prove it (set now: %s)\n",
                yesNo(disableJit != nullptr && std::strcmp(disableJit, "1") == 0));
    int deviceCount = 0;
    CHECK_DRIVER(cuDeviceGetCount(&deviceCount));
    // One line under one label whatever the device count, so the output reads the same everywhere.
    std::string peers;
    for (int other = 0; deviceCount >= 2 && other < deviceCount; ++other) {
        CUdevice peer = 0;
        CHECK_DRIVER(cuDeviceGet(&peer, other));
        if (peer == device) continue;
        int canAccess = 0;
        CHECK_DRIVER(cuDeviceCanAccessPeer(&canAccess, device, peer));
        peers += (peers.empty() ? "" : ", ") + std::string("with device ") + std::to_string(other) +
                 (canAccess ? " supported" : " not supported");
    }
    if (deviceCount < 2)
        std::printf("feature peer-to-peer: n/a (1 device visible; never supported on Tegra)\n");
    else
        std::printf("feature peer-to-peer: %s (cuDeviceCanAccessPeer)\n", peers.c_str());
#if defined(__QNX__)
    std::printf("feature cuSOLVER: not supported (this is QNX)\n");
#else
    std::printf("feature cuSOLVER: supported on Linux (not on QNX: a property of the OS, not of the driver)\n");
#endif
    std::printf(
        "feature nvGRAPH, CUB: library-level (nvGRAPH is not supported, CUB is experimental on Tegra); "
        "nothing to ask the driver\n");

    course::printStep(4, "release and check");
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuCtxDestroy(context));
    return verdict.finish();
}
