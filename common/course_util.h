// course_util.h — small helpers that several lessons share.
#pragma once

#include <linux/limits.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace course {

// A CUDA version number as the driver and cuda.h encode it: 1000 * major + 10 * minor.
// 13000 -> 13.0, 12050 -> 12.5, 11040 -> 11.4.
struct CudaVersion {
    int major;
    int minor;
};

constexpr CudaVersion decodeCudaVersion(int encoded) { return CudaVersion{encoded / 1000, (encoded % 1000) / 10}; }

inline std::string formatCudaVersion(int encoded) {
    const CudaVersion v = decodeCudaVersion(encoded);
    return std::to_string(v.major) + "." + std::to_string(v.minor);
}

// The folder that holds the running executable (from /proc/self/exe), so that a
// program finds its kernels and data next to itself whatever the working directory.
inline std::string executableDir() {
    char path[PATH_MAX];
    const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
    if (length <= 0) return ".";
    path[length] = '\0';
    std::string full(path);
    const std::string::size_type slash = full.rfind('/');
    return slash == std::string::npos ? std::string(".") : full.substr(0, slash);
}

// Prints a step header; the numbers match the lesson README's walkthrough.
inline void printStep(int number, const char* title) { std::printf("\n== Step %d: %s ==\n", number, title); }

}  // namespace course
