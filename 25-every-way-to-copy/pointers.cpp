// Lesson 25, program 8 — what the driver knows about a pointer: cuPointerGetAttributes (many
// attributes in one call), cuMemGetAddressRange of a pointer into the middle of an allocation, and
// cuPointerSetAttribute(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) and what it changes.
//
// With unified addressing every pointer lives in one address space, so a copy routine handed a
// bare address can ask the driver what it points to: device, host or managed memory, of which
// context and device, in which allocation.
//
//   pointers               the walkthrough
//   pointers --device N    another GPU
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "copy_helpers.h"

namespace {

// The answers of one cuPointerGetAttributes call; the boolean attributes are read into unsigned int.
// Each field starts as a value of its own that no check accepts (no context, memory type or
// ordinal is any of these), so an attribute the driver leaves unwritten shows as wrong.
struct PointerInfo {
    CUresult result = CUDA_ERROR_UNKNOWN;
    CUcontext context = reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(0xC0C0C0C0u));
    unsigned int memoryType = 0xA5A5u;
    CUdeviceptr devicePointer = 0xD0D0D0D0u;
    void* hostPointer = reinterpret_cast<void*>(static_cast<std::uintptr_t>(0x40404040u));
    unsigned int isManaged = 0x5A5Au;
    int ordinal = -1000;
    unsigned long long bufferId = 0xB0B0B0B0u;
    unsigned int mapped = 0x3C3Cu;
};

const char* memoryTypeName(unsigned int type) {
    switch (type) {
        case 0: return "0 (none)";
        case 0xA5A5u: return "(not written)";
        case CU_MEMORYTYPE_HOST: return "CU_MEMORYTYPE_HOST";
        case CU_MEMORYTYPE_DEVICE: return "CU_MEMORYTYPE_DEVICE";
        case CU_MEMORYTYPE_ARRAY: return "CU_MEMORYTYPE_ARRAY";
        case CU_MEMORYTYPE_UNIFIED: return "CU_MEMORYTYPE_UNIFIED";
        default: return "(unknown CUmemorytype)";
    }
}

