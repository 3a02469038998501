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

// Reserves an address range, maps `allocation` there and lets `device` read and write it.
CUdeviceptr mapReadWrite(CUmemGenericAllocationHandle allocation, size_t bytes, CUdevice device) {
    CUdeviceptr address = 0;
    CHECK_DRIVER(cuMemAddressReserve(&address, bytes, 0, 0, 0));
    CHECK_DRIVER(cuMemMap(address, bytes, 0, allocation, 0));
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK_DRIVER(cuMemSetAccess(address, bytes, &access, 1));
    return address;
}

void unmapAndFree(CUdeviceptr address, size_t bytes) {
    CHECK_DRIVER(cuMemUnmap(address, bytes));
    CHECK_DRIVER(cuMemAddressFree(address, bytes));
}

}  // namespace

bool shareVmm(const char* self, int ordinal, CUdevice device, CUstream stream) {
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
    // a new descriptor into it, which this process must close.
    int fd = -1;
    CHECK_DRIVER(cuMemExportToShareableHandle(&fd, allocation, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    std::printf(
        "vmm: cuMemCreate made %zu bytes (granularity %zu bytes), mapped at 0x%llx, exported as a file "
        "descriptor\n",
        bytes, granularity, static_cast<unsigned long long>(address));

    bool passed = false;
    ipc::Child child = ipc::spawnChild(self, ordinal);
    ipc::Message request;
    request.request = ipc::Request::Vmm;
    request.bytes = bytes;
    const bool sent = child.pid > 0 && ipc::sendMessage(child.socket, request, fd);
    close(fd);  // the message carried a duplicate; the child's copy keeps the memory reachable
    ipc::Message reply;
    int noFd = -1;
    if (sent && ipc::receiveMessage(child.socket, reply, &noFd) && reply.result == CUDA_SUCCESS)
        passed = verifyPattern("vmm", address, bytes, kVmmSeed, stream);
    std::printf("vmm child: %s\n", ipc::waitForChild(child).c_str());

    unmapAndFree(address, bytes);
    CHECK_DRIVER(cuMemRelease(allocation));
    return passed;
}

int childVmm(int socket, const ipc::Message& request, int fd, CUdevice device) {
    // The descriptor's number is passed as the handle itself, cast to void*.
    CUmemGenericAllocationHandle allocation = 0;
    CHECK_DRIVER(cuMemImportFromShareableHandle(&allocation, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd);  // the imported handle holds the memory now; the descriptor is no longer needed
    const CUdeviceptr address = mapReadWrite(allocation, request.bytes, device);

    // No interprocess event in this way: the child waits for its own copy before it answers.
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    const std::vector<std::uint32_t> values = pattern(request.bytes / 4, kVmmSeed);
    CHECK_DRIVER(cuMemcpyHtoDAsync(address, values.data(), request.bytes, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    std::printf("child: imported the descriptor, mapped it at 0x%llx with read-write access, wrote the pattern\n",
                static_cast<unsigned long long>(address));
    CHECK_DRIVER(cuStreamDestroy(stream));
    // The child's mapping and handle go; the parent's handle keeps the memory alive.
    unmapAndFree(address, request.bytes);
    CHECK_DRIVER(cuMemRelease(allocation));

    ipc::Message reply;
    reply.request = ipc::Request::Written;
    ipc::sendMessage(socket, reply);
    return 0;
}

}  // namespace ways
