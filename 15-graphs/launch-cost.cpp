// Lesson 15, program 4 — what a graph saves: N kernels launched one by one, or as one graph.
//
// Every cuLaunchKernel is a trip through the driver: check the arguments, build the
// launch, push it to the GPU. A graph pays for that once, at instantiation; a launch
// of the whole graph is one trip. This program runs a chain of N tiny kernels
// (N = 1, 10, 100; each adds 1 to a counter, so the counter proves that all N ran,
// in order) on one stream: once as N cuLaunchKernel calls, once as one cuGraphLaunch
// of the same chain, captured. With --bench it measures two different things, each per
// kernel: the host's submission time (until the launch calls return) and the GPU's span
// (between two events recorded on the stream around the chain).
//
//   launch-cost               both ways once for each N, results checked
//   launch-cost --bench       also the timing: medians of many runs, "bench:" lines
//   launch-cost --device N    another GPU
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"

namespace {

// N launches of increment, one thread each, on the stream.
void queueChain(CUfunction increment, CUdeviceptr counter, int length, CUstream stream) {
    void* params[] = {&counter};
    for (int i = 0; i < length; ++i)
        CHECK_DRIVER(cuLaunchKernel(increment, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
}

// The two times of one way of running a chain, in microseconds, medians over the runs.
struct ChainTimes {
    double submitMicroseconds;  // host clock, around the calls that queue the chain
    double spanMicroseconds;    // GPU clock, from the event before the chain to the event after it
};

// `queue` queues the chain; `runs` timed runs after two untimed ones. Submission: from the
// first call until the last one returns (the work may still be running). Span: `before` is
// recorded on the stream ahead of the chain, `after` behind it, and cuEventElapsedTime gives
// the GPU time between them: the kernels, the gaps between dependent kernels, and any time
// the GPU sat idle waiting for the host to submit the next launch.
template <class Queue>
ChainTimes medianTimes(CUstream stream, CUevent before, CUevent after, int runs, Queue queue) {
    std::vector<double> submit;
    std::vector<double> span;
    for (int run = -2; run < runs; ++run) {
        CHECK_DRIVER(cuEventRecord(before, stream));
        const auto start = std::chrono::steady_clock::now();
        queue();
        const auto submitted = std::chrono::steady_clock::now();
        CHECK_DRIVER(cuEventRecord(after, stream));
        CHECK_DRIVER(cuEventSynchronize(after));
        float milliseconds = 0.0f;
        CHECK_DRIVER(cuEventElapsedTime(&milliseconds, before, after));
        if (run < 0) continue;
        submit.push_back(std::chrono::duration<double, std::micro>(submitted - start).count());
        span.push_back(1000.0 * milliseconds);
    }
    return {course::median(submit), course::median(span)};
}

// Zeroes the counter, queues the chain with `queue`, and reads the counter back into
// `readback`: pinned host memory that outlives the asynchronous copy (a local variable
// would be gone if the caller returned before the copy ran).
template <class Queue>
unsigned int countAfter(CUdeviceptr counter, unsigned int* readback, CUstream stream, Queue queue) {
    CHECK_DRIVER(cuMemsetD32Async(counter, 0, 1, stream));
    queue();
    CHECK_DRIVER(cuMemcpyDtoHAsync(readback, counter, sizeof(*readback), stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    return *readback;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    const bool bench = args.has("--bench");

    course::printStep(1, "initialise, load the kernel, create a stream");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", ordinal, name);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("graph_kernels.fatbin").c_str()));
    CUfunction increment = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&increment, module, "increment"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr counter = 0;
    CHECK_DRIVER(cuMemAlloc(&counter, sizeof(unsigned int)));
    void* readbackBuffer = nullptr;  // pinned: where the counter is copied back, asynchronously
    CHECK_DRIVER(cuMemAllocHost(&readbackBuffer, sizeof(unsigned int)));
    unsigned int* readback = static_cast<unsigned int*>(readbackBuffer);

    // Step 2: one graph per chain length, captured from the very calls the one-by-one
    // path makes, so both paths run the same work. Instantiation is the cost a graph
    // pays up front; it is not part of any timing below.
    course::printStep(2, "capture one graph per chain length");
    course::Verdict verdict;
    const int lengths[] = {1, 10, 100};
    CUgraphExec execs[3] = {};
    bool nodePerLaunch = true;
    for (int i = 0; i < 3; ++i) {
        CHECK_DRIVER(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
        queueChain(increment, counter, lengths[i], stream);
        CUgraph graph = nullptr;
        CHECK_DRIVER(cuStreamEndCapture(stream, &graph));
        size_t nodeCount = 0;
        CHECK_DRIVER(cuGraphGetNodes(graph, nullptr, &nodeCount));
        CHECK_DRIVER(course::graphInstantiate(&execs[i], graph, 0));
        CHECK_DRIVER(cuGraphDestroy(graph));  // the exec does not need it
        std::printf("captured chain of %d: %zu kernel nodes, instantiated\n", lengths[i], nodeCount);
        nodePerLaunch = nodePerLaunch && nodeCount == static_cast<size_t>(lengths[i]);
    }
    verdict.check("each captured graph has one node per launch", nodePerLaunch);

    // Step 3: both paths, once each, checked: the counter must say N.
    course::printStep(3, "run each chain both ways and check the counter");
    bool oneByOneCounts = true;
    bool graphCounts = true;
    for (int i = 0; i < 3; ++i) {
        const unsigned int oneByOne =
            countAfter(counter, readback, stream, [&] { queueChain(increment, counter, lengths[i], stream); });
        const unsigned int asGraph =
            countAfter(counter, readback, stream, [&] { CHECK_DRIVER(cuGraphLaunch(execs[i], stream)); });
        std::printf("chain of %d: %u after %d cuLaunchKernel calls, %u after 1 cuGraphLaunch\n", lengths[i], oneByOne,
                    lengths[i], asGraph);
        oneByOneCounts = oneByOneCounts && oneByOne == static_cast<unsigned int>(lengths[i]);
        graphCounts = graphCounts && asGraph == static_cast<unsigned int>(lengths[i]);
    }
    verdict.check("every chain launched one by one counts to its length", oneByOneCounts);
    verdict.check("every chain launched as a graph counts to its length", graphCounts);

    // Step 4: the timing, two numbers per way, each divided by N. Submission is host time:
    // what the launching thread spends in cuLaunchKernel x N or in one cuGraphLaunch. The
    // span is GPU time between two events around the chain; it holds the kernels and the gaps
    // between them, and, when the host submits more slowly than the GPU runs, the GPU's waits
    // for the next launch. A graph shrinks the first and may shrink the gaps; it does not make
    // the kernels themselves faster.
    course::printStep(4, "cost per kernel: one by one vs one graph launch");
    if (bench) {
        constexpr int kRuns = 201;
        CUevent before = nullptr;
        CUevent after = nullptr;
        CHECK_DRIVER(cuEventCreate(&before, CU_EVENT_DEFAULT));
        CHECK_DRIVER(cuEventCreate(&after, CU_EVENT_DEFAULT));
        std::printf(
            "method: %d timed runs after 2 untimed, medians, per kernel = time / N; submission: host clock "
            "around the launch calls; GPU span: cuEventElapsedTime between events recorded before and after "
            "the chain\n",
            kRuns);
        std::printf(
            "| N | submit, one by one | submit, graph | ratio | GPU span, one by one | GPU span, graph | ratio |\n");
        std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
        for (int i = 0; i < 3; ++i) {
            const int n = lengths[i];
            const ChainTimes oneByOne =
                medianTimes(stream, before, after, kRuns, [&] { queueChain(increment, counter, n, stream); });
            const ChainTimes asGraph =
                medianTimes(stream, before, after, kRuns, [&] { CHECK_DRIVER(cuGraphLaunch(execs[i], stream)); });
            const double submitOne = oneByOne.submitMicroseconds / n;
            const double submitGraph = asGraph.submitMicroseconds / n;
            const double spanOne = oneByOne.spanMicroseconds / n;
            const double spanGraph = asGraph.spanMicroseconds / n;
            std::printf(
                "| %d | %.2f us/kernel | %.2f us/kernel | %.1f x | %.2f us/kernel | %.2f us/kernel | %.1f x |\n", n,
                submitOne, submitGraph, submitOne / submitGraph, spanOne, spanGraph, spanOne / spanGraph);
            std::printf("bench: host submission per kernel, cuLaunchKernel one by one, N=%d = %.2f us\n", n, submitOne);
            std::printf("bench: host submission per kernel, one cuGraphLaunch, N=%d = %.2f us\n", n, submitGraph);
            std::printf("bench: host submission, one by one / graph, N=%d = %.1f x\n", n, submitOne / submitGraph);
            std::printf("bench: GPU span per kernel, one by one, N=%d = %.2f us\n", n, spanOne);
            std::printf("bench: GPU span per kernel, one graph, N=%d = %.2f us\n", n, spanGraph);
            std::printf("bench: GPU span, one by one / graph, N=%d = %.1f x\n", n, spanOne / spanGraph);
        }
        CHECK_DRIVER(cuEventDestroy(after));
        CHECK_DRIVER(cuEventDestroy(before));
    } else {
        std::printf("timings: run with --bench\n");
    }

    course::printStep(5, "release everything, newest first");
    for (int i = 2; i >= 0; --i) CHECK_DRIVER(cuGraphExecDestroy(execs[i]));
    CHECK_DRIVER(cuMemFreeHost(readbackBuffer));
    CHECK_DRIVER(cuMemFree(counter));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: graph execs, readback buffer, counter, stream, module, primary context\n");

    course::printStep(6, "check");
    return verdict.finish();
}
