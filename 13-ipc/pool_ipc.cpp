// pool_ipc.cpp — step 5: a whole memory pool exported as a POSIX file descriptor. The
// descriptor shares the pool once; each allocation then crosses as a small
// CUmemPoolPtrExportData (plain bytes), which the child turns into an address of its own.
#include <cuda.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "../common/check_driver.h"
#include "ipc_channel.h"
#include "ways.h"

namespace ways {

// CUDA 11.2 added the pool export calls; the guard keeps the file compiling with older
// headers (main asks cuDriverGetVersion before it calls any of them).
#if CUDA_VERSION >= 11020
void sharePool(const char* self, int ordinal, CUdevice device, CUstream stream, course::Verdict& verdict) {
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;  // the pool, not the device's default one
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = device;
    CUmemoryPool pool = nullptr;
    CHECK_DRIVER(cuMemPoolCreate(&pool, &props));

    // A stream-ordered allocation: it exists once the stream reaches it. The child may touch
    // it only after that, so the parent waits for the stream before sharing it.
    constexpr size_t kBytes = size_t{1} << 20;
    CUdeviceptr buffer = 0;
    CHECK_DRIVER(cuMemAllocFromPoolAsync(&buffer, kBytes, pool, stream));
    CHECK_DRIVER(cuMemsetD32Async(buffer, 0, kBytes / 4, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));

    int fd = -1;
    CHECK_DRIVER(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    ipc::trackDescriptor(fd, "the pool's exported descriptor");
    ipc::Message request;
    request.request = ipc::Request::Pool;
    request.bytes = kBytes;
    CHECK_DRIVER(cuMemPoolExportPointer(&request.poolPointer, buffer));
    std::printf(
        "pool: buffer 0x%llx (%zu bytes) from a pool exported as a file descriptor, its pointer as a "
        "%zu-byte CUmemPoolPtrExportData\n",
        static_cast<unsigned long long>(buffer), kBytes, sizeof(request.poolPointer));

    ipc::Child child = ipc::spawnChild(self, ordinal);
    const bool sent = child.pid > 0 && ipc::sendMessage(child.socket, request, fd);
    close(fd);
    ipc::Message reply;
    int noFd = -1;
    const bool answered = sent && ipc::receiveMessage(child.socket, reply, &noFd);
    const bool childWrote = childSucceeded("pool", answered, reply, verdict);
    verifyPattern("pool", childWrote, buffer, kBytes, kPoolSeed, stream, verdict);
    reapChild("pool", child, verdict);

    // Every importer freed its view first (the child did before answering): now the owner may.
    CHECK_DRIVER(cuMemFreeAsync(buffer, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    CHECK_DRIVER(cuMemPoolDestroy(pool));
}

void childPool(int socket, const ipc::Message& request, int fd, ChildCalls& calls) {
    CUmemoryPool pool = nullptr;
    CHILD_CALL(calls,
               cuMemPoolImportFromShareableHandle(&pool, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                                                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    const bool imported = calls.ok();
    if (fd >= 0) close(fd);
    // An imported pool cannot allocate; it only turns the parent's export data into addresses.
    CUmemPoolPtrExportData exported = request.poolPointer;
    CUdeviceptr buffer = 0;
    CHILD_CALL(calls, cuMemPoolImportPointer(&buffer, pool, &exported));
    const bool pointerImported = calls.ok();

    CUstream stream = nullptr;
    CHILD_CALL(calls, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    const std::vector<std::uint32_t> values = pattern(request.bytes / 4, kPoolSeed);
    CHILD_CALL(calls, cuMemcpyHtoDAsync(buffer, values.data(), request.bytes, stream));
    // An importer frees its view before the owner frees the allocation: queued after the
    // write, and finished (the synchronize) before the child answers.
    if (pointerImported) CHILD_RELEASE(calls, cuMemFreeAsync(buffer, stream));
    CHILD_RELEASE(calls, stream != nullptr ? cuStreamSynchronize(stream) : cuCtxSynchronize());
    if (calls.ok())
        std::printf("child: imported the pool and the pointer (0x%llx), wrote the pattern, freed its view\n",
                    static_cast<unsigned long long>(buffer));
    if (stream != nullptr) CHILD_RELEASE(calls, cuStreamDestroy(stream));
    if (imported) CHILD_RELEASE(calls, cuMemPoolDestroy(pool));
    answerParent(socket, calls);
}
#endif

}  // namespace ways