// Eight attributes in one call (seven for device memory, which has no host address: the host
// pointer is asked only where there is one). data[i] points at where attribute i goes.
PointerInfo describe(const char* what, CUdeviceptr pointer, bool hasHostPointer) {
    PointerInfo info;
    CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_CONTEXT,        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                        CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                        CU_POINTER_ATTRIBUTE_MAPPED,         CU_POINTER_ATTRIBUTE_HOST_POINTER};
    void* data[] = {&info.context, &info.memoryType, &info.devicePointer, &info.isManaged,
                    &info.ordinal, &info.bufferId,   &info.mapped,        &info.hostPointer};
    const unsigned int count = hasHostPointer ? 8 : 7;
    info.result = REPORT_DRIVER(cuPointerGetAttributes(count, attributes, data, pointer));
    std::printf("%s: %s, %s, ordinal %d, managed %u, mapped %u, device pointer %s, host pointer %s\n", what,
                course::driverErrorName(info.result), memoryTypeName(info.memoryType), info.ordinal, info.isManaged,
                info.mapped, info.devicePointer == pointer ? "= itself" : "other",
                !hasHostPointer                                        ? "not asked"
                : info.hostPointer == reinterpret_cast<void*>(pointer) ? "= itself"
                                                                       : "other");
    return info;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "initialise, load the spin kernel");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    course::printDeviceName(ordinal, device);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("copy_kernels.fatbin").c_str()));
    CUfunction spin = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&spin, module, "spin"));
    course::Verdict verdict;

    // Step 2: four kinds of memory, one cuPointerGetAttributes call each.
    course::printStep(2, "cuPointerGetAttributes on device, pinned, managed and malloc'd memory");
    constexpr size_t kBytes = 1 << 20;
    CUdeviceptr deviceMemory = 0;
    CHECK_DRIVER(cuMemAlloc(&deviceMemory, kBytes));
    void* pinned = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&pinned, kBytes));
    CUdeviceptr managed = 0;
    CHECK_DRIVER(cuMemAllocManaged(&managed, kBytes, CU_MEM_ATTACH_GLOBAL));
    std::vector<unsigned char> pageable(kBytes);
    const CUdeviceptr pinnedAddress = reinterpret_cast<CUdeviceptr>(pinned);
    const PointerInfo onDevice = describe("device memory", deviceMemory, false);
    const PointerInfo onHost = describe("pinned host memory", pinnedAddress, true);
    const PointerInfo onManaged = describe("managed memory", managed, true);
    verdict.check("device memory: DEVICE type, this context and ordinal, its own device address",
                  onDevice.result == CUDA_SUCCESS && onDevice.memoryType == CU_MEMORYTYPE_DEVICE &&
                      onDevice.context == context && onDevice.ordinal == ordinal &&
                      onDevice.devicePointer == deviceMemory && onDevice.isManaged == 0 && onDevice.mapped == 1);
    // With unified addressing the host and device addresses are the same "except in the exceptional
    // disjoint addressing cases" (cuMemHostRegister, write-combined cuMemHostAlloc; cuda.h:14317-14323).
    verdict.check("pinned memory: HOST type, one address for host and device",
                  onHost.result == CUDA_SUCCESS && onHost.memoryType == CU_MEMORYTYPE_HOST &&
                      onHost.hostPointer == pinned && onHost.devicePointer == pinnedAddress);
    verdict.check("managed memory: IS_MANAGED 1",
                  onManaged.result == CUDA_SUCCESS && onManaged.isManaged == 1 && onManaged.devicePointer == managed);
    // cuda.h says two things of a pointer no CUDA context knows: "Unlike cuPointerGetAttribute, this
    // function will not return an error when the ptr encountered is not a valid CUDA pointer.
    // Instead, the attributes are assigned default NULL values and CUDA_SUCCESS is returned"
    // (cuda.h:14876-14878), and "If ptr was not allocated by, mapped by, or registered with a
    // CUcontext which uses UVA (Unified Virtual Addressing), CUDA_ERROR_INVALID_CONTEXT is returned"
    // (cuda.h:14880-14881). The check takes either answer, as long as no context is named: a NULL
    // context with CUDA_SUCCESS, or CUDA_ERROR_INVALID_CONTEXT. The other attributes are shown, not
    // checked: what "default NULL values" are for an ordinal or a host pointer, cuda.h does not say.
    // Where the device reaches pageable memory itself, malloc'd memory is not "not a CUDA pointer" in
    // any sense the lesson can rely on.
    int pageableAccess = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&pageableAccess, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, device));
    std::printf("CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: %d\n", pageableAccess);
    const PointerInfo onPageable = describe("malloc'd memory", reinterpret_cast<CUdeviceptr>(pageable.data()), true);
    const char* const kPageable = "malloc'd memory: no context, by either answer cuda.h gives";
    if (pageableAccess != 0)
        lesson25::skipCheck(kPageable, "the device can access pageable memory");
    else
        verdict.check(kPageable, (onPageable.result == CUDA_SUCCESS && onPageable.context == nullptr) ||
                                     onPageable.result == CUDA_ERROR_INVALID_CONTEXT);
    // BUFFER_ID: "guaranteed to be unique within the process" for each allocation (cuda.h:14254).
    const PointerInfo inside = describe("device memory + 4096", deviceMemory + 4096, false);
    std::printf("BUFFER_ID of device memory + 4096: %s the allocation's\n",
                inside.bufferId == onDevice.bufferId ? "the same as" : "not");
    std::printf("BUFFER_IDs of device, pinned and managed memory: %s\n",
                onDevice.bufferId != onHost.bufferId && onDevice.bufferId != onManaged.bufferId &&
                        onHost.bufferId != onManaged.bufferId
                    ? "three different"
                    : "not all different");
    verdict.check("BUFFER_ID: the allocation's own inside it, another for each other allocation",
                  inside.bufferId == onDevice.bufferId && onDevice.bufferId != onHost.bufferId &&
                      onDevice.bufferId != onManaged.bufferId && onHost.bufferId != onManaged.bufferId);

    // Step 3: from a pointer into the middle of an allocation back to the allocation.
    course::printStep(3, "cuMemGetAddressRange of a pointer 12345 bytes into the device allocation");
    CUdeviceptr base = 0;
    size_t size = 0;
    const CUdeviceptr interior = deviceMemory + 12345;
    CHECK_DRIVER(cuMemGetAddressRange(&base, &size, interior));
    std::printf("allocation base: %s, size: %zu bytes (asked for %zu)\n",
                base == deviceMemory ? "the cuMemAlloc pointer" : "another address", size, kBytes);
    verdict.check("the interior pointer leads back to its allocation",
                  base == deviceMemory && size >= kBytes && interior < base + size);

    // Step 4: CU_POINTER_ATTRIBUTE_SYNC_MEMOPS. Synchronous memory operations "can exhibit
    // asynchronous behavior" (cuda.h:14249-14250); with the attribute set, those on the region "will
    // always synchronize" (cuda.h:14246-14247). A 200 ms kernel on the legacy stream, then
    // cuMemsetD32 on a region: is that stream idle when the call returns? cuda.h does not say what
    // "synchronize" waits for, so both answers are shown, not checked.
    course::printStep(4, "CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: cuMemsetD32 behind a 200 ms kernel");
    CUdeviceptr plainRegion = 0;
    CUdeviceptr syncRegion = 0;
    CHECK_DRIVER(cuMemAlloc(&plainRegion, kBytes));
    CHECK_DRIVER(cuMemAlloc(&syncRegion, kBytes));
    unsigned int syncMemops = 0;
    CHECK_DRIVER(cuPointerGetAttribute(&syncMemops, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, syncRegion));
    std::printf("SYNC_MEMOPS of a new allocation: %u\n", syncMemops);
    const unsigned int on = 1;
    CHECK_DRIVER(cuPointerSetAttribute(&on, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, syncRegion));
    CHECK_DRIVER(cuPointerGetAttribute(&syncMemops, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, syncRegion));
    std::printf("SYNC_MEMOPS after cuPointerSetAttribute: %u\n", syncMemops);
    verdict.check("SYNC_MEMOPS reads back as 1 on the region it was set on", syncMemops == 1);
    unsigned long long nanoseconds = 200000000ULL;
    void* params[] = {&nanoseconds};
    CHECK_DRIVER(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    CHECK_DRIVER(cuMemsetD32(plainRegion, 0x12345678u, kBytes / 4));
    const CUresult withoutAttribute = cuStreamQuery(nullptr);
    CHECK_DRIVER(cuCtxSynchronize());
    CHECK_DRIVER(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    CHECK_DRIVER(cuMemsetD32(syncRegion, 0x12345678u, kBytes / 4));
    const CUresult withAttribute = cuStreamQuery(nullptr);
    CHECK_DRIVER(cuCtxSynchronize());
    std::printf("legacy stream when cuMemsetD32 returned, region without SYNC_MEMOPS: %s\n",
                course::driverErrorName(withoutAttribute));
    std::printf("legacy stream when cuMemsetD32 returned, region with SYNC_MEMOPS: %s\n",
                course::driverErrorName(withAttribute));

    course::printStep(5, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(syncRegion));
    CHECK_DRIVER(cuMemFree(plainRegion));
    CHECK_DRIVER(cuMemFree(managed));
    CHECK_DRIVER(cuMemFreeHost(pinned));
    CHECK_DRIVER(cuMemFree(deviceMemory));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: buffers, module, primary context\n");

    course::printStep(6, "check");
    return verdict.finish();
}
