// ways.h — the three ways of sharing device memory with another process, each as the
// parent's half (export, start the child, verify) and the child's half (import, write).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "ipc_channel.h"

namespace ways {

// The pattern the child writes: word i of way `seed`. Different per way, so that a
// buffer left over from an earlier way cannot pass for this one.
inline std::vector<std::uint32_t> pattern(size_t words, std::uint32_t seed) {
    std::vector<std::uint32_t> values(words);
    for (size_t i = 0; i < words; ++i) values[i] = seed ^ static_cast<std::uint32_t>(i * 2654435761u);
    return values;
}

// Copies `bytes` back from `buffer` (after `stream`'s work) and counts the words equal to
// the pattern; prints "<way>: N of N words carry the child's pattern".
bool verifyPattern(const char* way, CUdeviceptr buffer, size_t bytes, std::uint32_t seed, CUstream stream);

// The parent's halves (steps 3 to 5): true when the child's pattern arrived word for word.
bool shareLegacy(const char* self, int ordinal, CUstream stream);
bool shareVmm(const char* self, int ordinal, CUdevice device, CUstream stream);
bool sharePool(const char* self, int ordinal, CUdevice device, CUstream stream);

// The child process: receives one request, opens the driver, hands it to its half below.
int runChild(int socket, int ordinal);

// The child's halves: each answers the parent's request and returns the exit code.
int childLegacy(int socket, const ipc::Message& request);
int childVmm(int socket, const ipc::Message& request, int fd, CUdevice device);
int childPool(int socket, const ipc::Message& request, int fd);

// Step 6: the faults. True when each went as the lesson says.
bool childDiesBeforeMapping(const char* self, int ordinal, CUdevice device);
bool importClosedFd(CUdevice device);
bool openLegacyHandleInSameProcess();

// The allocation properties of steps 4 and 6: pinned device memory that may be exported
// as a POSIX file descriptor.
CUmemAllocationProp fdShareableProp(CUdevice device);

constexpr std::uint32_t kLegacySeed = 0x13a11ec0u;
constexpr std::uint32_t kVmmSeed = 0x13f00d00u;
constexpr std::uint32_t kPoolSeed = 0x13b001e0u;

}  // namespace ways
