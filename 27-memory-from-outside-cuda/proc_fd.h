// proc_fd.h — what the Linux kernel says about a file descriptor of this process, from /proc/self:
// dma_buf's view of the dma-buf it exports (its size, its exporter, the descriptors left on it).
#pragma once

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>

namespace lesson27 {

// One "label:\tvalue" line of /proc/self/fdinfo/FD, or empty.
inline std::string fdinfoValue(int fd, const std::string& label) {
    std::ifstream info("/proc/self/fdinfo/" + std::to_string(fd));
    for (std::string line; std::getline(info, line);) {
        if (line.rfind(label + ":", 0) != 0) continue;
        const size_t value = line.find_first_not_of(" \t", label.size() + 1);
        return value == std::string::npos ? "" : line.substr(value);
    }
    return "";
}

// A whole decimal number of bytes, as fdinfo lists it; false for anything else (strtoull with an
// end-pointer check: no sign, no trailing text, no overflow).
inline bool parseBytes(const std::string& text, unsigned long long& value) {
    if (text.empty() || text[0] < '0' || text[0] > '9') return false;
    char* end = nullptr;
    errno = 0;
    value = std::strtoull(text.c_str(), &end, 10);
    return errno == 0 && end != nullptr && *end == '\0';
}

// Where the link /proc/self/fd/FD points: the kernel's name for the descriptor's file.
inline std::string fdTarget(int fd) {
    char target[256] = {};
    const ssize_t length = readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), target, sizeof(target) - 1);
    return length > 0 ? std::string(target, static_cast<size_t>(length)) : "(unreadable)";
}

// How many descriptors of this process are on the file that `seen` (fstat) and `target` (the
// /proc/self/fd link) describe: /proc/self/fd lists them all. Both must agree, since on some
// kernels many unrelated files share one inode. -1: /proc/self/fd unreadable.
inline int descriptorsOn(const struct stat& seen, const std::string& target) {
    DIR* listing = opendir("/proc/self/fd");
    if (listing == nullptr) return -1;
    int count = 0;
    for (const dirent* entry = readdir(listing); entry != nullptr; entry = readdir(listing)) {
        const int fd = std::atoi(entry->d_name);  // "." and "..": 0, and stdin is no dma-buf
        struct stat status {};
        if (fd == dirfd(listing) || fstat(fd, &status) != 0) continue;
        count += status.st_dev == seen.st_dev && status.st_ino == seen.st_ino && fdTarget(fd) == target ? 1 : 0;
    }
    closedir(listing);
    return count;
}

}  // namespace lesson27
