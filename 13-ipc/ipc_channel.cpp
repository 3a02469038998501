// ipc_channel.cpp — see ipc_channel.h.
#include "ipc_channel.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace ipc {

namespace {

struct Tracked {
    int fd;
    std::string what;
};
std::vector<Tracked> tracked;  // every descriptor trackDescriptor was given
std::vector<pid_t> childPids;  // every child spawnChild started

}  // namespace

Child spawnChild(const char* self, int deviceOrdinal) {
    Child child;
    int ends[2] = {-1, -1};
    // SOCK_CLOEXEC: neither end leaks into a program this process starts later; the
    // child's end is made inheritable just for its own start, below.
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) {
        std::fprintf(stderr, "socketpair: %s\n", std::strerror(errno));
        return child;
    }
    const std::string socketText = std::to_string(ends[1]);
    const std::string deviceText = std::to_string(deviceOrdinal);
    char* argv[] = {
        const_cast<char*>(self),       const_cast<char*>("--child"),          const_cast<char*>(socketText.c_str()),
        const_cast<char*>("--device"), const_cast<char*>(deviceText.c_str()), nullptr};
    std::fflush(stdout);  // output printed so far must not come after the child's
    // The environment goes along: compute-sanitizer follows children through it.
    int spawned = fcntl(ends[1], F_SETFD, 0) == 0 ? 0 : errno;
    if (spawned == 0) spawned = posix_spawn(&child.pid, "/proc/self/exe", nullptr, nullptr, argv, environ);
    close(ends[1]);  // the child holds its own copy now
    if (spawned != 0) {
        std::fprintf(stderr, "posix_spawn /proc/self/exe: %s\n", std::strerror(spawned));
        close(ends[0]);
        child.pid = -1;
        return child;
    }
    child.socket = ends[0];
    trackDescriptor(child.socket, "the parent's end of a socket pair");
    childPids.push_back(child.pid);
    return child;
}

bool sendMessage(int socket, const Message& message, int fd) {
    std::fflush(stdout);
    iovec payload{const_cast<Message*>(&message), sizeof(message)};
    msghdr header{};
    header.msg_iov = &payload;
    header.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    if (fd >= 0) {
        header.msg_control = control;
        header.msg_controllen = sizeof(control);
        cmsghdr* rights = CMSG_FIRSTHDR(&header);
        rights->cmsg_level = SOL_SOCKET;
        rights->cmsg_type = SCM_RIGHTS;
        rights->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(rights), &fd, sizeof(int));
    }
    // MSG_NOSIGNAL: a peer that has died gives EPIPE here, not a SIGPIPE that ends us.
    const ssize_t sent = sendmsg(socket, &header, MSG_NOSIGNAL);
    if (sent != static_cast<ssize_t>(sizeof(message))) {
        std::fprintf(stderr, "sendmsg: %s\n", sent < 0 ? std::strerror(errno) : "short message");
        return false;
    }
    return true;
}

bool receiveMessage(int socket, Message& message, int* fd) {
    *fd = -1;
    iovec payload{&message, sizeof(message)};
    msghdr header{};
    header.msg_iov = &payload;
    header.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
    // MSG_CMSG_CLOEXEC: a received descriptor is not inherited by anything started later.
    const ssize_t received = recvmsg(socket, &header, MSG_CMSG_CLOEXEC);
    if (received < 0) std::fprintf(stderr, "recvmsg: %s\n", std::strerror(errno));
    for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr; c = CMSG_NXTHDR(&header, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(fd, CMSG_DATA(c), sizeof(int));
    return received == static_cast<ssize_t>(sizeof(message));
}

std::string waitForChild(Child& child) {
    if (child.socket >= 0) close(child.socket);  // a child waiting for a message sees EOF
    child.socket = -1;
    if (child.pid <= 0) return "not started";
    int status = 0;
    pid_t done = -1;
    do done = waitpid(child.pid, &status, 0);
    while (done < 0 && errno == EINTR);
    child.pid = -1;
    if (done < 0) return std::string("waitpid: ") + std::strerror(errno);
    if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
    return "stopped";
}

void trackDescriptor(int fd, const char* what) {
    if (fcntl(fd, F_SETOWN, getpid()) != 0)
        std::fprintf(stderr, "fcntl(%d, F_SETOWN): %s (%s)\n", fd, std::strerror(errno), what);
    tracked.push_back({fd, what});
}

size_t descriptorsTracked() {
    return tracked.size();
}

int descriptorsStillOpen() {
    int stillOpen = 0;
    for (const Tracked& t : tracked) {
        // F_GETFD fails with EBADF for a number that names nothing; F_GETOWN tells the
        // tracked file from another one opened later under the same number.
        if (fcntl(t.fd, F_GETFD) == -1 || fcntl(t.fd, F_GETOWN) != getpid()) continue;
        std::printf("still open: %s (fd %d)\n", t.what.c_str(), t.fd);
        ++stillOpen;
    }
    return stillOpen;
}

size_t childrenStarted() {
    return childPids.size();
}

int childrenNotReaped() {
    int notReaped = 0;
    std::vector<pid_t> seen;
    for (const pid_t pid : childPids) {
        bool again = false;  // a pid the kernel handed out twice is asked once
        for (const pid_t s : seen) again = again || s == pid;
        if (again) continue;
        seen.push_back(pid);
        const pid_t answer = waitpid(pid, nullptr, WNOHANG);
        if (answer < 0 && errno == ECHILD) continue;  // reaped already: no longer this process's child
        std::printf("not reaped: child %d (%s)\n", static_cast<int>(pid), answer == 0 ? "running" : "zombie");
        ++notReaped;
    }
    return notReaped;
}

}  // namespace ipc
