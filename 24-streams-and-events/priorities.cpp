// Lesson 24, program 1 — stream priorities: the range, the clamping, and what a priority buys.
//
// A context has a range of stream priorities (cuCtxGetStreamPriorityRange); lower numbers are
// greater priorities. cuStreamCreateWithPriority takes any int and clamps it into the range,
// and cuStreamGetPriority returns the clamped value (cuda.h:14961-14964, 15008-15010): checked.
// What a priority buys is a scheduling hint: "Priorities provide a hint to preferentially run
// work with higher priority when possible, but do not preempt already-running work or provide
// any other functional guarantee on execution order", and "only compute kernels launched in
// priority streams are affected" (cuda.h:14955-14958, 14985-14987). So the effect is measured,
// not checked: a short kernel's latency while a flood of long blocks on a least-priority stream
// fills the GPU, with the short kernel at the same priority and at the greatest one.
//
//   priorities               the checks, and the latencies from 15 samples each
//   priorities --bench       51 samples each, and "bench:" lines
//   priorities --device N    another GPU
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "streams.h"

namespace {

using lesson24::kMillisecond;

constexpr unsigned long long kFloodBlockNs = kMillisecond / 5;  // each flood block holds its SM slot 200 us
constexpr unsigned int kFloodWaves = 8;                         // the flood fills every slot 8 times over
constexpr unsigned long long kShortNs = kMillisecond / 100;     // the short kernel: one block, 10 us
constexpr auto kStartTimeout = std::chrono::milliseconds(2000);

// Creates a stream with `asked`, prints what cuStreamGetPriority answers, returns it in `got`.
CUstream streamWithPriority(int asked, const char* what, int& got) {
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreateWithPriority(&stream, CU_STREAM_NON_BLOCKING, asked));
    CHECK_DRIVER(cuStreamGetPriority(stream, &got));
    std::printf("asked %d (%s): cuStreamGetPriority %d\n", asked, what, got);
    return stream;
}

