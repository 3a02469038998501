// Lesson 05, program 2 — page-locked ("pinned") host memory and how the GPU addresses it.
//
// The driver page-locks pinned memory (the OS may not move or swap it) and records it,
// so the copy engines can reach it directly. Four ways to get it; what the driver
// records for each; the GPU's address for each; memsets that write host memory across
// the bus through those addresses; and, after the release, that the driver has
// forgotten every buffer.
//
//   pinned_memory [--device N]
#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "memory_type.h"

using lesson05::memoryTypeOf;

namespace {

// Step 2's question to the driver: cuMemHostGetFlags "Passes back the flags pFlags that were
// specified when allocating the pinned host buffer p allocated by cuMemHostAlloc" (cuda.h).
// Every flag given must come back; cuda.h does not say whether others may be set beside them,
// so the check asks for those given only.
bool flagsCameBack(void* mapped, void* writeCombined) {
    unsigned int mappedFlags = 0;
    unsigned int writeCombinedFlags = 0;
    CHECK_DRIVER(cuMemHostGetFlags(&mappedFlags, mapped));
    CHECK_DRIVER(cuMemHostGetFlags(&writeCombinedFlags, writeCombined));
    std::printf("cuMemHostGetFlags of the cuMemHostAlloc(PORTABLE|DEVICEMAP) buffer: 0x%x\n", mappedFlags);
    std::printf("cuMemHostGetFlags of the cuMemHostAlloc(WRITECOMBINED|DEVICEMAP) buffer: 0x%x\n", writeCombinedFlags);
    constexpr unsigned int kMapped = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP;
    constexpr unsigned int kWriteCombined = CU_MEMHOSTALLOC_WRITECOMBINED | CU_MEMHOSTALLOC_DEVICEMAP;
    return (mappedFlags & kMapped) == kMapped && (writeCombinedFlags & kWriteCombined) == kWriteCombined;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    constexpr size_t kBytes = size_t{4} << 20;
    constexpr size_t kWords = kBytes / 4;
    course::Verdict verdict;

    // Step 1: what the device says about addressing host memory, then the primary
    // context (lesson 04), current on this thread.
    course::printStep(1, "what the device says about host memory");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    int unifiedAddressing = 0;
    int canMapHostMemory = 0;
    int hostPointerForRegistered = 0;
    int pageableMemoryAccess = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&unifiedAddressing, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&canMapHostMemory, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&hostPointerForRegistered,
                                      CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&pageableMemoryAccess, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, device));
    std::printf("unified addressing: %s\n", unifiedAddressing ? "yes" : "no");
    std::printf("can map host memory: %s\n", canMapHostMemory ? "yes" : "no");
    std::printf("can use host pointer for registered memory: %s\n", hostPointerForRegistered ? "yes" : "no");
    std::printf("pageable memory access: %s\n", pageableMemoryAccess ? "yes" : "no");
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));

    // Step 2: four ways to get pinned memory. Pinned memory is a scarce system resource:
    // allocate staging buffers once, reuse them.
    course::printStep(2, "page-locked (pinned) host memory, four ways");
    void* pinned = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&pinned, kBytes));
    // PORTABLE: pinned for every context, not only this one. DEVICEMAP: also mapped into
    // the GPU's address space, so kernels and memsets can reach it over the bus.
    void* mapped = nullptr;
    CHECK_DRIVER(cuMemHostAlloc(&mapped, kBytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    // WRITECOMBINED: the CPU writes it through write-combining buffers, past its caches.
    // Reading it back on the CPU is very slow; for buffers the CPU writes and the GPU reads.
    void* writeCombined = nullptr;
    CHECK_DRIVER(cuMemHostAlloc(&writeCombined, kBytes, CU_MEMHOSTALLOC_WRITECOMBINED | CU_MEMHOSTALLOC_DEVICEMAP));
    // Memory the application already has (a model file read into a vector, say): register
    // it in place instead of copying it into a new pinned buffer. Unregister before freeing.
    std::vector<std::uint32_t> existing(kWords, 0);
    CHECK_DRIVER(cuMemHostRegister(existing.data(), kBytes, CU_MEMHOSTREGISTER_DEVICEMAP));
    const struct {
        const char* what;
        void* host;
    } buffers[] = {
        {"cuMemAllocHost buffer", pinned},
        {"cuMemHostAlloc(PORTABLE|DEVICEMAP) buffer", mapped},
        {"cuMemHostAlloc(WRITECOMBINED|DEVICEMAP) buffer", writeCombined},
        {"cuMemHostRegister buffer", existing.data()},
    };
    // What the driver recorded: the cuMemHostAlloc buffers' flags, and each buffer's memory type.
    verdict.check("cuMemHostGetFlags returns the flags given to cuMemHostAlloc", flagsCameBack(mapped, writeCombined));
    bool allHost = true;
    for (const auto& b : buffers) {
        const lesson05::MemoryType type = memoryTypeOf(reinterpret_cast<CUdeviceptr>(b.host));
        std::printf("memory type of the %s: %s\n", b.what, type.text().c_str());
        allHost = allHost && type.is(CU_MEMORYTYPE_HOST);
    }
    verdict.check("every pinned buffer is host memory to the driver", allHost);

    // Step 3: the GPU's address for pinned memory. cuMemHostGetDevicePointer is the
    // portable way to ask. With unified addressing cuda.h promises that the device address
    // of cuMemAllocHost and cuMemHostAlloc memory is its host address, which is why passing
    // a host pointer to cuMemsetD32 "just works" for it. Not for WRITECOMBINED memory, and
    // for registered memory only where every visible device reports
    // CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: ask rather than assume.
    course::printStep(3, "device addresses of pinned memory");
    CUdeviceptr pinnedDevice = 0;
    CHECK_DRIVER(cuPointerGetAttribute(&pinnedDevice, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                       reinterpret_cast<CUdeviceptr>(pinned)));
    CUdeviceptr mappedDevice = 0;
    CUdeviceptr writeCombinedDevice = 0;
    CUdeviceptr registeredDevice = 0;
    CHECK_DRIVER(cuMemHostGetDevicePointer(&mappedDevice, mapped, 0));
    CHECK_DRIVER(cuMemHostGetDevicePointer(&writeCombinedDevice, writeCombined, 0));
    CHECK_DRIVER(cuMemHostGetDevicePointer(&registeredDevice, existing.data(), 0));
    CUdeviceptr mappedByAttribute = 0;
    CHECK_DRIVER(cuPointerGetAttribute(&mappedByAttribute, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                       reinterpret_cast<CUdeviceptr>(mapped)));
    const CUdeviceptr deviceAddresses[] = {pinnedDevice, mappedDevice, writeCombinedDevice, registeredDevice};
    const char* const howAsked[] = {"CU_POINTER_ATTRIBUTE_DEVICE_POINTER", "cuMemHostGetDevicePointer",
                                    "cuMemHostGetDevicePointer", "cuMemHostGetDevicePointer"};
    for (size_t i = 0; i < 4; ++i) {
        const bool same = reinterpret_cast<CUdeviceptr>(buffers[i].host) == deviceAddresses[i];
        std::printf("%s (%s): host %p, device 0x%llx (%s)\n", buffers[i].what, howAsked[i], buffers[i].host,
                    static_cast<unsigned long long>(deviceAddresses[i]), same ? "same address" : "different address");
    }
    std::printf("CU_POINTER_ATTRIBUTE_DEVICE_POINTER agrees with cuMemHostGetDevicePointer: %s\n",
                mappedByAttribute == mappedDevice ? "yes" : "no");
    verdict.check("both ways of asking give the same device address", mappedByAttribute == mappedDevice);
    // The promise covers the first two buffers (cuMemAllocHost, and cuMemHostAlloc without
    // WRITECOMBINED), and only with unified addressing.
    if (unifiedAddressing)
        verdict.check("device address equals host address where unified addressing promises it",
                      pinnedDevice == reinterpret_cast<CUdeviceptr>(pinned) &&
                          mappedDevice == reinterpret_cast<CUdeviceptr>(mapped));
    else
        std::printf("section same address: SKIP (the device has no unified addressing)\n");

    // Step 4: a memset through those device addresses writes host memory across the bus.
    // The host may only look once the GPU is done: wait for the context.
    course::printStep(4, "the GPU writes pinned memory through its device address");
    constexpr std::uint32_t kMappedWord = 0xcafef00d;
    constexpr std::uint32_t kRegisteredWord = 0x600df00d;
    CHECK_DRIVER(cuMemsetD32(mappedDevice, kMappedWord, kWords));
    CHECK_DRIVER(cuMemsetD32(registeredDevice, kRegisteredWord, kWords));
    CHECK_DRIVER(cuCtxSynchronize());
    const auto* mappedWords = static_cast<const std::uint32_t*>(mapped);
    const auto mappedSet = static_cast<size_t>(std::count(mappedWords, mappedWords + kWords, kMappedWord));
    const auto registeredSet = static_cast<size_t>(std::count(existing.begin(), existing.end(), kRegisteredWord));
    std::printf(
        "cuMemsetD32 through the mapped buffer's device address: %zu of %zu words on the host read 0xcafef00d\n",
        mappedSet, kWords);
    std::printf(
        "cuMemsetD32 through the registered buffer's device address: %zu of %zu words on the host read 0x600df00d\n",
        registeredSet, kWords);
    verdict.check("GPU memset reaches every word of the mapped buffer", mappedSet == kWords);
    verdict.check("GPU memset reaches every word of the registered buffer", registeredSet == kWords);

    // Step 5: give everything back, newest first, then ask the driver about each address.
    // cuMemGetInfo cannot show this: pinned memory is host memory. cuMemHostGetFlags
    // "will fail if the pointer does not reside in an allocation performed by
    // cuMemAllocHost() or cuMemHostAlloc()" (cuda.h), so it must fail for the three freed
    // buffers. The vector still exists after cuMemHostUnregister; for an address "not
    // allocated by, mapped by, or registered with" a context, cuPointerGetAttribute returns
    // CUDA_ERROR_INVALID_VALUE (cuda.h). Checked where the device cannot access pageable
    // memory: where it can, plain host memory is reachable anyway and the lesson claims nothing.
    course::printStep(5, "release everything, newest first, and check");
    CHECK_DRIVER(cuMemHostUnregister(existing.data()));  // before `existing` frees its memory
    CHECK_DRIVER(cuMemFreeHost(writeCombined));
    CHECK_DRIVER(cuMemFreeHost(mapped));
    CHECK_DRIVER(cuMemFreeHost(pinned));
    bool allForgotten = true;
    for (size_t i = 0; i < 3; ++i) {  // buffers[0..2]: the three the driver allocated
        unsigned int flags = 0;
        const CUresult asked = cuMemHostGetFlags(&flags, buffers[i].host);  // the address only, never read
        allForgotten = allForgotten && asked != CUDA_SUCCESS;
        std::printf("cuMemHostGetFlags on the freed %s: %s\n", buffers[i].what, course::driverErrorName(asked));
    }
    verdict.check("driver no longer knows the freed pinned buffers", allForgotten);
    if (pageableMemoryAccess == 0) {
        const lesson05::MemoryType unregistered = memoryTypeOf(reinterpret_cast<CUdeviceptr>(existing.data()));
        std::printf("memory type of the vector after cuMemHostUnregister: %s\n", unregistered.text().c_str());
        verdict.check("driver no longer knows the unregistered vector", unregistered.unknownToDriver());
    } else {
        std::printf("section unregistered vector: SKIP (the device can access pageable memory)\n");
    }
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context: released\n");
    return verdict.finish();
}
