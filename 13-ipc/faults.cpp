// faults.cpp — step 6: what goes wrong, provoked on purpose and reported with the
// driver's own error names (REPORT_DRIVER: the report, then the program carries on).
#include <cuda.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "../common/check_driver.h"
#include "ipc_channel.h"
#include "ways.h"

namespace ways {

namespace {

// One granule of fd-shareable physical memory (not mapped anywhere).
CUmemGenericAllocationHandle createShareable(CUdevice device, size_t* bytes) {
    const CUmemAllocationProp prop = fdShareableProp(device);
    CHECK_DRIVER(cuMemGetAllocationGranularity(bytes, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle allocation = 0;
    CHECK_DRIVER(cuMemCreate(&allocation, *bytes, &prop, 0));
    return allocation;
}

size_t freeDeviceMemory() {
    size_t freeBytes = 0;
    size_t totalBytes = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &totalBytes));
    return freeBytes;
}

}  // namespace

bool childDiesBeforeMapping(const char* self, int ordinal, CUdevice device) {
    const size_t freeBefore = freeDeviceMemory();
    size_t bytes = 0;
    const CUmemGenericAllocationHandle allocation = createShareable(device, &bytes);
    int fd = -1;
    CHECK_DRIVER(cuMemExportToShareableHandle(&fd, allocation, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));

    ipc::Child child = ipc::spawnChild(self, ordinal);
    ipc::Message request;
    request.request = ipc::Request::DieBeforeMap;
    request.bytes = bytes;
    const bool sent = child.pid > 0 && ipc::sendMessage(child.socket, request, fd);
    close(fd);
    // The parent waits for an answer that never comes: the socket reports EOF when the
    // child's end closes, which the kernel does when the child dies. No timeout needed.
    ipc::Message reply;
    int noFd = -1;
    const bool answered = sent && ipc::receiveMessage(child.socket, reply, &noFd);
    std::printf("fault child dies before mapping: %s\n",
                answered ? "the child answered (unexpected)" : "no answer, the socket reported EOF");
    const std::string ended = ipc::waitForChild(child);
    std::printf("fault child dies before mapping, child: %s\n", ended.c_str());

    // The descriptor the dead child held was closed by the kernel; the parent's handle is
    // the last reference, so releasing it frees the memory.
    CHECK_DRIVER(cuMemRelease(allocation));
    const long long difference = static_cast<long long>(freeDeviceMemory()) - static_cast<long long>(freeBefore);
    constexpr long long kPageBytes = 2LL << 20;
    std::printf("fault child dies before mapping, device memory after release: %s (difference %lld bytes)\n",
                std::llabs(difference) <= kPageBytes ? "back to its start" : "NOT back to its start", difference);
    return !answered && ended == "exit code 3" && std::llabs(difference) <= kPageBytes;
}

bool importClosedFd(CUdevice device) {
    size_t bytes = 0;
    const CUmemGenericAllocationHandle allocation = createShareable(device, &bytes);
    int fd = -1;
    CHECK_DRIVER(cuMemExportToShareableHandle(&fd, allocation, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    close(fd);  // too early: the number now names nothing
    // The driver cannot tell a closed descriptor from any other failure of the kernel call
    // it makes with it; driver 580 answers CUDA_ERROR_UNKNOWN.
    CUmemGenericAllocationHandle imported = 0;
    const CUresult result = REPORT_DRIVER(cuMemImportFromShareableHandle(
        &imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    std::printf("fault closed fd: cuMemImportFromShareableHandle returned %s\n", course::driverErrorName(result));
    if (result == CUDA_SUCCESS) CHECK_DRIVER(cuMemRelease(imported));
    CHECK_DRIVER(cuMemRelease(allocation));
    return result != CUDA_SUCCESS;
}

bool openLegacyHandleInSameProcess() {
    CUdeviceptr buffer = 0;
    CHECK_DRIVER(cuMemAlloc(&buffer, size_t{1} << 20));
    CUipcMemHandle handle{};
    CHECK_DRIVER(cuIpcGetMemHandle(&handle, buffer));
    // A legacy handle is for another process: the exporter already has the address. The
    // driver answers CUDA_ERROR_INVALID_CONTEXT (the runtime's cudaErrorDeviceUninitialized).
    CUdeviceptr opened = 0;
    const CUresult result = REPORT_DRIVER(cuIpcOpenMemHandle(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    std::printf("fault same process: cuIpcOpenMemHandle returned %s\n", course::driverErrorName(result));
    if (result == CUDA_SUCCESS) CHECK_DRIVER(cuIpcCloseMemHandle(opened));
    CHECK_DRIVER(cuMemFree(buffer));
    return result != CUDA_SUCCESS;
}

}  // namespace ways
