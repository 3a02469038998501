// Lesson 16, program 3 — programmatic dependent launch (PDL).
//
// Two kernels on one stream: the second starts only when the first has completed, and
// the GPU then needs a few microseconds to launch it. With the launch attribute
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION on the second kernel, the stream
// may start it early, as soon as every block of the first has called
// cudaTriggerProgrammaticLaunchCompletion(); the second kernel then runs its prologue and
// waits in cudaGridDependencySynchronize() until the first has completed and its writes
// are visible. This program checks that the dependent kernel sees all of the first
// kernel's data both ways, and (--bench) measures the gap between the two kernels with
// the GPU's own clock (%globaltimer), with and without the attribute.
//
//   dependent-launch               the steps, with their checks
//   dependent-launch --bench       also 101 pairs each way, median, "bench:" lines
//   dependent-launch --device N    another GPU
#include <cuda.h>

#include <algorithm>
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
// when `programmatic`. Timestamps and buffers are reset first.
Pair runPair(const Kernels& k, const Buffers& b, bool programmatic, CUevent start, CUevent stop, CUstream stream) {
    int n = static_cast<int>(b.blocks * kThreads);
    const unsigned long long initialTimes[3] = {0, ~0ull, ~0ull};
    CHECK_DRIVER(cuMemsetD32Async(b.data, 0, n, stream));
    CHECK_DRIVER(cuMemcpyHtoDAsync(b.times, initialTimes, sizeof(initialTimes), stream));
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

    unsigned long long t[3] = {};
    CHECK_DRIVER(cuMemcpyDtoHAsync(t, b.times, sizeof(t), stream));
    const std::vector<int> values = lesson16::copyBack(b.out, static_cast<size_t>(n), stream);
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

template <class Get>
double median(const std::vector<Pair>& pairs, Get get) {
    std::vector<double> v;
    for (const Pair& p : pairs) v.push_back(get(p));
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// --bench: 101 pairs each way after 5 untimed ones; median of each measure.
void benchmark(const Kernels& k, const Buffers& b, CUevent start, CUevent stop, CUstream stream) {
    constexpr int kRuns = 101;
    std::printf("method: %d pairs each way after 5 untimed, median; gaps from %%globaltimer, pair time from events\n",
                kRuns);
    std::printf("| | consumer start - producer end | consumer past sync - producer end | both kernels |\n");
    std::printf("| --- | --- | --- | --- |\n");
    double pairTime[2] = {};
    for (int programmatic = 0; programmatic < 2; ++programmatic) {
        std::vector<Pair> pairs;
        for (int run = -5; run < kRuns; ++run) {
            const Pair p = runPair(k, b, programmatic != 0, start, stop, stream);
            if (run >= 0) pairs.push_back(p);
        }
        const char* label = programmatic ? "with PDL" : "without PDL";
        const double startGap = median(pairs, [](const Pair& p) { return p.startGapUs; });
        const double dataGap = median(pairs, [](const Pair& p) { return p.dataGapUs; });
        pairTime[programmatic] = median(pairs, [](const Pair& p) { return static_cast<double>(p.pairUs); });
        std::printf("| %s | %.2f us | %.2f us | %.2f us |\n", label, startGap, dataGap, pairTime[programmatic]);
        std::printf("bench: consumer start - producer end, %s = %.2f us\n", label, startGap);
        std::printf("bench: consumer past the sync - producer end, %s = %.2f us\n", label, dataGap);
        std::printf("bench: producer + consumer, %s = %.2f us\n", label, pairTime[programmatic]);
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

    course::printStep(2, "retain the primary context, load both kernels, allocate");
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("launch_kernels.fatbin").c_str()));
    Kernels kernels{};
    CHECK_DRIVER(cuModuleGetFunction(&kernels.producer, module, "producer"));
    CHECK_DRIVER(cuModuleGetFunction(&kernels.consumer, module, "consumer"));
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

    // Step 3: the plain stream order: the consumer is launched after the producer completed.
    course::printStep(3, "producer -> consumer, plain stream order");
    const Pair plain = runPair(kernels, buffers, false, start, stop, stream);
    std::printf("without PDL: consumer saw the producer's data: %zu of %zu\n", plain.correct, n);
    std::printf("without PDL: consumer read only after the producer ended: %s\n", plain.waited ? "yes" : "no");

    // Step 4: the consumer may start early; cudaGridDependencySynchronize() in it is what
    // keeps its reads after the producer's writes.
    course::printStep(4, "producer -> consumer with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION");
    const Pair early = runPair(kernels, buffers, true, start, stop, stream);
    std::printf("with PDL: consumer saw the producer's data: %zu of %zu\n", early.correct, n);
    std::printf("with PDL: consumer read only after the producer ended: %s\n", early.waited ? "yes" : "no");

    course::printStep(5, "the gap between the kernels, with and without PDL (--bench)");
    if (args.has("--bench"))
        benchmark(kernels, buffers, start, stop, stream);
    else
        std::printf("timings: run with --bench\n");

    course::printStep(6, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(buffers.times));
    CHECK_DRIVER(cuMemFree(buffers.out));
    CHECK_DRIVER(cuMemFree(buffers.data));
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: buffers, events, stream, module, primary context\n");

    course::printStep(7, "check");
    const bool pass = plain.correct == n && early.correct == n && plain.waited && early.waited;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
#endif
}
