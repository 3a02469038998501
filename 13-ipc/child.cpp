// child.cpp — the second process: the same program started with --child FD. It reads one
// request from the socket, opens the driver and its own primary context, does its half of
// the way asked for, and exits.
#include <cuda.h>
#include <unistd.h>

#include <cstdio>

#include "../common/check_driver.h"
#include "ipc_channel.h"
#include "ways.h"

namespace ways {

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
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));

    int code = 1;
    switch (request.request) {
        case ipc::Request::Legacy: code = childLegacy(socket, request); break;
        case ipc::Request::Vmm: code = childVmm(socket, request, fd, device); break;
#if CUDA_VERSION >= 11020
        case ipc::Request::Pool: code = childPool(socket, request, fd); break;
#endif
        default: std::fprintf(stderr, "child: unknown request %d\n", static_cast<int>(request.request)); break;
    }
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    close(socket);
    return code;
}

}  // namespace ways
