// course_util.h — small helpers that several lessons share.
#pragma once

#include <linux/limits.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace course {

// A CUDA version number as the driver and cuda.h encode it: 1000 * major + 10 * minor.
// 13000 -> 13.0, 12050 -> 12.5, 11040 -> 11.4.
struct CudaVersion {
    int major;
    int minor;
};

constexpr CudaVersion decodeCudaVersion(int encoded) {
    return CudaVersion{encoded / 1000, (encoded % 1000) / 10};
}

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

// A module file built next to the executable: build/NN-topic/kernels/NAME.
inline std::string kernelPath(const std::string& fileName) {
    return executableDir() + "/kernels/" + fileName;
}

// The whole file, or nothing (and a message naming the path) when it cannot be read.
inline std::optional<std::string> readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "cannot read %s: %s\n", path.c_str(), std::strerror(errno));
        return std::nullopt;
    }
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The median of timing samples: the middle one, the upper of the two middle ones for an even
// count (a sample that was measured, not an average of two); 0 for none.
inline double median(std::vector<double> samples) {
    if (samples.empty()) return 0.0;
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
}

// Exit code for a bad command line.
constexpr int kExitUsage = 2;

// A lesson's command line: flags ("--bench") and integer options ("--device 1").
struct Arguments {
    std::set<std::string> flags;
    std::map<std::string, long long> values;

    bool has(const std::string& flag) const { return flags.count(flag) != 0; }
    long long valueOr(const std::string& option, long long fallback) const {
        const auto it = values.find(option);
        return it == values.end() ? fallback : it->second;
    }
    // --device N (default 0). A value outside int becomes -1, an ordinal no device has,
    // so cuDeviceGet rejects it instead of a cast wrapping it onto a real device.
    int deviceOrdinal() const {
        const long long value = valueOr("--device", 0);
        return value < INT_MIN || value > INT_MAX ? -1 : static_cast<int>(value);
    }
};

// Parses argv against the flags and options a lesson knows. On anything unknown or
// malformed it prints the usage line to stderr and returns false: exit with kExitUsage.
inline bool parseArguments(int argc, char** argv, std::initializer_list<const char*> knownFlags,
                           std::initializer_list<const char*> knownOptions, const char* usage, Arguments& out) {
    auto known = [](std::initializer_list<const char*> list, const std::string& word) {
        for (const char* item : list)
            if (word == item) return true;
        return false;
    };
    for (int i = 1; i < argc; ++i) {
        const std::string word = argv[i];
        if (known(knownFlags, word)) {
            out.flags.insert(word);
            continue;
        }
        if (known(knownOptions, word) && i + 1 < argc) {
            char* end = nullptr;
            errno = 0;
            const long long value = std::strtoll(argv[i + 1], &end, 0);
            if (errno == 0 && end != argv[i + 1] && *end == '\0') {
                out.values[word] = value;
                ++i;
                continue;
            }
            std::fprintf(stderr, "%s: %s needs an integer, got '%s'\n", argv[0], word.c_str(), argv[i + 1]);
        } else {
            std::fprintf(stderr, "%s: unknown or incomplete argument '%s'\n", argv[0], word.c_str());
        }
        std::fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return false;
    }
    return true;
}

// Prints a step header; the numbers match the lesson README's walkthrough.
inline void printStep(int number, const char* title) {
    std::printf("\n== Step %d: %s ==\n", number, title);
}

// The tool attached to this process, if it is one that instruments every kernel: compute-
// sanitizer (`make sanitize` sets COURSE_UNDER_SANITIZER; a run by hand names its injection
// library in CUDA_INJECTION64_PATH) or Nsight Compute. Such a tool runs kernels one at a time
// and can hold device memory of its own (under initcheck, lesson 11 on an H100 ended with 64 MiB
// less free memory than it started with, with nothing leaked), so a check that kernels overlap,
// that a latency stays low or that free memory comes back says nothing under it. Nsight Systems
// (libToolsInjection64.so) does neither by default and is not counted. nullptr: no such tool.
inline const char* instrumentingTool() {
    if (std::getenv("COURSE_UNDER_SANITIZER") != nullptr) return "compute-sanitizer (make sanitize)";
    const char* injection = std::getenv("CUDA_INJECTION64_PATH");
    if (injection == nullptr) return nullptr;
    const std::string path = injection;
    if (path.find("sanitizer") != std::string::npos) return "compute-sanitizer";
    if (path.find("nsight-compute") != std::string::npos || path.find("libcuda-injection") != std::string::npos)
        return "Nsight Compute";
    return nullptr;
}

// A program's verdict: every check that decides "Result = PASS" goes through check(), which
// prints one line, "check NAME: ok" or "check NAME: FAIL", at the point where the program
// knows the answer. finish() prints the Result line and returns the exit code. A line that
// reports an observation without deciding anything is printed plainly and never called a check.
// (make mutate breaks a program on purpose and requires the named check's FAIL line.)
class Verdict {
public:
    // Returns `held`, so a program can also branch on it.
    bool check(const char* name, bool held) {
        std::printf("check %s: %s\n", name, held ? "ok" : "FAIL");
        allHeld_ = allHeld_ && held;
        return held;
    }
    // For a check of free device memory: as check(), except under an instrumentingTool(),
    // which can hold device memory of its own; then it prints "check NAME: SKIP (reason)"
    // and decides nothing.
    bool checkFreeMemory(const char* name, bool held) {
        if (const char* tool = instrumentingTool()) {
            std::printf("check %s: SKIP (%s can hold device memory of its own)\n", name, tool);
            return true;
        }
        return check(name, held);
    }
    bool allHeld() const { return allHeld_; }
    // "Result = PASS" and EXIT_SUCCESS only if every check held.
    int finish() const {
        std::printf("Result = %s\n", allHeld_ ? "PASS" : "FAIL");
        return allHeld_ ? EXIT_SUCCESS : EXIT_FAILURE;
    }

private:
    bool allHeld_ = true;
};

}  // namespace course
