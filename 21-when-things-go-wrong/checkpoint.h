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
// --bench's sizes, in MiB; --bench-max-mib N keeps those up to N.
constexpr size_t kBenchMiB[] = {256, 1024, 4096};

// Free device memory now, in the current context's device (cuMemGetInfo).
size_t freeDeviceMemory();

// "N of N ..." with both numbers equal and above zero: every word was right.
bool allWords(const std::string& value);

#if CUDA_VERSION >= 12080
// "CU_PROCESS_STATE_LOCKED", or the error cuCheckpointProcessGetState returned.
std::string stateOf(int pid);

constexpr const char* kRunning = "CU_PROCESS_STATE_RUNNING";
constexpr const char* kLocked = "CU_PROCESS_STATE_LOCKED";
constexpr const char* kCheckpointed = "CU_PROCESS_STATE_CHECKPOINTED";

// One checkpoint and restore of the process: lock, checkpoint, restore, unlock, whether each call
// was made (each only from the state cuda.h requires for it), its answer and the state after it,
// and how long checkpoint and restore took.
struct Cycle {
    bool called[4] = {false, false, false, false};
    CUresult results[4] = {CUDA_SUCCESS, CUDA_SUCCESS, CUDA_SUCCESS, CUDA_SUCCESS};
    std::string states[4];
    double checkpointMs = 0;
    double restoreMs = 0;
    size_t freeCheckpointed = 0;  // free device memory while the process is checkpointed
    size_t freeRestored = 0;      // and right after the restore
    // Call i was made, returned CUDA_SUCCESS and left the process in `state`.
    bool succeeded(int i, const char* state) const;
    // All four did, each leaving the state it should.
    bool allSucceeded() const;
};
constexpr const char* kCalls[4] = {"cuCheckpointProcessLock", "cuCheckpointProcessCheckpoint",
                                   "cuCheckpointProcessRestore", "cuCheckpointProcessUnlock"};
Cycle checkpointAndRestore(int pid);
#endif

// Step 6 (checkpoint_bench.cpp): the first cycle's checkpoint and restore of `bytes` in GB/s, beside
// pinned copies of the same size. With `sweepMiB` above 0 (--bench), a new child and kCycles cycles
// for each size of kBenchMiB up to sweepMiB that fits here, and "bench:" lines.
void costs(int ordinal, size_t bytes, double checkpointMs, double restoreMs, size_t sweepMiB, course::Verdict& verdict);

}  // namespace checkpoint
