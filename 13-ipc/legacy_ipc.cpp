// legacy_ipc.cpp — step 3: the legacy way, cuIpcGetMemHandle / cuIpcOpenMemHandle, with an
// interprocess event to order the child's write before the parent's read. Also the parent's
// three steps every way shares: the child's answer, the pattern, the child's exit.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../common/check_driver.h"
#include "ipc_channel.h"
#include "ways.h"

namespace ways {

bool childSucceeded(const char* way, bool answered, const ipc::Message& reply, course::Verdict& verdict) {
    const bool succeeded = answered && reply.result == CUDA_SUCCESS;
    if (!answered)
        std::printf("%s child's driver calls: no answer (the child ended first)\n", way);
    else if (succeeded)
        std::printf("%s child's driver calls: all succeeded\n", way);
    else
        std::printf("%s child's driver calls: %.*s failed with %s\n", way, static_cast<int>(sizeof(reply.failedCall)),
                    reply.failedCall, course::driverErrorName(static_cast<CUresult>(reply.result)));
    return verdict.check((std::string(way) + " child's driver calls succeeded").c_str(), succeeded);
}

void verifyPattern(const char* way, bool childWrote, CUdeviceptr buffer, size_t bytes, std::uint32_t seed,
                   CUstream stream, course::Verdict& verdict) {
    const std::string check = std::string(way) + " parent reads the child's pattern";
    if (!childWrote) {
        std::printf("%s: not read back (the child did not write)\n", way);
        verdict.check(check.c_str(), false);
        return;
    }
    const size_t words = bytes / sizeof(std::uint32_t);
    std::vector<std::uint32_t> back(words);
    CHECK_DRIVER(cuMemcpyDtoHAsync(back.data(), buffer, bytes, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const std::vector<std::uint32_t> expected = pattern(words, seed);
    size_t equal = 0;
    for (size_t i = 0; i < words; ++i) equal += back[i] == expected[i] ? 1 : 0;
    std::printf("%s: %zu of %zu words carry the child's pattern\n", way, equal, words);
    verdict.check(check.c_str(), equal == words);
}

void reapChild(const char* way, ipc::Child& child, course::Verdict& verdict) {
    const std::string ended = ipc::waitForChild(child);
    std::printf("%s child: %s\n", way, ended.c_str());
    verdict.check((std::string(way) + " child exits cleanly").c_str(), ended == "exit code 0");
}

bool shareLegacy(const char* self, int ordinal, CUstream stream, course::Verdict& verdict) {
    // A cuMemAlloc block may be carved out of a larger one the driver holds, and a legacy
    // handle shares the driver's whole block: NVIDIA's CUDA Programming Guide (section 4.15.1)
    // warns that sharing a sub-allocation "may cause other sub-allocations to be shared",
    // and recommends sharing only allocations with a 2 MiB-aligned size. So 2 MiB.
    constexpr size_t kBytes = size_t{2} << 20;
    constexpr size_t kTwoMiB = size_t{2} << 20;
    // Ordinary cuMemAlloc memory: the legacy way shares what already exists. Cleared first
    // (and the clear finished) so that a write that never came cannot pass.
    CUdeviceptr buffer = 0;
    CHECK_DRIVER(cuMemAlloc(&buffer, kBytes));
    CUdeviceptr base = 0;
    size_t allocated = 0;
    CHECK_DRIVER(cuMemGetAddressRange(&base, &allocated, buffer));
    std::printf("legacy: the allocation the driver reports: %zu bytes, starting at the buffer: %s\n", allocated,
                base == buffer ? "yes" : "no");
    verdict.check("legacy shares a whole allocation of a 2 MiB-multiple size",
                  base == buffer && allocated % kTwoMiB == 0);
    CHECK_DRIVER(cuMemsetD32Async(buffer, 0, kBytes / 4, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));

    // The memory handle first. NVIDIA's CUDA Programming Guide (section 4.15.1) says that on
    // Linux for Tegra only the event calls of legacy IPC are supported, so an integrated GPU
    // that reports IPC events may still refuse this call. cuda.h names no error for that case:
    // on an integrated GPU any refusal is "not here" (a SKIP); on a discrete GPU, a failure.
    ipc::Message request;
    request.request = ipc::Request::Legacy;
    request.bytes = kBytes;
    const CUresult exported = REPORT_DRIVER(cuIpcGetMemHandle(&request.memHandle, buffer));
    if (exported != CUDA_SUCCESS) {
        CUdevice device = 0;
        CHECK_DRIVER(cuCtxGetDevice(&device));
        int integrated = 0;
        CHECK_DRIVER(cuDeviceGetAttribute(&integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED, device));
        if (integrated == 0) std::exit(EXIT_FAILURE);  // reported above: a failure on a discrete GPU
        std::printf("section legacy-ipc: SKIP (cuIpcGetMemHandle returned %s on an integrated GPU)\n",
                    course::driverErrorName(exported));
        CHECK_DRIVER(cuMemFree(buffer));
        return false;
    }
    // An interprocess event must also have timing disabled. The child records it after its
    // write; the parent's stream waits on it: GPU-side ordering across two processes.
    CUevent written = nullptr;
    CHECK_DRIVER(cuEventCreate(&written, CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS));
    CHECK_DRIVER(cuIpcGetEventHandle(&request.eventHandle, written));
    std::printf(
        "legacy: exported buffer 0x%llx (%zu bytes) as a %zu-byte CUipcMemHandle and its event as a "
        "CUipcEventHandle\n",
        static_cast<unsigned long long>(buffer), kBytes, sizeof(request.memHandle));

    ipc::Child child = ipc::spawnChild(self, ordinal);
    ipc::Message reply;
    int noFd = -1;
    const bool answered =
        child.pid > 0 && ipc::sendMessage(child.socket, request) && ipc::receiveMessage(child.socket, reply, &noFd);
    const bool childWrote = childSucceeded("legacy", answered, reply, verdict);
    // The child's answer says "queued", not "done": the parent's stream waits for the event
    // the child recorded after its copy, and the copy back comes after that wait.
    if (childWrote) CHECK_DRIVER(cuStreamWaitEvent(stream, written, 0));
    verifyPattern("legacy", childWrote, buffer, kBytes, kLegacySeed, stream, verdict);
    if (childWrote) {
        ipc::Message verified;
        verified.request = ipc::Request::Verified;
        ipc::sendMessage(child.socket, verified);
    }
    reapChild("legacy", child, verdict);

    CHECK_DRIVER(cuEventDestroy(written));
    CHECK_DRIVER(cuMemFree(buffer));  // after the child closed its mapping (it has exited)
    return true;
}

void childLegacy(int socket, const ipc::Message& request, ChildCalls& calls) {
    // Maps the parent's allocation into this process's address space. The address need
    // not equal the parent's: only the handle is shared, never a pointer.
    CUdeviceptr shared = 0;
    CHILD_CALL(calls, cuIpcOpenMemHandle(&shared, request.memHandle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    const bool opened = calls.ok();
    CUevent written = nullptr;
    CHILD_CALL(calls, cuIpcOpenEventHandle(&written, request.eventHandle));
    CUstream stream = nullptr;
    CHILD_CALL(calls, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    // Page-locked host memory: from it cuMemcpyHtoDAsync is asynchronous. From pageable
    // memory it "might be synchronous with respect to host" (the driver API's notes on
    // synchronisation: it may stage the data through pinned memory first), and the child
    // would then have waited for much of its copy after all.
    void* host = nullptr;
    CHILD_CALL(calls, cuMemAllocHost(&host, request.bytes));
    if (calls.ok()) std::memcpy(host, pattern(request.bytes / 4, kLegacySeed).data(), request.bytes);

    // The child does not wait for its copy: recording the parent's event after it is
    // enough, the parent's stream waits on that event on the GPU.
    CHILD_CALL(calls, cuMemcpyHtoDAsync(shared, host, request.bytes, stream));
    CHILD_CALL(calls, cuEventRecord(written, stream));
    if (calls.ok())
        std::printf(
            "child: cuIpcOpenMemHandle mapped the buffer at 0x%llx; pattern queued, the parent's event recorded\n",
            static_cast<unsigned long long>(shared));
    answerParent(socket, calls);

    // Keep the mapping (and the host buffer the copy reads) until the parent has read the
    // buffer: it says so, or closes the socket (EOF) when it will not read.
    int noFd = -1;
    ipc::Message verified;
    ipc::receiveMessage(socket, verified, &noFd);
    if (stream != nullptr) {
        CHILD_RELEASE(calls, cuStreamSynchronize(stream));
        CHILD_RELEASE(calls, cuStreamDestroy(stream));
    }
    if (host != nullptr) CHILD_RELEASE(calls, cuMemFreeHost(host));
    if (written != nullptr) CHILD_RELEASE(calls, cuEventDestroy(written));
    if (opened) CHILD_RELEASE(calls, cuIpcCloseMemHandle(shared));
}

}  // namespace ways
