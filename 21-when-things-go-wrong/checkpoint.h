// checkpoint.h — what checkpoint.cpp (the steps and the child) and checkpoint_bench.cpp (--bench)
// share: the child's role and lines, free device memory, the process states, one checkpoint cycle.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

#include "../common/course_util.h"

namespace checkpoint {

constexpr int kHolderRole = 1;
constexpr unsigned int kSeed = 0x21c0ffeeu;
// The child's lines the parent reads.
constexpr const char* kReady = "ready";
constexpr const char* kSurvived = "words holding the pattern after the restore";
constexpr const char* kComputed = "words holding the pattern + 1 after a kernel";

constexpr size_t kMiB = size_t{1} << 20;

// Free device memory now, in the current context's device (cuMemGetInfo).
size_t freeDeviceMemory();

// "N of N ..." with both numbers equal and above zero: every word was right.
bool allWords(const std::string& value);

#if CUDA_VERSION >= 12080
// "CU_PROCESS_STATE_LOCKED", or the error cuCheckpointProcessGetState returned.
std::string stateOf(int pid);

// One checkpoint and restore of the process: lock, checkpoint, restore, unlock, each call's answer
// and the state after it, and how long checkpoint and restore took.
struct Cycle {
    CUresult results[4] = {CUDA_SUCCESS, CUDA_SUCCESS, CUDA_SUCCESS, CUDA_SUCCESS};
    std::string states[4];
    double checkpointMs = 0;
    double restoreMs = 0;
    size_t freeCheckpointed = 0;  // free device memory while the process is checkpointed
    size_t freeRestored = 0;      // and right after the restore
    bool allSucceeded() const;
};
constexpr const char* kCalls[4] = {"cuCheckpointProcessLock", "cuCheckpointProcessCheckpoint",
                                   "cuCheckpointProcessRestore", "cuCheckpointProcessUnlock"};
Cycle checkpointAndRestore(int pid);
#endif

// Step 6 (checkpoint_bench.cpp): the first cycle's checkpoint and restore of `bytes` in GB/s, beside
// pinned copies of the same size. With `sweep` (--bench), a new child and kCycles cycles for each of
// 256 MiB, 1 GiB and 4 GiB that fit here, and "bench:" lines.
void costs(int ordinal, size_t bytes, double checkpointMs, double restoreMs, bool sweep, course::Verdict& verdict);

}  // namespace checkpoint
