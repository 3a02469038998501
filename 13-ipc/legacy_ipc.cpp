// legacy_ipc.cpp — step 3: the legacy way, cuIpcGetMemHandle / cuIpcOpenMemHandle, with an
// interprocess event to order the child's write before the parent's read.
#include <cuda.h>

#include <cstdio>

#include "../common/check_driver.h"
#include "ipc_channel.h"
#include "ways.h"

namespace ways {

bool verifyPattern(const char* way, CUdeviceptr buffer, size_t bytes, std::uint32_t seed, CUstream stream) {
    const size_t words = bytes / sizeof(std::uint32_t);
    std::vector<std::uint32_t> back(words);
    CHECK_DRIVER(cuMemcpyDtoHAsync(back.data(), buffer, bytes, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const std::vector<std::uint32_t> expected = pattern(words, seed);
    size_t equal = 0;
    for (size_t i = 0; i < words; ++i) equal += back[i] == expected[i] ? 1 : 0;
    std::printf("%s: %zu of %zu words carry the child's pattern\n", way, equal, words);
    return equal == words;
}

bool shareLegacy(const char* self, int ordinal, CUstream stream) {
    constexpr size_t kBytes = size_t{1} << 20;
    // Ordinary cuMemAlloc memory: the legacy way shares what already exists. Cleared first
    // (and the clear finished) so that a write that never came cannot pass.
    CUdeviceptr buffer = 0;
    CHECK_DRIVER(cuMemAlloc(&buffer, kBytes));
    CHECK_DRIVER(cuMemsetD32Async(buffer, 0, kBytes / 4, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    // An interprocess event must also have timing disabled. The child records it after its
    // write; the parent's stream waits on it: GPU-side ordering across two processes.
    CUevent written = nullptr;
    CHECK_DRIVER(cuEventCreate(&written, CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS));

    ipc::Message request;
    request.request = ipc::Request::Legacy;
    request.bytes = kBytes;
    CHECK_DRIVER(cuIpcGetMemHandle(&request.memHandle, buffer));
    CHECK_DRIVER(cuIpcGetEventHandle(&request.eventHandle, written));
    std::printf(
        "legacy: exported buffer 0x%llx (%zu bytes) as a %zu-byte CUipcMemHandle and its event as a "
        "CUipcEventHandle\n",
        static_cast<unsigned long long>(buffer), kBytes, sizeof(request.memHandle));

    bool passed = false;
    ipc::Child child = ipc::spawnChild(self, ordinal);
    ipc::Message reply;
    int noFd = -1;
    if (child.pid > 0 && ipc::sendMessage(child.socket, request) && ipc::receiveMessage(child.socket, reply, &noFd) &&
        reply.result == CUDA_SUCCESS) {
        CHECK_DRIVER(cuStreamWaitEvent(stream, written, 0));
        passed = verifyPattern("legacy", buffer, kBytes, kLegacySeed, stream);
        ipc::Message verified;
        verified.request = ipc::Request::Verified;
        ipc::sendMessage(child.socket, verified);
    }
    std::printf("legacy child: %s\n", ipc::waitForChild(child).c_str());

    CHECK_DRIVER(cuEventDestroy(written));
    CHECK_DRIVER(cuMemFree(buffer));  // after the child closed its mapping (it has exited)
    return passed;
}

int childLegacy(int socket, const ipc::Message& request) {
    // Maps the parent's allocation into this process's address space. The address need
    // not equal the parent's: only the handle is shared, never a pointer.
    CUdeviceptr shared = 0;
    CHECK_DRIVER(cuIpcOpenMemHandle(&shared, request.memHandle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CUevent written = nullptr;
    CHECK_DRIVER(cuIpcOpenEventHandle(&written, request.eventHandle));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    // The child does not wait for its copy: recording the parent's event after it is
    // enough, the parent's stream waits on that event on the GPU.
    const std::vector<std::uint32_t> values = pattern(request.bytes / 4, kLegacySeed);
    CHECK_DRIVER(cuMemcpyHtoDAsync(shared, values.data(), request.bytes, stream));
    CHECK_DRIVER(cuEventRecord(written, stream));
    std::printf("child: cuIpcOpenMemHandle mapped the buffer at 0x%llx; pattern queued, the parent's event recorded\n",
                static_cast<unsigned long long>(shared));
    ipc::Message reply;
    reply.request = ipc::Request::Written;
    ipc::sendMessage(socket, reply);

    // Keep the mapping until the parent has read the buffer, then unmap it.
    int noFd = -1;
    ipc::Message verified;
    ipc::receiveMessage(socket, verified, &noFd);
    CHECK_DRIVER(cuStreamSynchronize(stream));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuEventDestroy(written));
    CHECK_DRIVER(cuIpcCloseMemHandle(shared));
    return 0;
}

}  // namespace ways
