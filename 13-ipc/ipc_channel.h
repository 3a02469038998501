// ipc_channel.h — the plumbing between the lesson's two processes: starting the child,
// one Unix socket between them, messages that may carry a file descriptor, and the
// checks that nothing (descriptors, children) is left behind. No CUDA calls here.
#pragma once

#include <cuda.h>
#include <sys/types.h>

#include <map>
#include <string>

namespace ipc {

// What the parent asks the child to do; the child answers with Written.
enum class Request : int { Legacy = 1, Vmm = 2, Pool = 3, DieBeforeMap = 4, Written = 5, Verified = 6 };

// One message, either way. Plain bytes of a fixed size: the handles the driver gives
// (CUipcMemHandle, CUipcEventHandle, CUmemPoolPtrExportData) are opaque byte arrays made
// to be copied to another process as they are. A file descriptor cannot travel as bytes:
// it goes beside the message as SCM_RIGHTS ancillary data, and the kernel installs a
// duplicate in the receiver.
struct Message {
    Request request = Request::Written;
    int result = 0;  // the child's answer: 0 (CUDA_SUCCESS) or the CUresult it failed with
    unsigned long long bytes = 0;
    CUipcMemHandle memHandle{};
    CUipcEventHandle eventHandle{};
    CUmemPoolPtrExportData poolPointer{};
};

struct Child {
    pid_t pid = -1;
    int socket = -1;  // the parent's end of the socket pair
};

// Starts this program again (/proc/self/exe) as `self --child FD --device N`, joined to
// the parent by a SOCK_SEQPACKET socket pair (message boundaries kept, EOF when the
// other side is gone). On failure prints why and returns pid -1.
Child spawnChild(const char* self, int deviceOrdinal);
// Sends one message; fd >= 0 travels with it (SCM_RIGHTS). Flushes stdout first, so that
// what this process printed comes before what the other prints on receiving it.
bool sendMessage(int socket, const Message& message, int fd = -1);
// Receives one message and, in *fd, the descriptor that came with it (or -1). False at
// EOF (the other process is gone) or on an error.
bool receiveMessage(int socket, Message& message, int* fd);
// Closes the parent's end and reaps the child (waitpid): "exit code 0", "killed by signal 9".
std::string waitForChild(Child& child);
// Children of this process not reaped yet (waitpid(-1, WNOHANG) says ECHILD when none).
bool anyChildLeft();

// This process's open descriptors (/proc/self/fd) and what each points at.
std::map<int, std::string> openFds();
// Descriptors open now that were not at `before`, printed one a line. The driver's own
// files are not counted: its device files (/dev/nvidia*) and the shared-memory file it
// opens for interprocess events (/dev/shm/cuda.shm.*), which it keeps while the process
// uses CUDA.
int leakedFds(const std::map<int, std::string>& before);

}  // namespace ipc
