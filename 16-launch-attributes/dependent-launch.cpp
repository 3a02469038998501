// Lesson 16, program 3 — programmatic dependent launch (PDL).
//
// Two kernels on one stream: the second starts only when the first has completed, and
// the GPU then needs a few microseconds to launch it. With the launch attribute
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION on the second kernel, cuda.h says
// the CUDA runtime "should opportunistically allow" it to overlap the first once every block of
// the first has called cudaTriggerProgrammaticLaunchCompletion(); the second kernel then
// runs its prologue and waits in cudaGridDependencySynchronize() until the first has
// completed and its writes are visible. This program runs 11 pairs each way and checks that
// the dependent kernel sees all of the first kernel's data both ways and, from the GPU's
// own clock (%globaltimer, whose step it measures first), that without the attribute the
// consumer did not start before the producer ended. Whether it started early with the
// attribute is printed as an observation: the overlap is allowed, never promised, so it
// cannot decide the verdict. --bench measures the gaps over 101 pairs.
//
//   dependent-launch               the steps, with their checks
//   dependent-launch --bench       also 101 pairs each way, median, "bench:" lines
//   dependent-launch --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "launch_helpers.h"

#if CUDA_VERSION >= 12000
namespace {

constexpr unsigned int kThreads = 256;
constexpr unsigned long long kSpinNs = 20000;  // the producer's length: 20 us
constexpr int kPairsChecked = 11;              // pairs each way behind the checks (median)
// The observation's margin: an overlap is reported when the consumer starts at least a
// quarter of the producer's length (5 us) before the producer's end.
constexpr double kOverlapMarginUs = kSpinNs / 4 / 1000.0;

struct Kernels {
    CUfunction producer;
    CUfunction consumer;
};
struct Buffers {
    CUdeviceptr data;
    CUdeviceptr out;
    CUdeviceptr times;  // [producer end, consumer start, consumer past the sync], ns
    unsigned int blocks;
};
struct Pair {
    size_t correct;     // consumer outputs that saw the producer's value
    bool waited;        // the consumer read only after the producer had ended
    double startGapUs;  // consumer's first block start - producer's last block end
    double dataGapUs;   // consumer past cudaGridDependencySynchronize - producer end
    float pairUs;       // both kernels, events around them
};

// One producer -> consumer pair on the stream; the consumer carries the PDL attribute
// when `programmatic`. Data, output and timestamps are reset on the GPU first (memsets:
// no host array has to outlive an asynchronous copy), so a pair cannot pass on what an
// earlier pair left behind.
Pair runPair(const Kernels& k, const Buffers& b, bool programmatic, CUevent start, CUevent stop, CUstream stream) {
    int n = static_cast<int>(b.blocks * kThreads);
    CHECK_DRIVER(cuMemsetD32Async(b.data, 0, n, stream));
    CHECK_DRIVER(cuMemsetD32Async(b.out, 0, n, stream));
    CHECK_DRIVER(cuMemsetD32Async(b.times, 0, 2, stream));                                         // times[0] = 0
    CHECK_DRIVER(cuMemsetD32Async(b.times + sizeof(unsigned long long), 0xFFFFFFFFu, 4, stream));  // [1], [2] = max
    CHECK_DRIVER(cuEventRecord(start, stream));

    unsigned long long spinNs = kSpinNs;
    CUdeviceptr data = b.data, out = b.out, times = b.times;
    void* producerParams[] = {&data, &n, &spinNs, &times};
    CUlaunchConfig plain = lesson16::launchConfig(b.blocks, kThreads, stream);
    CHECK_DRIVER(cuLaunchKernelEx(&plain, k.producer, producerParams, nullptr));
    CUlaunchAttribute serialization{};
    serialization.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    serialization.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig dependent = lesson16::launchConfig(b.blocks, kThreads, stream, &serialization, programmatic ? 1 : 0);
    void* consumerParams[] = {&data, &out, &n, &times};
    CHECK_DRIVER(cuLaunchKernelEx(&dependent, k.consumer, consumerParams, nullptr));
    CHECK_DRIVER(cuEventRecord(stop, stream));

    // copyBack synchronizes the stream; after that a plain (synchronous) copy reads the times.
    const std::vector<int> values = lesson16::copyBack(b.out, static_cast<size_t>(n), stream);
    unsigned long long t[3] = {};
    CHECK_DRIVER(cuMemcpyDtoH(t, b.times, sizeof(t)));
    Pair pair{};
    for (int i = 0; i < n; ++i)
        if (values[static_cast<size_t>(i)] == 2 * i + 2) ++pair.correct;
    pair.waited = t[2] >= t[0];
    pair.startGapUs = (static_cast<double>(t[1]) - static_cast<double>(t[0])) / 1000.0;
    pair.dataGapUs = (static_cast<double>(t[2]) - static_cast<double>(t[0])) / 1000.0;
    CHECK_DRIVER(cuEventElapsedTime(&pair.pairUs, start, stop));
    pair.pairUs *= 1000.0f;
    return pair;
}

// `count` pairs one way, after `untimed` pairs that are thrown away.
std::vector<Pair> runPairs(const Kernels& k, const Buffers& b, bool programmatic, int untimed, int count, CUevent start,
                           CUevent stop, CUstream stream) {
    std::vector<Pair> pairs;
    for (int run = -untimed; run < count; ++run) {
        const Pair p = runPair(k, b, programmatic, start, stop, stream);
        if (run >= 0) pairs.push_back(p);
    }
    return pairs;
}

template <class Get>
double median(const std::vector<Pair>& pairs, Get get) {
    std::vector<double> v;
    for (const Pair& p : pairs) v.push_back(get(p));
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// The lines of steps 4 and 5 for one way; returns the median start gap.
double report(bool programmatic, const std::vector<Pair>& pairs, size_t n, course::Verdict& verdict) {
    const char* way = programmatic ? "with PDL" : "without PDL";
    size_t worst = n;
    bool waited = true;
    for (const Pair& p : pairs) {
        worst = std::min(worst, p.correct);
        waited = waited && p.waited;
    }
    const double startGap = median(pairs, [](const Pair& p) { return p.startGapUs; });
    std::printf("%s: consumer saw the producer's data, worst of %zu pairs: %zu of %zu\n", way, pairs.size(), worst, n);
    std::printf("%s: median consumer start - producer end: %.2f us\n", way, startGap);
    if (programmatic) {
        verdict.check("with PDL the consumer saw all of the producer's data", worst == n);
        verdict.check("with PDL the consumer read only after the producer ended", waited);
    } else {
        verdict.check("without PDL the consumer saw all of the producer's data", worst == n);
        verdict.check("without PDL the consumer read only after the producer ended", waited);
    }
    return startGap;
}

// --bench: 101 pairs each way after 5 untimed ones; median of each measure. A gap smaller
// than the timer's step is below what %globaltimer resolves, and is said so.
void benchmark(const Kernels& k, const Buffers& b, double stepUs, CUevent start, CUevent stop, CUstream stream) {
    constexpr int kRuns = 101;
    std::printf("method: %d pairs each way after 5 untimed, median; gaps from %%globaltimer, pair time from events\n",
                kRuns);
    std::printf("| | consumer start - producer end | consumer past sync - producer end | both kernels |\n");
    std::printf("| --- | --- | --- | --- |\n");
    double pairTime[2] = {};
    for (int programmatic = 0; programmatic < 2; ++programmatic) {
        const std::vector<Pair> pairs = runPairs(k, b, programmatic != 0, 5, kRuns, start, stop, stream);
        const char* label = programmatic ? "with PDL" : "without PDL";
        const double startGap = median(pairs, [](const Pair& p) { return p.startGapUs; });
        const double dataGap = median(pairs, [](const Pair& p) { return p.dataGapUs; });
        pairTime[programmatic] = median(pairs, [](const Pair& p) { return static_cast<double>(p.pairUs); });
        std::printf("| %s | %.2f us | %.2f us | %.2f us |\n", label, startGap, dataGap, pairTime[programmatic]);
        std::printf("bench: consumer start - producer end, %s = %.2f us\n", label, startGap);
        std::printf("bench: consumer past the sync - producer end, %s = %.2f us\n", label, dataGap);
        std::printf("bench: producer + consumer, %s = %.2f us\n", label, pairTime[programmatic]);
        if (std::fabs(startGap) < stepUs) std::printf("below the %%globaltimer step: consumer start, %s\n", label);
        if (std::fabs(dataGap) < stepUs)
            std::printf("below the %%globaltimer step: consumer past the sync, %s\n", label);
    }
    std::printf("bench: time saved per pair by PDL = %.2f us\n", pairTime[0] - pairTime[1]);
}

}  // namespace
#endif

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    course::printStep(1, "initialise, check compute capability");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", ordinal, name);
#if CUDA_VERSION < 12000
    return lesson16::skipForOldHeaders("programmatic dependent launch");
#else
    const int capability = lesson16::computeCapability(device);
    if (capability < 90) return lesson16::skipForComputeCapability("programmatic dependent launch", capability);

