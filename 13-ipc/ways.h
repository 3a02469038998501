// ways.h — the three ways of sharing device memory with another process, each as the
// parent's half (export, start the child, verify) and the child's half (import, write).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "ipc_channel.h"

namespace ways {

// The pattern the child writes: word i of way `seed`. Different per way, so that a
// buffer left over from an earlier way cannot pass for this one.
inline std::vector<std::uint32_t> pattern(size_t words, std::uint32_t seed) {
    std::vector<std::uint32_t> values(words);
    for (size_t i = 0; i < words; ++i) values[i] = seed ^ static_cast<std::uint32_t>(i * 2654435761u);
    return values;
}

// The parent's halves (steps 3 to 5). Each prints its checks: the child's driver calls
// succeeded, the parent read the child's pattern word for word, the child exited cleanly.
bool shareLegacy(const char* self, int ordinal, CUstream stream, course::Verdict& verdict);
void shareVmm(const char* self, int ordinal, CUdevice device, CUstream stream, course::Verdict& verdict);
void sharePool(const char* self, int ordinal, CUdevice device, CUstream stream, course::Verdict& verdict);

// What every parent half does with the child's answer: "<way> child's driver calls: ..." and
// its check; true when the child answered and every one of its driver calls succeeded.
bool childSucceeded(const char* way, bool answered, const ipc::Message& reply, course::Verdict& verdict);
// Copies `bytes` back from `buffer` (after `stream`'s work) when the child wrote them, and
// checks every word: "<way>: N of N words carry the child's pattern".
void verifyPattern(const char* way, bool childWrote, CUdeviceptr buffer, size_t bytes, std::uint32_t seed,
                   CUstream stream, course::Verdict& verdict);
// Reaps the child (waitForChild): "<way> child: exit code 0", and its check.
void reapChild(const char* way, ipc::Child& child, course::Verdict& verdict);

// The child's driver calls. CHECK_DRIVER would end the child at its first error, and the
// parent would learn only an exit code. Instead the child keeps its first failure (the
// CUresult and the call's name), sends both in its answer, skips the rest of its work
// (CHILD_CALL) but still releases what it holds (CHILD_RELEASE).
struct ChildCalls {
    CUresult result = CUDA_SUCCESS;
    char failedCall[sizeof(ipc::Message::failedCall)] = {};
    bool ok() const { return result == CUDA_SUCCESS; }
    // Reports a failure on stderr (as CHECK_DRIVER does) and keeps the first one.
    void record(CUresult callResult, const char* call, const char* file, int line) {
        if (course::reportDriverError(callResult, call, file, line) == CUDA_SUCCESS || !ok()) return;
        result = callResult;
        std::snprintf(failedCall, sizeof(failedCall), "%.*s", static_cast<int>(std::strcspn(call, "(")), call);
    }
};
#define CHILD_CALL(calls, call)                                              \
    do {                                                                     \
        if ((calls).ok()) (calls).record((call), #call, __FILE__, __LINE__); \
    } while (0)
#define CHILD_RELEASE(calls, call) (calls).record((call), #call, __FILE__, __LINE__)

// The child process: receives one request, opens the driver, hands it to its half below.
// Exit code 0 when every driver call succeeded, 1 otherwise.
int runChild(int socket, int ordinal);
// The child's answer to the parent: Written, with its first failure (or CUDA_SUCCESS).
void answerParent(int socket, const ChildCalls& calls);

// The child's halves: each answers the parent's request (answerParent).
void childLegacy(int socket, const ipc::Message& request, ChildCalls& calls);
void childVmm(int socket, const ipc::Message& request, int fd, CUdevice device, ChildCalls& calls);
void childPool(int socket, const ipc::Message& request, int fd, ChildCalls& calls);

// Step 6: the faults, each with its checks.
void childDiesBeforeMapping(const char* self, int ordinal, CUdevice device, course::Verdict& verdict);
void importDescriptorThatNamesNothing(course::Verdict& verdict);
void openLegacyHandleInSameProcess(course::Verdict& verdict);

// The allocation properties of steps 4 and 6: pinned device memory that may be exported
// as a POSIX file descriptor.
CUmemAllocationProp fdShareableProp(CUdevice device);

constexpr std::uint32_t kLegacySeed = 0x13a11ec0u;
constexpr std::uint32_t kVmmSeed = 0x13f00d00u;
constexpr std::uint32_t kPoolSeed = 0x13b001e0u;

}  // namespace ways
