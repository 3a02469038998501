// ipc_channel.h — the plumbing between the lesson's two processes: starting the child,
// one Unix socket between them, messages that may carry a file descriptor, and the
// record that proves nothing (descriptors, children) is left behind. No CUDA calls here.
#pragma once

#include <cuda.h>
#include <sys/types.h>

#include <cstddef>
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
    int result = 0;            // the child's answer: 0 (CUDA_SUCCESS) or the CUresult of its first failed call
    char failedCall[64] = {};  // that call's name, e.g. "cuMemMap" (empty when none failed)
    unsigned long long bytes = 0;
    CUipcMemHandle memHandle{};
    CUipcEventHandle eventHandle{};
#if CUDA_VERSION >= 11020  // the pool export calls and their data came with CUDA 11.2
    CUmemPoolPtrExportData poolPointer{};
#endif
};

struct Child {
    pid_t pid = -1;
    int socket = -1;  // the parent's end of the socket pair
};

// Starts this program again (/proc/self/exe) as `self --child FD --device N`, joined to
// the parent by a SOCK_SEQPACKET socket pair (message boundaries kept, EOF when the
// other side is gone). The parent's end is tracked (trackDescriptor) and the child's pid
// recorded (childrenNotReaped). On failure prints why and returns pid -1.
Child spawnChild(const char* self, int deviceOrdinal);
// Sends one message; fd >= 0 travels with it (SCM_RIGHTS). Flushes stdout first, so that
// what this process printed comes before what the other prints on receiving it.
bool sendMessage(int socket, const Message& message, int fd = -1);
// Receives one message and, in *fd, the descriptor that came with it (or -1). False at
// EOF (the other process is gone) or on an error.
bool receiveMessage(int socket, Message& message, int* fd);
// Closes the parent's end and reaps the child (waitpid): "exit code 0", "killed by signal 9".
std::string waitForChild(Child& child);

// Every descriptor this process must close itself, tracked from the moment it has it (the
// driver's exports, the parent's end of each socket pair). A number alone cannot say whether
// the descriptor is still open: once closed, the kernel gives the same number (the lowest free
// one) to the next file any code opens, the driver's own files included. So each tracked
// descriptor is marked with fcntl(F_SETOWN, this process's pid): the owner is kept in the open
// file itself, and a file opened later under the same number has none.
void trackDescriptor(int fd, const char* what);
size_t descriptorsTracked();
// Tracked descriptors still open now (number open and the mark there), each printed:
// "still open: <what> (fd N)".
int descriptorsStillOpen();

// The child processes spawnChild started, and how many of them this process has not reaped:
// waitpid(pid, WNOHANG) answers ECHILD only for a pid that is no longer a child of this process
// (reaped already); 0 for a child still running; the pid for a zombie (which it reaps). Each
// not reaped is printed: "not reaped: child N (running|zombie)".
size_t childrenStarted();
int childrenNotReaped();

}  // namespace ipc
