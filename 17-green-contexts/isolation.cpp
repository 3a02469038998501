// Lesson 17, program 2 — what a green context buys: a short kernel's latency beside a long one.
//
// Two streams of one context share every SM. A long kernel with more blocks than the GPU
// holds at once keeps every SM busy until its last block has started, and a short kernel
// queued on another stream meanwhile waits for free SMs: its latency becomes the long
// kernel's. Two green contexts get disjoint SMs, so the short kernel may find its SMs free —
// "may": cuda.h does not guarantee that kernels of green contexts with disjoint SMs run
// concurrently or make forward progress (they still share hardware queues, see
// CUDA_DEVICE_MAX_CONNECTIONS), nor that a workload stays on the SMs provisioned (MPS, and on
// 9.x a loaded module with dynamic parallelism, can add SMs). So this program measures it:
// the short kernel's latency (host clock, launch to cuStreamSynchronize, median) (a) alone,
// (b) beside the long kernel in one ordinary context, (c) beside it with each kernel in its
// own green context. The latencies are observations, not checks: NVIDIA's CUDA Programming
// Guide (section 4.6.1) says "concurrent execution of independent GPU work is not
// guaranteed", so no ratio of them is promised. What is checked is where (c)'s kernels ran:
// on disjoint SMs, the long one on no more SMs than its green context holds.
//
//   isolation               the three latencies, median of 15 samples each, checked
//   isolation --bench       median of 51 samples each, and "bench:" lines
//   isolation --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "green_helpers.h"

namespace {

#if CUDA_VERSION >= 12040
constexpr unsigned int kThreads = 256;                // per block, both kernels
constexpr unsigned int kShortBlocks = 8;              // the short kernel's grid
constexpr unsigned int kShortSms = 8;                 // the SMs asked for it (the H100's smallest partition)
constexpr unsigned long long kShortNs = 20000;        // each short block spins 20 us
constexpr unsigned long long kLongBlockNs = 2000000;  // each long block holds its SM 2 ms
constexpr unsigned int kLongWaves = 4;                // the long grid fills the SMs 4 times over
// The observations' factors: contention is reported when (b) >= kContention x (a), and the
// short kernel "near alone" when (c) <= kNearAlone x (a). Printed, never judged.
constexpr double kContention = 10.0;
constexpr double kNearAlone = 3.0;

// Launches `blocks` spinning blocks; with `smOfBlock` not 0 each block writes its %smid there.
void launchSpin(CUkernel spin, unsigned int blocks, unsigned long long nanoseconds, CUstream stream,
                CUdeviceptr smOfBlock) {
    void* params[] = {&nanoseconds, &smOfBlock};
    // A CUkernel from cuLibraryGetKernel is launched as a CUfunction; the context comes from the stream.
    CHECK_DRIVER(
        cuLaunchKernel(reinterpret_cast<CUfunction>(spin), blocks, 1, 1, kThreads, 1, 1, 0, stream, params, nullptr));
}

// The short kernel's median latency in microseconds: host clock from its launch on
// `shortStream` until cuStreamSynchronize returns. With `longBlocks` > 0 each sample first
// starts the long kernel on `longStream` and waits 1 ms, so the long kernel surely holds its
// SMs (it runs kLongWaves * 2 ms) when the short one is queued. `placement`, when given,
// receives the SMs each kernel's blocks ran on (each sample overwrites the last).
struct Placement {
    CUdeviceptr shortSms;  // kShortBlocks words
    CUdeviceptr longSms;   // longBlocks words
};
double shortLatency(CUkernel spin, CUstream shortStream, CUstream longStream, unsigned int longBlocks, int samples,
                    Placement placement = {}) {
    std::vector<double> times;
    for (int sample = -2; sample < samples; ++sample) {  // two untimed rounds first
        if (longBlocks > 0) {
            launchSpin(spin, longBlocks, kLongBlockNs, longStream, placement.longSms);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        const auto start = std::chrono::steady_clock::now();
        launchSpin(spin, kShortBlocks, kShortNs, shortStream, placement.shortSms);
        CHECK_DRIVER(cuStreamSynchronize(shortStream));
        const auto end = std::chrono::steady_clock::now();
        if (longBlocks > 0) CHECK_DRIVER(cuStreamSynchronize(longStream));
        if (sample >= 0) times.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    // Step 1: as in partitions: CUDA 12.4 headers and driver.
    course::printStep(1, "initialise the driver, check the versions");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("device %d name: %s\n", ordinal, name);
    if (!lesson17::greenContextsAvailable(driverVersion)) return course::kExitNotApplicable;
#if CUDA_VERSION >= 12040
    // Step 2: the long kernel is sized from the device: enough blocks to fill every SM it
    // may use (SMs x resident blocks per SM) kLongWaves times over. Occupancy is asked in
    // the primary context, through the CUfunction the library gives for it.
    course::printStep(2, "the primary context, the kernel, the long kernel's size");
    const int samples = args.has("--bench") ? 51 : 15;
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    CHECK_DRIVER(cuCtxSetCurrent(primary));
    CUlibrary library = nullptr;
    CHECK_DRIVER(cuLibraryLoadFromFile(&library, course::kernelPath("green_kernels.fatbin").c_str(), nullptr, nullptr,
                                       0, nullptr, nullptr, 0));
    CUkernel spin = nullptr;
    CHECK_DRIVER(cuLibraryGetKernel(&spin, library, "spin"));
    CUfunction spinHere = nullptr;
    CHECK_DRIVER(cuKernelGetFunction(&spinHere, spin));
    int blocksPerSm = 0;
    CHECK_DRIVER(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocksPerSm, spinHere, kThreads, 0));
    int smCount = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
    const unsigned int longBlocksAll = static_cast<unsigned int>(smCount * blocksPerSm) * kLongWaves;
    std::printf("resident blocks of %u threads per SM: %d\n", kThreads, blocksPerSm);
    std::printf("short kernel: %u blocks, each spins %.0f us\n", kShortBlocks, kShortNs / 1e3);
    std::printf("long kernel: %u waves of (SMs x %d) blocks, each spins %.0f ms\n", kLongWaves, blocksPerSm,
                kLongBlockNs / 1e6);

    // Step 3: (a) and (b) in the primary context, on two streams of its own.
    course::printStep(3, "one ordinary context: alone, then beside the long kernel");
    CUstream shortStream = nullptr;
    CUstream longStream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&shortStream, CU_STREAM_NON_BLOCKING));
    CHECK_DRIVER(cuStreamCreate(&longStream, CU_STREAM_NON_BLOCKING));
    const double alone = shortLatency(spin, shortStream, longStream, 0, samples);
    const double shared = shortLatency(spin, shortStream, longStream, longBlocksAll, samples);
    std::printf("long kernel in one context: %u blocks on %d SMs\n", longBlocksAll, smCount);
    std::printf("(a) short kernel latency, alone: %.1f us\n", alone);
    std::printf("(b) short kernel latency, beside the long kernel in one context: %.1f us\n", shared);
    std::printf("(b) / (a): %.1f x\n", shared / alone);

