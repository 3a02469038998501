// children.cpp — see children.h.
#include "children.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace children {

namespace {

// NAME of a "NAME=VALUE" entry.
std::string nameOf(const std::string& entry) {
    return entry.substr(0, entry.find('='));
}

// The parent's environment with the changes applied, as posix_spawn wants it.
std::vector<std::string> childEnvironment(const Environment& changes) {
    std::vector<std::string> entries;
    for (char** entry = environ; *entry != nullptr; ++entry) {
        const std::string text = *entry;
        bool dropped = false;
        for (const std::string& name : changes.unset) dropped = dropped || nameOf(text) == name;
        for (const std::string& added : changes.set) dropped = dropped || nameOf(text) == nameOf(added);
        if (!dropped) entries.push_back(text);
    }
    entries.insert(entries.end(), changes.set.begin(), changes.set.end());
    return entries;
}

std::vector<char*> pointersTo(std::vector<std::string>& strings) {
    std::vector<char*> pointers;
    for (std::string& s : strings) pointers.push_back(s.data());
    pointers.push_back(nullptr);
    return pointers;
}

// Moves the complete lines of child.partial into child.output, printing each.
// True when one of them starts with `marker` (then the lines after it stay in partial).
bool takeLines(Child& child, const std::string& marker) {
    std::string::size_type end;
    while ((end = child.partial.find('\n')) != std::string::npos) {
        const std::string line = child.partial.substr(0, end);
        child.partial.erase(0, end + 1);
        std::printf("[child] %s\n", line.c_str());
        child.output += line + "\n";
        if (!marker.empty() && line.rfind(marker, 0) == 0) return true;
    }
    return false;
}

// Where the child's first line that starts with `prefix` begins in its output; npos if none.
std::string::size_type lineStarting(const Child& child, const std::string& prefix) {
    std::string::size_type at = 0;
    while (at < child.output.size()) {
        if (child.output.compare(at, prefix.size(), prefix) == 0) return at;
        const std::string::size_type end = child.output.find('\n', at);
        if (end == std::string::npos) break;
        at = end + 1;
    }
    return std::string::npos;
}

}  // namespace

Child start(const std::vector<std::string>& argv, const Environment& environment) {
    Child child;
    int ends[2] = {-1, -1};
    // SOCK_CLOEXEC: neither end leaks into another program; the child gets its end as 0, 1, 2.
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
        std::fprintf(stderr, "socketpair: %s\n", std::strerror(errno));
        return child;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    for (int fd = 0; fd <= 2; ++fd) posix_spawn_file_actions_adddup2(&actions, ends[1], fd);
    std::vector<std::string> arguments = argv;
    std::vector<std::string> entries = childEnvironment(environment);
    std::vector<char*> argumentPointers = pointersTo(arguments);
    std::vector<char*> entryPointers = pointersTo(entries);
    std::fflush(stdout);  // what the parent printed so far comes before anything of the child's
    const int spawned =
        posix_spawn(&child.pid, argv.front().c_str(), &actions, nullptr, argumentPointers.data(), entryPointers.data());
    posix_spawn_file_actions_destroy(&actions);
    close(ends[1]);  // the child holds its own copies now
    if (spawned != 0) {
        std::fprintf(stderr, "posix_spawn %s: %s\n", argv.front().c_str(), std::strerror(spawned));
        close(ends[0]);
        child.pid = -1;
        return child;
    }
    child.socket = ends[0];
    return child;
}

Child startSelf(int role, int ordinal, const Environment& environment) {
    return start({"/proc/self/exe", "--child", std::to_string(role), "--device", std::to_string(ordinal)}, environment);
}

bool readUntil(Child& child, const std::string& marker) {
    if (child.socket < 0) return false;
    if (takeLines(child, marker)) return true;
    char buffer[4096];
    for (;;) {
        pollfd waiting{child.socket, POLLIN, 0};
        const int ready = poll(&waiting, 1, kQuietLimitSeconds * 1000);
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0) {
            std::printf("[parent] the child printed nothing for %d s: killing it\n", kQuietLimitSeconds);
            ::kill(child.pid, SIGKILL);
            return false;
        }
        const ssize_t got = ready < 0 ? -1 : read(child.socket, buffer, sizeof(buffer));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {  // EOF: the child closed its end (it exited)
            if (!child.partial.empty()) child.partial += '\n';
            takeLines(child, "");
            return false;
        }
        child.partial.append(buffer, static_cast<size_t>(got));
        if (takeLines(child, marker)) return true;
    }
}

bool tell(Child& child, const std::string& line) {
    const std::string text = line + "\n";
    // MSG_NOSIGNAL: a child that has died gives EPIPE here, not a SIGPIPE that ends the parent.
    return child.socket >= 0 &&
           send(child.socket, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

std::string finish(Child& child) {
    if (child.socket >= 0) {
        shutdown(child.socket, SHUT_WR);  // the child's next read of stdin sees EOF
        readUntil(child, "");
        close(child.socket);
        child.socket = -1;
    }
    if (child.pid <= 0) return "not started";
    int status = 0;
    pid_t done = -1;
    do done = waitpid(child.pid, &status, 0);
    while (done < 0 && errno == EINTR);
    child.pid = -1;
    std::fflush(stdout);
    if (done < 0) return std::string("waitpid: ") + std::strerror(errno);
    if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
    return "stopped";
}

std::string kill(Child& child) {
    if (child.pid > 0) ::kill(child.pid, SIGKILL);
    return finish(child);
}

std::string valueOf(const Child& child, const std::string& label) {
    const std::string prefix = label + ": ";
    const std::string::size_type at = lineStarting(child, prefix);
    if (at == std::string::npos) return "";
    const std::string::size_type end = child.output.find('\n', at);
    return child.output.substr(at + prefix.size(), end == std::string::npos ? end : end - at - prefix.size());
}

bool printed(const Child& child, const std::string& text) {
    return child.output.find(text) != std::string::npos;
}

bool printedBefore(const Child& child, const std::string& text, const std::string& label) {
    const std::string::size_type found = child.output.find(text);
    const std::string::size_type labelled = lineStarting(child, label + ": ");
    return found != std::string::npos && labelled != std::string::npos && found < labelled;
}

void beginChild() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
}

std::string readInstruction() {
    char line[4096] = {};
    if (std::fgets(line, sizeof(line), stdin) == nullptr) return "";
    std::string text = line;
    if (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
}

}  // namespace children