// The short kernel's latency in microseconds, host clock from its launch on `target` until
// cuStreamSynchronize(target) returns. With `floodBlocks` > 0 the flood is launched first on
// `flood`, and the short kernel only once the flood's first block has stored its tag (so at least
// that block had started when the short kernel is queued); `allStarted` turns false when it never did.
// With none, `flood` must have nothing pending (cuStreamQuery): `floodIdle` turns false otherwise.
double shortLatency(const lesson24::Kernels& k, const lesson24::HostWords& words, CUstream target, CUstream flood,
                    unsigned int floodBlocks, unsigned int& tag, bool& allStarted, bool& floodIdle) {
    if (floodBlocks == 0) {
        const CUresult pending = cuStreamQuery(flood);  // CUDA_ERROR_NOT_READY: a flood still runs
        if (pending != CUDA_ERROR_NOT_READY) CHECK_DRIVER(pending);
        floodIdle = floodIdle && pending == CUDA_SUCCESS;
    } else {
        ++tag;
        lesson24::launchSpin(k.spin, floodBlocks, kFloodBlockNs, words.at(0), 0, tag, flood);
        // After one timeout the flood no longer waits: the check has failed already.
        if (allStarted) allStarted = lesson24::waitForWord(words, 0, tag, kStartTimeout);
    }
    const auto start = std::chrono::steady_clock::now();
    lesson24::launchSpin(k.spin, 1, kShortNs, 0, 0, 0, target);
    CHECK_DRIVER(cuStreamSynchronize(target));
    const auto end = std::chrono::steady_clock::now();
    if (floodBlocks > 0) CHECK_DRIVER(cuStreamSynchronize(flood));
    return std::chrono::duration<double, std::micro>(end - start).count();
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    const bool bench = args.has("--bench");
    course::Verdict verdict;

    course::printStep(1, "initialise, the primary context, the kernels");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    lesson24::printDeviceAndVersions(device, ordinal);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));

    // Step 2: the range belongs to the current context's device. cuda.h: both ends are 0 where
    // the device does not support stream priorities; then nothing below applies.
    course::printStep(2, "the context's stream priority range");
    int least = 0;
    int greatest = 0;
    CHECK_DRIVER(cuCtxGetStreamPriorityRange(&least, &greatest));
    std::printf("stream priority range: %d (least) to %d (greatest)\n", least, greatest);
    if (least == greatest) {
        std::printf("section priorities: SKIP (the range is one value: the device has no stream priorities)\n");
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
        std::printf("Result = SKIP (the device has no stream priorities)\n");
        return course::kExitNotApplicable;
    }
    lesson24::Kernels kernels = lesson24::loadKernels();
    lesson24::HostWords words = lesson24::allocHostWords(1);

    // Step 3: three priorities inside the range come back as asked; one beyond each end comes
    // back as that end. cuStreamCreate's text names no priority ("'0' represents default
    // priority" is said of the argument of cuStreamCreateWithPriority, cuda.h:14960-14961);
    // NVIDIA's CUDA Programming Guide (section 2.5.9.1) says "The default priority of a stream
    // is 0". Checked, from a value the call must overwrite.
    course::printStep(3, "create streams with priorities, read them back");
    CUstream plain = nullptr;
    CHECK_DRIVER(cuStreamCreate(&plain, CU_STREAM_NON_BLOCKING));
    int plainPriority = least + 1000;  // no priority the device has: overwritten by the call
    CHECK_DRIVER(cuStreamGetPriority(plain, &plainPriority));
    std::printf("cuStreamCreate, no priority given: cuStreamGetPriority %d\n", plainPriority);
    verdict.check("a cuStreamCreate stream has the default priority 0", plainPriority == 0);
    const int middle = least + (greatest - least) / 2;
    int got[5] = {};
    CUstream low = streamWithPriority(least, "the least", got[0]);
    CUstream high = streamWithPriority(greatest, "the greatest", got[1]);
    CUstream mid = streamWithPriority(middle, "between them", got[2]);
    CUstream weaker = streamWithPriority(least + 10, "10 beyond the least", got[3]);
    CUstream stronger = streamWithPriority(greatest - 10, "10 beyond the greatest", got[4]);
    verdict.check("in-range priorities come back as asked", got[0] == least && got[1] == greatest && got[2] == middle);
    verdict.check("a priority beyond the least is clamped to the least", got[3] == least);
    verdict.check("a priority beyond the greatest is clamped to the greatest", got[4] == greatest);

    // Step 4: the flood fills every SM slot kFloodWaves times over on a least-priority stream.
    // A short kernel queued meanwhile waits for a free slot; which waiting block gets the next
    // free slot is what the priority hints at. The samples take the three cases in turn, so all
    // three see the same machine in the same run. The latencies are printed, not checked: a
    // priority is a hint with no functional guarantee (cuda.h:14955-14958), so a program that
    // launched case (c) on a least-priority stream by mistake would still pass; only the numbers
    // would show it.
    course::printStep(4, "a short kernel beside a least-priority flood: same priority vs the greatest");
    if (const char* tool = course::instrumentingTool()) {
        std::printf("section latency: SKIP (%s runs one kernel at a time)\n", tool);
    } else {
        int blocksPerSm = 0;
        CHECK_DRIVER(
            cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocksPerSm, kernels.spin, lesson24::kSpinThreads, 0));
        int smCount = 0;
        CHECK_DRIVER(cuDeviceGetAttribute(&smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
        const unsigned int floodBlocks = static_cast<unsigned int>(smCount * blocksPerSm) * kFloodWaves;
        CUstream flood = nullptr;  // its own stream, at the least priority, like `low`
        CHECK_DRIVER(cuStreamCreateWithPriority(&flood, CU_STREAM_NON_BLOCKING, least));
        int floodPriority = 0;
        CHECK_DRIVER(cuStreamGetPriority(flood, &floodPriority));
        std::printf(
            "flood: %u blocks (%d SMs x %d resident blocks x %u waves), each spins %.0f us, stream priority %d\n",
            floodBlocks, smCount, blocksPerSm, kFloodWaves, kFloodBlockNs / 1e3, floodPriority);
        std::printf("short kernel: 1 block, spins %.0f us\n", kShortNs / 1e3);
        verdict.check("the flood's stream has the least priority", floodPriority == least);
        const int samples = bench ? 51 : 15;
        std::vector<double> alone, same, greater;
        unsigned int tag = 0;
        bool allStarted = true;
        bool floodIdle = true;
        for (int sample = -2; sample < samples; ++sample) {  // two untimed rounds first
            const double a = shortLatency(kernels, words, high, flood, 0, tag, allStarted, floodIdle);
            const double b = shortLatency(kernels, words, low, flood, floodBlocks, tag, allStarted, floodIdle);
            const double c = shortLatency(kernels, words, high, flood, floodBlocks, tag, allStarted, floodIdle);
            if (sample < 0) continue;
            alone.push_back(a);
            same.push_back(b);
            greater.push_back(c);
        }
        CHECK_DRIVER(cuStreamDestroy(flood));
        verdict.check("the flood's first block had started before each short kernel beside it was launched",
                      allStarted);
        verdict.check("no flood was pending when the short kernel ran alone", floodIdle);
        const double a = course::median(alone);
        const double b = course::median(same);
        const double c = course::median(greater);
        std::printf("samples: %d of each, medians, host clock from the launch to cuStreamSynchronize\n", samples);
        std::printf("(a) short kernel alone: %.1f us\n", a);
        std::printf("(b) beside the flood, same priority as the flood: %.1f us\n", b);
        std::printf("(c) beside the flood, the greatest priority: %.1f us\n", c);
        std::printf("(b) / (c): %.1f x\n", b / c);
        if (bench) {
            std::printf("bench: short kernel latency, alone = %.1f us\n", a);
            std::printf("bench: short kernel latency beside a flood, same priority = %.1f us\n", b);
            std::printf("bench: short kernel latency beside a flood, greatest priority = %.1f us\n", c);
        }
    }

    course::printStep(5, "release everything, newest first");
    CHECK_DRIVER(cuStreamDestroy(stronger));
    CHECK_DRIVER(cuStreamDestroy(weaker));
    CHECK_DRIVER(cuStreamDestroy(mid));
    CHECK_DRIVER(cuStreamDestroy(high));
    CHECK_DRIVER(cuStreamDestroy(low));
    CHECK_DRIVER(cuStreamDestroy(plain));
    CHECK_DRIVER(cuMemFreeHost(words.host));
    CHECK_DRIVER(cuModuleUnload(kernels.module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: streams, host words, module, primary context\n");

    course::printStep(6, "check");
    return verdict.finish();
}