    // Step 4: the smallest partition for the short kernel, every other SM for the long one:
    // one split, a group of at least kShortSms SMs and the remainder, two green contexts.
    // (cuda.h: the remainder "does not have the same functional or performance guarantees"
    // as the groups; here it only runs the long kernel, whose latency is not measured.)
    course::printStep(4, "two green contexts: the smallest partition and the rest");
    CUdevResource all{};
    CHECK_DRIVER(cuDeviceGetDevResource(device, &all, CU_DEV_RESOURCE_TYPE_SM));
    lesson17::Split split = lesson17::splitSms(all, kShortSms, 0, 1);
    CUdevResourceDesc shortDesc = nullptr;
    CUdevResourceDesc longDesc = nullptr;
    CHECK_DRIVER(cuDevResourceGenerateDesc(&shortDesc, split.groups.data(), 1));
    CHECK_DRIVER(cuDevResourceGenerateDesc(&longDesc, &split.remainder, 1));
    CUgreenCtx shortGreen = nullptr;
    CUgreenCtx longGreen = nullptr;
    CHECK_DRIVER(cuGreenCtxCreate(&shortGreen, shortDesc, device, CU_GREEN_CTX_DEFAULT_STREAM));
    CHECK_DRIVER(cuGreenCtxCreate(&longGreen, longDesc, device, CU_GREEN_CTX_DEFAULT_STREAM));
    const unsigned int shortSms = lesson17::greenContextSms(shortGreen);
    const unsigned int longSms = lesson17::greenContextSms(longGreen);
    std::printf("short kernel's green context: requested %u SMs, granted %u SMs\n", kShortSms, shortSms);
    std::printf("long kernel's green context (the remainder): %u SMs\n", longSms);
    verdict.check("the short kernel's green context got at least the SMs requested", shortSms >= kShortSms);
    verdict.check("the long kernel's green context got the remainder", longSms == split.remainder.sm.smCount);