    course::printStep(2, "retain the primary context, load the kernels, allocate");
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("launch_kernels.fatbin").c_str()));
    Kernels kernels{};
    CHECK_DRIVER(cuModuleGetFunction(&kernels.producer, module, "producer"));
    CHECK_DRIVER(cuModuleGetFunction(&kernels.consumer, module, "consumer"));
    CUfunction timerStep = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&timerStep, module, "timer_step"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUevent start = nullptr;
    CUevent stop = nullptr;
    CHECK_DRIVER(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    // One block per SM for each kernel: the consumer's blocks fit beside the producer's,
    // so an early launch has somewhere to run.
    int smCount = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
    Buffers buffers{0, 0, 0, static_cast<unsigned int>(smCount)};
    const size_t n = static_cast<size_t>(buffers.blocks) * kThreads;
    CHECK_DRIVER(cuMemAlloc(&buffers.data, n * sizeof(int)));
    CHECK_DRIVER(cuMemAlloc(&buffers.out, n * sizeof(int)));
    CHECK_DRIVER(cuMemAlloc(&buffers.times, 3 * sizeof(unsigned long long)));
    std::printf("each kernel: %u blocks of %u threads; the producer runs for %.0f us\n", buffers.blocks, kThreads,
                kSpinNs / 1000.0);

    // Step 3: %globaltimer counts nanoseconds but need not change every nanosecond. One
    // thread reads it until it has changed 64 times and keeps the smallest change: a gap
    // shorter than that step is not resolved by these timestamps.
    course::printStep(3, "the step of the GPU's clock (%globaltimer)");
    void* stepParams[] = {&buffers.times};
    CHECK_DRIVER(cuLaunchKernel(timerStep, 1, 1, 1, 1, 1, 1, 0, stream, stepParams, nullptr));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    unsigned long long stepNs = 0;
    CHECK_DRIVER(cuMemcpyDtoH(&stepNs, buffers.times, sizeof(stepNs)));
    std::printf("smallest step of %%globaltimer seen: %llu ns\n", stepNs);
    const double stepUs = static_cast<double>(stepNs) / 1000.0;

    // Step 4: the plain stream order: the consumer is launched after the producer completed.
    course::printStep(4, "producer -> consumer, plain stream order");
    const std::vector<Pair> plain = runPairs(kernels, buffers, false, 1, kPairsChecked, start, stop, stream);
    const double plainStart = report(false, plain, n, verdict);

    // Step 5: the consumer may start early; cudaGridDependencySynchronize() in it is what
    // keeps its reads after the producer's writes.
    course::printStep(5, "producer -> consumer with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION");
    const std::vector<Pair> early = runPairs(kernels, buffers, true, 1, kPairsChecked, start, stop, stream);
    const double earlyStart = report(true, early, n, verdict);

    // Step 6: did the consumer start before the producer ended? Without the attribute stream
    // order forbids it: a check. With it cuda.h says only that the CUDA runtime
    // "should opportunistically allow" the overlap, and NVIDIA's CUDA Programming Guide (section 4.5.2)
    // calls it "opportunistic and not guaranteed": a driver that runs the pair in order is
    // conforming, so the overlap is an observation and never decides the verdict.
    course::printStep(6, "the overlap: consumer start against producer end");
    verdict.check("without PDL the consumer started after the producer ended", plainStart >= 0.0);
    if (const char* tool = course::instrumentingTool())
        std::printf("observation PDL overlap: not measured (%s runs one kernel at a time)\n", tool);
    else if (stepUs >= kOverlapMarginUs)
        std::printf("observation PDL overlap: not measured (%%globaltimer steps by %.2f us, not finer than %.1f us)\n",
                    stepUs, kOverlapMarginUs);
    else
        std::printf("observation PDL overlap: the consumer started %.1f us or more before the producer ended: %s\n",
                    kOverlapMarginUs, earlyStart <= -kOverlapMarginUs ? "yes" : "no");

    course::printStep(7, "the gaps between the kernels, with and without PDL (--bench)");
    if (args.has("--bench"))
        benchmark(kernels, buffers, stepUs, start, stop, stream);
    else
        std::printf("timings: run with --bench\n");

    course::printStep(8, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(buffers.times));
    CHECK_DRIVER(cuMemFree(buffers.out));
    CHECK_DRIVER(cuMemFree(buffers.data));
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: buffers, events, stream, module, primary context\n");
    return verdict.finish();
#endif
}
