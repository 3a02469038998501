// pool_steps.h — two steps of pools_across_devices that need one GPU only: what
// cuMemGetAllocationPropertiesFromHandle says about a handle (step 3), and the graph allocator's
// reserve, trimmed and its high watermarks reset with cuDeviceSetGraphMemAttribute (step 4).
#pragma once

#include <cuda.h>

#include <cstdio>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "managed_helpers.h"

namespace lesson26 {

inline void printProps(const char* label, const CUmemAllocationProp& prop) {
    std::printf("%s: type %s, location %s %d, requested handle types 0x%x\n", label,
                prop.type == CU_MEM_ALLOCATION_TYPE_PINNED ? "PINNED" : "(other)",
                prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? "DEVICE" : "(other)", prop.location.id,
                static_cast<unsigned>(prop.requestedHandleTypes));
}

// Step 3: two physical allocations of this GPU (cuMemCreate, lesson 11), one without a shareable
// handle type and one with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; the second is mapped, and its
// handle found again from an address inside the mapping with cuMemRetainAllocationHandle: "The handle
// is guaranteed to be the same handle value used to map the memory" (cuda.h:13243). Each handle's
// properties are read back and compared with what each allocation was asked for. Last, free device
// memory is read again: an allocation "will be freed when all outstanding mappings to the memory are
// unmapped and when all outstanding references to the handle ... are also released" (cuda.h:12841-12843),
// so a handle left unreleased keeps a whole allocation out of it.
inline void propertiesFromHandles(course::Verdict& verdict, CUdevice device) {
    const char* const kPlain = "the first handle reports PINNED, this GPU and no shareable handle type";
    const char* const kRetained = "the handle retained from inside the mapping reports the POSIX file-descriptor type";
    const char* const kGivenBack = "every handle released, the two allocations' device memory is free again";
    if (course::deviceAttribute(device, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) == 0) {
        std::printf("section allocation properties: SKIP (no virtual memory management on this device)\n");
        skipCheck(kPlain, "no virtual memory management on this device");
        skipCheck(kRetained, "no virtual memory management on this device");
        skipCheck(kGivenBack, "no virtual memory management on this device");
        return;
    }
    const bool posix = course::deviceAttribute(device, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) != 0;
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    size_t granularity = 0;
    CHECK_DRIVER(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size_t freeBefore = 0;
    size_t total = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBefore, &total));
    CUmemGenericAllocationHandle plain = 0;
    CHECK_DRIVER(cuMemCreate(&plain, granularity, &prop, 0));
    prop.requestedHandleTypes = posix ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    CUmemGenericAllocationHandle shareable = 0;
    CHECK_DRIVER(cuMemCreate(&shareable, granularity, &prop, 0));
    CUdeviceptr range = 0;
    CHECK_DRIVER(cuMemAddressReserve(&range, granularity, 0, 0, 0));
    CHECK_DRIVER(cuMemMap(range, granularity, 0, shareable, 0));
    CUmemGenericAllocationHandle retained = 0;  // from an address inside the mapping, not its start
    CHECK_DRIVER(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(range + granularity / 2)));

    CUmemAllocationProp plainProps{};
    CUmemAllocationProp retainedProps{};
    CHECK_DRIVER(cuMemGetAllocationPropertiesFromHandle(&plainProps, plain));
    CHECK_DRIVER(cuMemGetAllocationPropertiesFromHandle(&retainedProps, retained));
    std::printf("allocation size: %zu bytes (the minimum granularity)\n", granularity);
    printProps("first handle", plainProps);
    printProps("handle retained from inside the mapping", retainedProps);
    std::printf("retained handle is the one mapped: %s\n", retained == shareable ? "yes" : "no");
    const auto onThisGpu = [&](const CUmemAllocationProp& p) {
        return p.type == CU_MEM_ALLOCATION_TYPE_PINNED && p.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
               p.location.id == device;
    };
    verdict.check(kPlain, onThisGpu(plainProps) && plainProps.requestedHandleTypes == CU_MEM_HANDLE_TYPE_NONE);
    if (posix)
        verdict.check(kRetained, retained == shareable && onThisGpu(retainedProps) &&
                                     retainedProps.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    else
        skipCheck(kRetained, "the device has no POSIX file-descriptor handles");

    CHECK_DRIVER(cuMemRelease(retained));  // a retained handle needs its own release (cuda.h:13244-13245)
    CHECK_DRIVER(cuMemUnmap(range, granularity));
    CHECK_DRIVER(cuMemAddressFree(range, granularity));
    CHECK_DRIVER(cuMemRelease(shareable));
    CHECK_DRIVER(cuMemRelease(plain));
    size_t freeAfter = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeAfter, &total));
    // Another process's allocations move this figure too: the lesson's tests run this program alone.
    const long long kept = static_cast<long long>(freeBefore) - static_cast<long long>(freeAfter);
    std::printf("device memory not given back after the releases: %lld bytes (allowed: less than one %zu-byte "
                "allocation)\n",
                kept, granularity);
    verdict.checkFreeMemory(kGivenBack, kept < static_cast<long long>(granularity));
}

