// child.cpp — the second process: the same program started with --child FD. It reads one
// request from the socket, opens the driver and its own primary context, does its half of
// the way asked for, answers with the result of its driver calls, and exits.
#include <cuda.h>
#include <unistd.h>

#include <cstdio>

#include "ipc_channel.h"
#include "ways.h"

namespace ways {

void answerParent(int socket, const ChildCalls& calls) {
    ipc::Message reply;
    reply.request = ipc::Request::Written;
    reply.result = static_cast<int>(calls.result);
    std::snprintf(reply.failedCall, sizeof(reply.failedCall), "%s", calls.failedCall);
    ipc::sendMessage(socket, reply);
}

int runChild(int socket, int ordinal) {
    ipc::Message request;
    int fd = -1;
    if (!ipc::receiveMessage(socket, request, &fd)) {
        std::fprintf(stderr, "child: no request from a parent on fd %d (this mode is started by the lesson itself)\n",
                     socket);
        return 1;
    }
    if (request.request == ipc::Request::DieBeforeMap) {
        // A crash stand-in: _exit skips every clean-up. The kernel still closes the
        // received descriptor and the socket, and the parent sees EOF.
        std::printf("child: received the descriptor, exiting with code 3 before it maps anything\n");
        std::fflush(stdout);
        _exit(3);
    }

    // A process of its own needs its own driver state: nothing of the parent's CUDA
    // state crosses exec (and a fork without exec may not use CUDA at all).
    ChildCalls calls;
    CHILD_CALL(calls, cuInit(0));
    CUdevice device = 0;
    CHILD_CALL(calls, cuDeviceGet(&device, ordinal));
    CUcontext context = nullptr;
    CHILD_CALL(calls, cuDevicePrimaryCtxRetain(&context, device));
    const bool retained = calls.ok();
    CHILD_CALL(calls, cuCtxSetCurrent(context));

    if (!calls.ok()) {
        if (fd >= 0) close(fd);
        answerParent(socket, calls);  // the parent learns why before it sees the exit code
    } else {
        switch (request.request) {
            case ipc::Request::Legacy: childLegacy(socket, request, calls); break;
            case ipc::Request::Vmm: childVmm(socket, request, fd, device, calls); break;
#if CUDA_VERSION >= 11020
            case ipc::Request::Pool: childPool(socket, request, fd, calls); break;
#endif
            default:
                std::fprintf(stderr, "child: unknown request %d\n", static_cast<int>(request.request));
                calls.result = CUDA_ERROR_INVALID_VALUE;
                answerParent(socket, calls);
                break;
        }
    }
    if (retained) CHILD_RELEASE(calls, cuDevicePrimaryCtxRelease(device));
    close(socket);
    return calls.ok() ? 0 : 1;
}

}  // namespace ways
