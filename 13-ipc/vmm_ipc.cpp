// vmm_ipc.cpp — step 4: the modern way. Physical memory made by cuMemCreate is exported
// as a POSIX file descriptor, the descriptor crosses the socket (SCM_RIGHTS), and the
// child imports it and maps it into an address range of its own.
#include <cuda.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "../common/check_driver.h"
#include "ipc_channel.h"
#include "ways.h"

namespace ways {

CUmemAllocationProp fdShareableProp(CUdevice device) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    // Asked for at creation: memory made without it cannot be exported later.
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}

namespace {

// Read and write access for `device`, as cuMemSetAccess takes it.
CUmemAccessDesc readWriteFor(CUdevice device) {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return access;
}

// Reserves an address range, maps `allocation` there and lets `device` read and write it.
CUdeviceptr mapReadWrite(CUmemGenericAllocationHandle allocation, size_t bytes, CUdevice device) {
    CUdeviceptr address = 0;
    CHECK_DRIVER(cuMemAddressReserve(&address, bytes, 0, 0, 0));
    CHECK_DRIVER(cuMemMap(address, bytes, 0, allocation, 0));
    const CUmemAccessDesc access = readWriteFor(device);
    CHECK_DRIVER(cuMemSetAccess(address, bytes, &access, 1));
    return address;
}

void unmapAndFree(CUdeviceptr address, size_t bytes) {
    CHECK_DRIVER(cuMemUnmap(address, bytes));
    CHECK_DRIVER(cuMemAddressFree(address, bytes));
}

}  // namespace

void shareVmm(const char* self, int ordinal, CUdevice device, CUstream stream, course::Verdict& verdict) {
    const CUmemAllocationProp prop = fdShareableProp(device);
    size_t granularity = 0;
    CHECK_DRIVER(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    const size_t bytes = ((size_t{1} << 20) + granularity - 1) / granularity * granularity;
    CUmemGenericAllocationHandle allocation = 0;
    CHECK_DRIVER(cuMemCreate(&allocation, bytes, &prop, 0));
    // The parent maps it too: to clear it now and to read the child's pattern later.
    const CUdeviceptr address = mapReadWrite(allocation, bytes, device);
    CHECK_DRIVER(cuMemsetD32Async(address, 0, bytes / 4, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));

    // The shareable handle of a POSIX fd type is an int: cuMemExportToShareableHandle writes
    // a new descriptor into it, which this process must close (tracked until the end).
    int fd = -1;
    CHECK_DRIVER(cuMemExportToShareableHandle(&fd, allocation, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    ipc::trackDescriptor(fd, "the vmm allocation's exported descriptor");
    std::printf(
        "vmm: cuMemCreate made %zu bytes (granularity %zu bytes), mapped at 0x%llx, exported as a file "
        "descriptor\n",
        bytes, granularity, static_cast<unsigned long long>(address));

    ipc::Child child = ipc::spawnChild(self, ordinal);
    ipc::Message request;
    request.request = ipc::Request::Vmm;
    request.bytes = bytes;
    const bool sent = child.pid > 0 && ipc::sendMessage(child.socket, request, fd);
    close(fd);  // the message carried a duplicate; the child's copy keeps the memory reachable
    ipc::Message reply;
    int noFd = -1;
    const bool answered = sent && ipc::receiveMessage(child.socket, reply, &noFd);
    const bool childWrote = childSucceeded("vmm", answered, reply, verdict);
    verifyPattern("vmm", childWrote, address, bytes, kVmmSeed, stream, verdict);
    reapChild("vmm", child, verdict);

    unmapAndFree(address, bytes);
    CHECK_DRIVER(cuMemRelease(allocation));
}

void childVmm(int socket, const ipc::Message& request, int fd, CUdevice device, ChildCalls& calls) {
    // The descriptor's number is passed as the handle itself, cast to void*.
    CUmemGenericAllocationHandle allocation = 0;
    CHILD_CALL(calls,
               cuMemImportFromShareableHandle(&allocation, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    const bool imported = calls.ok();
    if (fd >= 0) close(fd);  // the imported handle holds the memory now; the descriptor is no longer needed

    // The same three calls as the parent's mapReadWrite, each kept for the answer.
    CUdeviceptr address = 0;
    CHILD_CALL(calls, cuMemAddressReserve(&address, request.bytes, 0, 0, 0));
    const bool reserved = calls.ok();
    CHILD_CALL(calls, cuMemMap(address, request.bytes, 0, allocation, 0));
    const bool mapped = calls.ok();
    const CUmemAccessDesc access = readWriteFor(device);
    CHILD_CALL(calls, cuMemSetAccess(address, request.bytes, &access, 1));

    // No interprocess event in this way: the child waits for its own copy before it answers.
    CUstream stream = nullptr;
    CHILD_CALL(calls, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    const std::vector<std::uint32_t> values = pattern(request.bytes / 4, kVmmSeed);
    CHILD_CALL(calls, cuMemcpyHtoDAsync(address, values.data(), request.bytes, stream));
    CHILD_CALL(calls, cuStreamSynchronize(stream));
    if (calls.ok())
        std::printf("child: imported the descriptor, mapped it at 0x%llx with read-write access, wrote the pattern\n",
                    static_cast<unsigned long long>(address));
    // The child's mapping and handle go; the parent's handle keeps the memory alive.
    if (stream != nullptr) CHILD_RELEASE(calls, cuStreamDestroy(stream));
    if (mapped) CHILD_RELEASE(calls, cuMemUnmap(address, request.bytes));
    if (reserved) CHILD_RELEASE(calls, cuMemAddressFree(address, request.bytes));
    if (imported) CHILD_RELEASE(calls, cuMemRelease(allocation));
    answerParent(socket, calls);
}

}  // namespace ways