    // Step 5: (c) the same two kernels, each on a stream of its own green context; the long
    // grid is sized for the SMs its partition has.
    course::printStep(5, "separate green contexts: beside the long kernel");
    CUstream shortGreenStream = lesson17::createGreenStream(shortGreen, driverVersion);
    CUstream longGreenStream = lesson17::createGreenStream(longGreen, driverVersion);
    const unsigned int longBlocksGreen = longSms * static_cast<unsigned int>(blocksPerSm) * kLongWaves;
    Placement placement{};
    CHECK_DRIVER(cuMemAlloc(&placement.shortSms, kShortBlocks * sizeof(unsigned int)));
    CHECK_DRIVER(cuMemAlloc(&placement.longSms, longBlocksGreen * sizeof(unsigned int)));
    const double isolated = shortLatency(spin, shortGreenStream, longGreenStream, longBlocksGreen, samples, placement);
    const std::set<unsigned int> shortUsed = lesson17::smSet(placement.shortSms, kShortBlocks);
    const std::set<unsigned int> longUsed = lesson17::smSet(placement.longSms, longBlocksGreen);
    std::printf("long kernel in its green context: %u blocks on %u SMs\n", longBlocksGreen, longSms);
    std::printf("(c) short kernel latency, beside the long kernel in separate green contexts: %.1f us\n", isolated);
    std::printf("(c) / (a): %.1f x\n", isolated / alone);
    std::printf("(b) / (c): %.1f x\n", shared / isolated);
    if (args.has("--bench")) {
        std::printf("bench: short kernel latency, alone = %.1f us\n", alone);
        std::printf("bench: short kernel latency, beside the long kernel, one context = %.1f us\n", shared);
        std::printf("bench: short kernel latency, beside the long kernel, green contexts = %.1f us\n", isolated);
    }

    // Step 6: where (c)'s kernels ran is what a green context provisions: checks. The
    // latencies depend on concurrent execution, which is not guaranteed: observations.
    course::printStep(6, "check where (c) ran; observe the latencies");
    std::set<unsigned int> sharedSms;
    for (unsigned int sm : shortUsed)
        if (longUsed.count(sm) != 0) sharedSms.insert(sm);
    std::printf("(c) SMs used: short kernel %zu, long kernel %zu, both %zu\n", shortUsed.size(), longUsed.size(),
                sharedSms.size());
    verdict.check("in (c) the long kernel ran on no more SMs than its green context holds", longUsed.size() <= longSms);
    verdict.check("in (c) the two kernels shared no SM", sharedSms.empty());
    if (const char* tool = course::instrumentingTool()) {
        std::printf("observation latencies: not measured (%s runs one kernel at a time)\n", tool);
    } else {
        std::printf("observation contention in one context, (b) >= %.0f x (a): %s\n", kContention,
                    shared >= kContention * alone ? "yes" : "no");
        std::printf("observation short kernel near alone in green contexts, (c) <= %.0f x (a): %s\n", kNearAlone,
                    isolated <= kNearAlone * alone ? "yes" : "no");
    }

    // Step 7: reverse order: streams before their green contexts. cuGreenCtxDestroy does not
    // destroy them, and after it every call on them, cuStreamDestroy included, returns
    // CUDA_ERROR_CONTEXT_IS_DESTROYED: a stream left over is leaked. Then the library and the
    // primary context.
    course::printStep(7, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(placement.longSms));
    CHECK_DRIVER(cuMemFree(placement.shortSms));
    CHECK_DRIVER(cuStreamDestroy(longGreenStream));
    CHECK_DRIVER(cuStreamDestroy(shortGreenStream));
    CHECK_DRIVER(cuGreenCtxDestroy(longGreen));
    CHECK_DRIVER(cuGreenCtxDestroy(shortGreen));
    CHECK_DRIVER(cuStreamDestroy(longStream));
    CHECK_DRIVER(cuStreamDestroy(shortStream));
    CHECK_DRIVER(cuLibraryUnload(library));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("green contexts and primary context: released\n");
    return verdict.finish();
#else
    return course::kExitNotApplicable;
#endif
}