inline unsigned long long graphMemory(CUdevice device, CUgraphMem_attribute attribute) {
    cuuint64_t value = 0;
    CHECK_DRIVER(cuDeviceGetGraphMemAttribute(device, attribute, &value));
    return value;
}

// A graph of three nodes, allocate 64 MiB -> memset -> free, instantiated, launched once and
// destroyed (lesson 15 builds one in detail).
constexpr size_t kGraphBytes = size_t{64} << 20;

inline void runGraphOnce(CUcontext context, CUdevice device, CUstream stream) {
    CUgraph graph = nullptr;
    CHECK_DRIVER(cuGraphCreate(&graph, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS alloc{};
    alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    alloc.poolProps.location.id = device;
    alloc.bytesize = kGraphBytes;
    CUgraphNode allocNode = nullptr;
    CHECK_DRIVER(cuGraphAddMemAllocNode(&allocNode, graph, nullptr, 0, &alloc));
    CUDA_MEMSET_NODE_PARAMS fill{};
    fill.dst = alloc.dptr;
    fill.value = 0x26;
    fill.elementSize = 1;
    fill.width = kGraphBytes;
    fill.height = 1;
    fill.pitch = kGraphBytes;
    CUgraphNode memsetNode = nullptr;
    CHECK_DRIVER(cuGraphAddMemsetNode(&memsetNode, graph, &allocNode, 1, &fill, context));
    CUgraphNode freeNode = nullptr;
    CHECK_DRIVER(cuGraphAddMemFreeNode(&freeNode, graph, &memsetNode, 1, alloc.dptr));
    CUgraphExec exec = nullptr;
    CHECK_DRIVER(course::graphInstantiate(&exec, graph, 0));
    CHECK_DRIVER(cuGraphLaunch(exec, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    CHECK_DRIVER(cuGraphExecDestroy(exec));
    CHECK_DRIVER(cuGraphDestroy(graph));
}

// A trim's check: less reserved after it than before. With nothing held before, a trim has nothing to
// give back and shows nothing: SKIP.
inline void checkTrimmed(course::Verdict& verdict, const char* name, unsigned long long before,
                         unsigned long long after) {
    if (before == 0)
        skipCheck(name, "the graph allocator held no reserve before the trim");
    else
        verdict.check(name, after < before);
}

// Step 4: cuDeviceGraphMemTrim frees "unused memory that was cached on the specified device for use
// with graphs": "Blocks which are not in use by a graph that is either currently executing or scheduled
// to execute are freed back to the operating system" (cuda.h:19918-19921). cuda.h does not say that the
// cache still holds a graph's memory once the graph is destroyed; that it did was observed in lesson 15
// and on the H200 in the README's captured run (the reserve read before the trim), and where it holds
// nothing the trim's check prints SKIP. The reserve is read as RESERVED_MEM_CURRENT, "Amount of memory,
// in bytes, currently allocated for use by the CUDA graphs asynchronous allocator" (cuda.h:19945-19946).
// cuDeviceSetGraphMemAttribute sets the two high watermarks; of USED_MEM_HIGH cuda.h says "High
// watermark can only be reset to zero" (cuda.h:19970-19971), of RESERVED_MEM_HIGH nothing of the kind
// (cuda.h:19972-19973), and the program sets both to 0. What a reset watermark then reads is judged
// against what the allocator holds at that moment, no more: the course's choice of check, not a rule
// cuda.h states.
inline void trimAndResetGraphMemory(course::Verdict& verdict, CUcontext context, CUdevice device, CUstream stream) {
    const char* const kTrimmed = "cuDeviceGraphMemTrim gave back memory the graph allocator had reserved";
    runGraphOnce(context, device, stream);
    const unsigned long long reservedHigh = graphMemory(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH);
    std::printf("after one launch of a graph that allocates 64 MiB: reserved high %llu bytes\n", reservedHigh);
    verdict.check("the reserved high watermark covers the graph's allocation", reservedHigh >= kGraphBytes);

    const unsigned long long reservedBefore = graphMemory(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
    std::printf("reserved after the graph is destroyed, before the trim: %llu bytes\n", reservedBefore);
    CHECK_DRIVER(cuDeviceGraphMemTrim(device));
    const unsigned long long usedNow = graphMemory(device, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
    const unsigned long long reservedNow = graphMemory(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
    std::printf("after the graph is destroyed and the trim: used %llu bytes, reserved %llu bytes\n", usedNow,
                reservedNow);
    checkTrimmed(verdict, kTrimmed, reservedBefore, reservedNow);
    // Read after the trim, where the memory in use has gone back: a high watermark keeps the peak.
    const unsigned long long usedHigh = graphMemory(device, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH);
    std::printf("used high watermark after the trim: %llu bytes\n", usedHigh);
    verdict.check("the used high watermark covers the graph's allocation", usedHigh >= kGraphBytes);
    cuuint64_t zero = 0;
    CHECK_DRIVER(cuDeviceSetGraphMemAttribute(device, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero));
    zero = 0;
    CHECK_DRIVER(cuDeviceSetGraphMemAttribute(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &zero));
    const unsigned long long usedHighReset = graphMemory(device, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH);
    const unsigned long long reservedHighReset = graphMemory(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH);
    std::printf("high watermarks read back after the reset: used %llu bytes, reserved %llu bytes\n", usedHighReset,
                reservedHighReset);
    verdict.check("the reset used high watermark reads no more than the memory in use", usedHighReset <= usedNow);
    verdict.check("the reset reserved high watermark reads no more than the memory reserved",
                  reservedHighReset <= reservedNow);

    runGraphOnce(context, device, stream);
    const unsigned long long reservedAgain = graphMemory(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH);
    std::printf("reserved high watermark after the next launch: %llu bytes\n", reservedAgain);
    verdict.check("the reserved high watermark climbs again with the next graph", reservedAgain >= kGraphBytes);
    // Hand the next graph's reserve back too before the program goes on, and read that it went.
    const unsigned long long reservedBeforeLast = graphMemory(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
    CHECK_DRIVER(cuDeviceGraphMemTrim(device));
    const unsigned long long reservedAfterLast = graphMemory(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
    std::printf("reserved after the next graph, before and after the last trim: %llu bytes, %llu bytes\n",
                reservedBeforeLast, reservedAfterLast);
    checkTrimmed(verdict, "the last cuDeviceGraphMemTrim gave back the next graph's reserve", reservedBeforeLast,
                 reservedAfterLast);
}

}  // namespace lesson26
