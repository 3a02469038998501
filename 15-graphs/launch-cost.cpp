// Lesson 15, program 4 — what a graph saves: N kernels launched one by one, or as one graph.
//
// Every cuLaunchKernel is a trip through the driver: check the arguments, build the
// launch, push it to the GPU. A graph pays for that once, at instantiation; a launch
// of the whole graph is one trip. This program runs a chain of N tiny kernels
// (N = 1, 10, 100; each adds 1 to a counter, so the counter proves that all N ran,
// in order) on one stream: once as N cuLaunchKernel calls, once as one cuGraphLaunch
// of the same chain, captured. With --bench it times both and prints the cost per kernel.
//
//   launch-cost               both ways once for each N, results checked
//   launch-cost --bench       also the timing: median of many runs, "bench:" lines
//   launch-cost --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

// Median microseconds, host clock, from the first call that queues the chain until the
// stream has run it. `queue` queues it; `runs` timed runs after two untimed ones.
template <class Queue>
double medianMicroseconds(CUstream stream, int runs, Queue queue) {
    std::vector<double> times;
    for (int run = -2; run < runs; ++run) {
        const auto start = std::chrono::steady_clock::now();
        queue();
        CHECK_DRIVER(cuStreamSynchronize(stream));
        const auto end = std::chrono::steady_clock::now();
        if (run >= 0) times.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// Zeroes the counter, queues the chain with `queue`, and reads the counter back.
template <class Queue>
unsigned int countAfter(CUdeviceptr counter, CUstream stream, Queue queue) {
    CHECK_DRIVER(cuMemsetD32Async(counter, 0, 1, stream));
    queue();
    unsigned int value = 0;
    CHECK_DRIVER(cuMemcpyDtoHAsync(&value, counter, sizeof(value), stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    return value;
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

    // Step 2: one graph per chain length, captured from the very calls the one-by-one
    // path makes, so both paths run the same work. Instantiation is the cost a graph
    // pays up front; it is not part of any timing below.
    course::printStep(2, "capture one graph per chain length");
    const int lengths[] = {1, 10, 100};
    CUgraphExec execs[3] = {};
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
    }

    // Step 3: both paths, once each, checked: the counter must say N.
    course::printStep(3, "run each chain both ways and check the counter");
    bool countsCorrect = true;
    for (int i = 0; i < 3; ++i) {
        const unsigned int oneByOne =
            countAfter(counter, stream, [&] { queueChain(increment, counter, lengths[i], stream); });
        const unsigned int asGraph =
            countAfter(counter, stream, [&] { CHECK_DRIVER(cuGraphLaunch(execs[i], stream)); });
        std::printf("chain of %d: %u after %d cuLaunchKernel calls, %u after 1 cuGraphLaunch\n", lengths[i], oneByOne,
                    lengths[i], asGraph);
        countsCorrect = countsCorrect && oneByOne == static_cast<unsigned int>(lengths[i]) &&
                        asGraph == static_cast<unsigned int>(lengths[i]);
    }

    // Step 4: the timing. Host clock from the first call to the end of
    // cuStreamSynchronize: what an application waits for. Per kernel = that / N.
    course::printStep(4, "cost per kernel: one by one vs one graph launch");
    if (bench) {
        constexpr int kRuns = 201;
        std::printf(
            "method: %d timed runs after 2 untimed, median; host clock from the first call until "
            "cuStreamSynchronize returns; per kernel = run time / N\n",
            kRuns);
        std::printf("| N | cuLaunchKernel x N | cuGraphLaunch x 1 | one by one / graph |\n");
        std::printf("| --- | --- | --- | --- |\n");
        for (int i = 0; i < 3; ++i) {
            const int n = lengths[i];
            const double oneByOne =
                medianMicroseconds(stream, kRuns, [&] { queueChain(increment, counter, n, stream); }) / n;
            const double asGraph =
                medianMicroseconds(stream, kRuns, [&] { CHECK_DRIVER(cuGraphLaunch(execs[i], stream)); }) / n;
            std::printf("| %d | %.2f us/kernel | %.2f us/kernel | %.1f x |\n", n, oneByOne, asGraph,
                        oneByOne / asGraph);
            std::printf("bench: per kernel, cuLaunchKernel one by one, N=%d = %.2f us\n", n, oneByOne);
            std::printf("bench: per kernel, one cuGraphLaunch, N=%d = %.2f us\n", n, asGraph);
            std::printf("bench: one by one / graph, N=%d = %.1f x\n", n, oneByOne / asGraph);
        }
    } else {
        std::printf("timings: run with --bench\n");
    }

    course::printStep(5, "release everything, newest first");
    for (int i = 2; i >= 0; --i) CHECK_DRIVER(cuGraphExecDestroy(execs[i]));
    CHECK_DRIVER(cuMemFree(counter));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: graph execs, counter, stream, module, primary context\n");

    course::printStep(6, "check");
    const bool pass = countsCorrect;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
