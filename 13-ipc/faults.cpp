// faults.cpp — step 6: what goes wrong, provoked on purpose and reported with the
// driver's own error names (REPORT_DRIVER: the report, then the program carries on).
#include <cuda.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string>

#include "../common/check_driver.h"
#include "ipc_channel.h"
#include "ways.h"

namespace ways {

namespace {

size_t freeDeviceMemory() {
    size_t freeBytes = 0;
    size_t totalBytes = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &totalBytes));
    return freeBytes;
}

}  // namespace

void childDiesBeforeMapping(const char* self, int ordinal, CUdevice device, course::Verdict& verdict) {
    // Several granules, so that what cuMemGetInfo shows can be told from the driver's own
    // small allocations: the check below compares against half the allocation's size.
    constexpr size_t kGranules = 32;
    const CUmemAllocationProp prop = fdShareableProp(device);
    size_t granularity = 0;
    CHECK_DRIVER(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    const size_t bytes = kGranules * granularity;
    const size_t freeAtStart = freeDeviceMemory();
    CUmemGenericAllocationHandle allocation = 0;
    CHECK_DRIVER(cuMemCreate(&allocation, bytes, &prop, 0));
    int fd = -1;
    CHECK_DRIVER(cuMemExportToShareableHandle(&fd, allocation, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    ipc::trackDescriptor(fd, "the descriptor exported for the dying child");
    std::printf("fault child dies before mapping, allocation: %zu bytes (%zu granules)\n", bytes, kGranules);

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
    verdict.check("parent sees end of file when the child dies", sent && !answered);
    const std::string ended = ipc::waitForChild(child);
    std::printf("fault child dies before mapping, child: %s\n", ended.c_str());
    verdict.check("waitpid reports the dead child's exit code", ended == "exit code 3");

    // The descriptor the dead child held was closed by the kernel, and the parent closed its
    // own: the parent's handle is the last reference, so releasing it frees the memory
    // (cuda.h: freed once "all outstanding references to the handle (including it's
    // shareable counterparts)" are released). When the driver has finished dropping a dead
    // process's references is not promised, so the parent polls cuMemGetInfo every 10 ms,
    // for at most 5 s, until at least half the allocation is back.
    const size_t freeHeld = freeDeviceMemory();
    CHECK_DRIVER(cuMemRelease(allocation));
    const long long half = static_cast<long long>(bytes / 2);
    long long givenBack = 0;
    for (int poll = 0; poll < 500; ++poll) {
        givenBack = static_cast<long long>(freeDeviceMemory()) - static_cast<long long>(freeHeld);
        if (givenBack >= half) break;
        usleep(10 * 1000);
    }
    const long long againstStart = static_cast<long long>(freeHeld) + givenBack - static_cast<long long>(freeAtStart);
    std::printf("fault child dies before mapping, free memory given back after cuMemRelease: %lld bytes\n", givenBack);
    std::printf("fault child dies before mapping, free memory against its start: %lld bytes\n", againstStart);
    verdict.checkFreeMemory("cuMemRelease gives the shared allocation back", givenBack >= half);
}

void importDescriptorThatNamesNothing(course::Verdict& verdict) {
    // A descriptor closed too early leaves a number that names nothing — until this process
    // opens anything else: the kernel gives every new descriptor the lowest free number, and
    // the driver opens files of its own. So the fault imports a number certain to name
    // nothing: the highest this process may open (RLIMIT_NOFILE - 1), checked just before.
    rlimit limit{};
    rlim_t cap = rlim_t{1} << 20;  // Linux's default ceiling (fs.nr_open), for an unlimited soft limit
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < cap) cap = limit.rlim_cur;
    const int fd = static_cast<int>(cap) - 1;
    if (fd < 0 || fcntl(fd, F_GETFD) != -1 || errno != EBADF) {
        std::printf("section closed-fd fault: SKIP (descriptor %d is open here)\n", fd);
        return;
    }
    // cuda.h names no error for this case; the Expected output shows what the course's H100 answered.
    CUmemGenericAllocationHandle imported = 0;
    const CUresult result = REPORT_DRIVER(cuMemImportFromShareableHandle(
        &imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    std::printf("fault closed fd: cuMemImportFromShareableHandle returned %s\n", course::driverErrorName(result));
    verdict.check("import of a descriptor that names nothing fails", result != CUDA_SUCCESS);
    if (result == CUDA_SUCCESS) CHECK_DRIVER(cuMemRelease(imported));
}

void openLegacyHandleInSameProcess(course::Verdict& verdict) {
    CUdeviceptr buffer = 0;
    CHECK_DRIVER(cuMemAlloc(&buffer, size_t{1} << 20));
    CUipcMemHandle handle{};
    CHECK_DRIVER(cuIpcGetMemHandle(&handle, buffer));
    // A legacy handle is for another process ("exported from another process", cuda.h): the
    // exporter already has the address. The course's H100 answered CUDA_ERROR_INVALID_CONTEXT
    // (the runtime's cudaErrorDeviceUninitialized).
    CUdeviceptr opened = 0;
    const CUresult result = REPORT_DRIVER(cuIpcOpenMemHandle(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    std::printf("fault same process: cuIpcOpenMemHandle returned %s\n", course::driverErrorName(result));
    verdict.check("cuIpcOpenMemHandle refuses the exporting process", result != CUDA_SUCCESS);
    if (result == CUDA_SUCCESS) CHECK_DRIVER(cuIpcCloseMemHandle(opened));
    CHECK_DRIVER(cuMemFree(buffer));
}

}  // namespace ways
