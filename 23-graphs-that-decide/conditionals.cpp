// Lesson 23, program 1 — conditional nodes: a graph that decides on the GPU what runs next.
//
// Lesson 15's graphs run the same nodes at every launch. A conditional node runs a body graph
// depending on a value that a kernel sets on the GPU with cudaGraphSetConditional: an IF node
// runs its body once or not at all, a WHILE node runs it again for as long as the value is
// non-zero. This program builds both with cuGraphConditionalHandleCreate and cuGraphAddNode
// (CU_GRAPH_NODE_TYPE_CONDITIONAL): an IF that clamps negative values only when the GPU found
// one, and a WHILE that moves every element toward its target until all have arrived, whose
// number of sweeps it checks against the host's own count, at the first launch and at a second
// one that must start from the beginning again, and whose bound it tries with a second WHILE
// graph that may not finish. Then it runs the same loop from the host, one launch and one
// read-back per sweep; --bench times both ways.
//
//   conditionals               the walkthrough
//   conditionals --bench       also the loop timed both ways: medians, "bench:" lines
//   conditionals --device N    another GPU
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "lesson23.h"
#include "relax_loop.h"

#if CUDA_VERSION >= 12040
namespace {

using lesson23::kLoopCount;
using lesson23::kMaxSweeps;
using lesson23::kStep;
constexpr int kIfCount = 1 << 16;    // floats the IF graph looks at
constexpr unsigned int kBound = 10;  // the bound of step 5's second WHILE graph, below the sweeps it needs

struct Kernels {
    CUfunction decideAnyNegative, clampNegatives, relaxStep, decideAgain;
};

// decide_any_negative (one block) -> IF node whose body is clamp_negatives. `counts` holds two
// counters: [0] the body's runs, [1] decide_any_negative's cudaGraphSetConditional calls.
CUgraph buildIfGraph(const Kernels& k, CUcontext context, CUdeviceptr x, CUdeviceptr counts) {
    CUgraph graph = nullptr;
    CHECK_DRIVER(cuGraphCreate(&graph, 0));
    // With CU_GRAPH_COND_ASSIGN_DEFAULT the value is set to 0 at the start of every launch
    // (cuda.h:21569). decide_any_negative sets it (to 1) only where it finds a negative value: a
    // launch without one runs on that 0 and skips the body, not on a value cuda.h does not name.
    CUgraphConditionalHandle handle = 0;
    CHECK_DRIVER(cuGraphConditionalHandleCreate(&handle, graph, context, 0, CU_GRAPH_COND_ASSIGN_DEFAULT));
    int n = kIfCount;
    CUdeviceptr bodyRuns = counts, setCalls = counts + sizeof(unsigned int);
    void* decideParams[] = {&x, &n, &handle, &setCalls};
    const CUgraphNode decide =
        lesson23::addNode(graph, {}, lesson23::kernelNode(k.decideAnyNegative, 1, 256, decideParams));
    CUgraphNodeParams ifParams{};
    ifParams.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    ifParams.conditional.handle = handle;
    ifParams.conditional.type = CU_GRAPH_COND_TYPE_IF;
    ifParams.conditional.size = 1;  // one body graph (13.0's cuda.h also allows 2: an ELSE body)
    ifParams.conditional.ctx = context;
    CUgraphNode ifNode = nullptr;
    CHECK_DRIVER(course::graphAddNode(&ifNode, graph, &decide, 1, &ifParams));
    // The call filled in the body graph: cuda.h:1877-1878 calls the array "CUDA-owned" and the
    // graphs "Valid for the lifetime of the conditional node". It is filled like any graph, within
    // the Guide's rules too (section 4.2.4.2): no kernel that launches work, and copies or memsets
    // only of device memory or pinned device-mapped host memory.
    CUgraph body = ifParams.conditional.phGraph_out[0];
    void* clampParams[] = {&x, &n, &bodyRuns};
    lesson23::addNode(body, {}, lesson23::kernelNode(k.clampNegatives, lesson23::blocksFor(n), 256, clampParams));
    return graph;
}

// memset (the sweep flag and the sweep count to 0) -> WHILE node whose body is
// relax_step -> decide_again, which ends the loop after `maxSweeps` sweeps at most. The memset
// node puts back, at every launch, the count that the previous launch left at its number of sweeps.
CUgraph buildWhileGraph(const Kernels& k, CUcontext context, CUdeviceptr v, CUdeviceptr t, CUdeviceptr state,
                        unsigned int maxSweeps) {
    CUgraph graph = nullptr;
    CHECK_DRIVER(cuGraphCreate(&graph, 0));
    // A WHILE node runs its body "while condition value is non-zero" (cuda.h:1863): 1 at the start
    // of every launch starts the loop, and decide_again sets the value at the end of each pass. A
    // launch ends with the value at 0; only CU_GRAPH_COND_ASSIGN_DEFAULT makes the next launch
    // start from 1 again (cuda.h:21569). Step 5's second launch shows both resets at work.
    CUgraphConditionalHandle handle = 0;
    CHECK_DRIVER(cuGraphConditionalHandleCreate(&handle, graph, context, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    const CUgraphNode reset = lesson23::addNode(graph, {}, lesson23::memsetNode(state, 0, 2, context));
    CUgraphNodeParams loopParams{};
    loopParams.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    loopParams.conditional.handle = handle;
    loopParams.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
    loopParams.conditional.size = 1;
    loopParams.conditional.ctx = context;
    CUgraphNode whileNode = nullptr;
    CHECK_DRIVER(course::graphAddNode(&whileNode, graph, &reset, 1, &loopParams));
    CUgraph body = loopParams.conditional.phGraph_out[0];
    int n = kLoopCount;
    int step = kStep;
    void* relaxParams[] = {&v, &t, &n, &step, &state};
    const CUgraphNode relax =
        lesson23::addNode(body, {}, lesson23::kernelNode(k.relaxStep, lesson23::blocksFor(n), 256, relaxParams));
    void* decideParams[] = {&state, &maxSweeps, &handle};
    lesson23::addNode(body, {relax}, lesson23::kernelNode(k.decideAgain, 1, 1, decideParams));
    return graph;
}

// The WHILE graph: one launch runs every sweep. Returns the sweeps the GPU counted.
unsigned int runGraphLoop(CUgraphExec exec, CUstream stream, CUdeviceptr state) {
    CHECK_DRIVER(cuGraphLaunch(exec, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    return lesson23::copyBack<unsigned int>(state, 2)[1];
}

// A WHILE graph like step 4's whose decide_again stops the loop after `bound` sweeps, launched once
// on the start values, then destroyed. Returns the sweeps the GPU counted and the elements that
// reached their target.
std::pair<unsigned int, size_t> boundedLoop(const Kernels& k, CUcontext context, CUstream stream, CUdeviceptr v,
                                            CUdeviceptr t, CUdeviceptr state, const lesson23::LoopData& data,
                                            unsigned int bound) {
    CUgraph graph = buildWhileGraph(k, context, v, t, state, bound);
    CUgraphExec exec = nullptr;
    CHECK_DRIVER(course::graphInstantiate(&exec, graph, 0));
    lesson23::loadStart(stream, v, data);
    const unsigned int sweeps = runGraphLoop(exec, stream, state);
    const size_t arrived = lesson23::countMatching(lesson23::copyBack<int>(v, kLoopCount), data.target);
    CHECK_DRIVER(cuGraphExecDestroy(exec));
    CHECK_DRIVER(cuGraphDestroy(graph));
    return {sweeps, arrived};
}

// The same loop driven from the host: per sweep one launch, the flag copied back and cleared,
// and a wait for the answer before the host can decide. `flag` is page-locked host memory.
unsigned int runHostLoop(CUfunction relaxStep, CUstream stream, CUdeviceptr v, CUdeviceptr t, CUdeviceptr state,
                         unsigned int* flag) {
    CHECK_DRIVER(cuMemsetD32Async(state, 0, 1, stream));
    int n = kLoopCount;
    int step = kStep;
    void* params[] = {&v, &t, &n, &step, &state};
    unsigned int sweeps = 0;
    do {
        CHECK_DRIVER(cuLaunchKernel(relaxStep, lesson23::blocksFor(n), 1, 1, 256, 1, 1, 0, stream, params, nullptr));
        CHECK_DRIVER(cuMemcpyDtoHAsync(flag, state, sizeof(unsigned int), stream));
        CHECK_DRIVER(cuMemsetD32Async(state, 0, 1, stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
        ++sweeps;
    } while (*flag != 0 && sweeps < kMaxSweeps);
    return sweeps;
}

}  // namespace
#endif

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "initialise, check the versions, load the kernels");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    if (!lesson23::usableHere(device, ordinal)) return course::kExitNotApplicable;
#if CUDA_VERSION >= 12040
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("decide_kernels.fatbin").c_str()));
    Kernels k{};
    CHECK_DRIVER(cuModuleGetFunction(&k.decideAnyNegative, module, "decide_any_negative"));
    CHECK_DRIVER(cuModuleGetFunction(&k.clampNegatives, module, "clamp_negatives"));
    CHECK_DRIVER(cuModuleGetFunction(&k.relaxStep, module, "relax_step"));
    CHECK_DRIVER(cuModuleGetFunction(&k.decideAgain, module, "decide_again"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr x = 0, ifCounts = 0, v = 0, t = 0, state = 0;
    CHECK_DRIVER(cuMemAlloc(&x, kIfCount * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&ifCounts, 2 * sizeof(unsigned int)));  // [0] IF body runs, [1] value set calls
    CHECK_DRIVER(cuMemAlloc(&v, kLoopCount * sizeof(int)));
    CHECK_DRIVER(cuMemAlloc(&t, kLoopCount * sizeof(int)));
    CHECK_DRIVER(cuMemAlloc(&state, 2 * sizeof(unsigned int)));  // [0] sweep flag, [1] sweeps
    void* flagBuffer = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&flagBuffer, sizeof(unsigned int)));
    course::Verdict verdict;

    // Step 2: decide on the GPU, then IF. Only the graph's own kernel looks at the data.
    course::printStep(2, "IF: decide_any_negative -> IF { clamp_negatives }");
    CUgraph ifGraph = buildIfGraph(k, context, x, ifCounts);
    CUgraphExec ifExec = nullptr;
    CHECK_DRIVER(course::graphInstantiate(&ifExec, ifGraph, 0));
    CHECK_DRIVER(cuMemsetD32Async(ifCounts, 0, 2, stream));
    std::printf("IF graph nodes: %zu (decide_any_negative, the IF node; clamp_negatives is in the IF's body)\n",
                lesson23::nodeCount(ifGraph));

    // Step 3: the same exec, launched on two inputs. The host computes what each should give.
    course::printStep(3, "IF: launch with a negative value, then with none");
    // The negative values are every 7th element of the second half only: the first half (x[0] and
    // the 256 elements that one pass of the block's threads reads first) holds none, so a kernel
    // that looked at too few elements would find none and skip the body.
    std::vector<float> mixed(kIfCount), clamped(kIfCount), positive(kIfCount);
    for (int i = 0; i < kIfCount; ++i) {
        const bool negative = i >= kIfCount / 2 && i % 7 == 0;
        mixed[i] = negative ? -static_cast<float>(i % 100) - 1.0f : static_cast<float>(i % 100);
        clamped[i] = mixed[i] < 0.0f ? 0.0f : mixed[i];
        positive[i] = static_cast<float>(i % 100) + 0.5f;
    }
    // On data without a negative value the body's clamp would change nothing: only the body's own
    // count of its runs tells whether it ran. No kernel sets the value in that launch: the 0 that
    // CU_GRAPH_COND_ASSIGN_DEFAULT gives every launch decides.
    unsigned int runsAfter[2] = {};
    bool clampedAsHostSays = false;
    for (int launch = 0; launch < 2; ++launch) {
        const std::vector<float>& input = launch == 0 ? mixed : positive;
        CHECK_DRIVER(cuMemcpyHtoDAsync(x, input.data(), kIfCount * sizeof(float), stream));
        CHECK_DRIVER(cuGraphLaunch(ifExec, stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
        if (launch == 0) clampedAsHostSays = lesson23::copyBack<float>(x, kIfCount) == clamped;
        runsAfter[launch] = lesson23::copyBack<unsigned int>(ifCounts, 1)[0];
    }
    const unsigned int setCalls = lesson23::copyBack<unsigned int>(ifCounts, 2)[1];
    std::printf("with negatives: IF body runs so far: %u, data as the host computes: %s\n", runsAfter[0],
                clampedAsHostSays ? "yes (negatives clamped)" : "no");
    std::printf("without negatives: IF body runs so far: %u\n", runsAfter[1]);
    verdict.check("IF body ran when the GPU found a negative value", runsAfter[0] == 1 && clampedAsHostSays);
    verdict.check("IF body was skipped when the GPU found none", runsAfter[1] == 1);
    std::printf("cudaGraphSetConditional calls in decide_any_negative: %u (one thread, in the launch with negatives)\n",
                setCalls);
    verdict.check("one thread set the IF's value, in the launch that found a negative value", setCalls == 1);

    // Step 4: the loop. Its body decides, at the end of each sweep, whether there is another.
    course::printStep(4, "WHILE: reset -> WHILE { relax_step -> decide_again }");
    const lesson23::LoopData data = lesson23::makeLoopData(100);
    const unsigned int expected = lesson23::sweepsNeeded(data);
    CHECK_DRIVER(cuMemcpyHtoDAsync(t, data.target.data(), kLoopCount * sizeof(int), stream));
    CUgraph whileGraph = buildWhileGraph(k, context, v, t, state, kMaxSweeps);
    CUgraphExec whileExec = nullptr;
    CHECK_DRIVER(course::graphInstantiate(&whileExec, whileGraph, 0));
    std::printf("WHILE graph nodes: %zu (the memset, the WHILE node; relax_step -> decide_again is its body)\n",
                lesson23::nodeCount(whileGraph));
    std::printf("host's count of sweeps needed: %u (%d elements, at most %d closer per sweep)\n", expected, kLoopCount,
                kStep);

    // Step 5: one cuGraphLaunch runs every sweep; the GPU counted them. Then the same exec again,
    // on what the first launch left: the count at its sweeps and the handle's value at 0. Only the
    // memset node and CU_GRAPH_COND_ASSIGN_DEFAULT make the second launch start from the beginning.
    // Last, a second WHILE graph whose decide_again stops the loop after 10 sweeps, fewer than the
    // data need: the bound, not the data, ends it.
    course::printStep(5, "WHILE: one launch, the sweeps counted on the GPU; the same exec again; a bound of 10 sweeps");
    lesson23::loadStart(stream, v, data);
    const unsigned int graphSweeps = runGraphLoop(whileExec, stream, state);
    const size_t arrived = lesson23::countMatching(lesson23::copyBack<int>(v, kLoopCount), data.target);
    std::printf("WHILE loop sweeps: %u\n", graphSweeps);
    std::printf("elements at their target: %zu of %d\n", arrived, kLoopCount);
    verdict.check("WHILE ran as many sweeps as the host counted", graphSweeps == expected);
    verdict.check("WHILE left every element at its target", arrived == static_cast<size_t>(kLoopCount));
    lesson23::loadStart(stream, v, data);  // start values again; the sweep count and the handle are the graph's
    const unsigned int againSweeps = runGraphLoop(whileExec, stream, state);
    const size_t againArrived = lesson23::countMatching(lesson23::copyBack<int>(v, kLoopCount), data.target);
    std::printf("second launch of the WHILE exec: %u sweeps, %zu of %d elements at their target\n", againSweeps,
                againArrived, kLoopCount);
    verdict.check("a second launch ran the loop again from the start",
                  againSweeps == expected && againArrived == static_cast<size_t>(kLoopCount));
    const auto [boundedSweeps, boundedArrived] = boundedLoop(k, context, stream, v, t, state, data, kBound);
    const size_t arrivedWithinBound = lesson23::arrivedWithin(data, kBound);
    std::printf(
        "WHILE graph bounded at %u sweeps: %u sweeps, %zu of %d elements at their target (the host expects %zu)\n",
        kBound, boundedSweeps, boundedArrived, kLoopCount, arrivedWithinBound);
    verdict.check("a WHILE loop bounded at 10 sweeps stopped after 10",
                  boundedSweeps == kBound && boundedArrived == arrivedWithinBound);

    // Step 6: without a conditional node the host decides: a launch, a copy and a wait per sweep.
    course::printStep(6, "the same loop from the host: one launch and one read-back per sweep");
    unsigned int* flag = static_cast<unsigned int*>(flagBuffer);
    lesson23::loadStart(stream, v, data);
    const unsigned int hostSweeps = runHostLoop(k.relaxStep, stream, v, t, state, flag);
    std::printf("host-driven loop sweeps: %u\n", hostSweeps);
    verdict.check("host-driven loop needed the same number of sweeps", hostSweeps == expected);

    // Step 7: both ways timed, wall clock from the first call to the end of the last wait.
    course::printStep(7, "timing: one conditional graph vs one launch per sweep");
    if (args.has("--bench")) {
        const bool agreed = lesson23::benchLoops(
            stream, v, t, [&] { return runGraphLoop(whileExec, stream, state); },
            [&] { return runHostLoop(k.relaxStep, stream, v, t, state, flag); });
        verdict.check("every timed run needed the host's count of sweeps", agreed);
    } else {
        std::printf("timings: run with --bench\n");
    }

    course::printStep(8, "release everything, newest first");
    CHECK_DRIVER(cuGraphExecDestroy(whileExec));
    CHECK_DRIVER(cuGraphDestroy(whileGraph));  // body graphs live as long as their node (cuda.h:1878)
    CHECK_DRIVER(cuGraphExecDestroy(ifExec));
    CHECK_DRIVER(cuGraphDestroy(ifGraph));
    CHECK_DRIVER(cuMemFreeHost(flagBuffer));
    for (CUdeviceptr buffer : {state, t, v, ifCounts, x}) CHECK_DRIVER(cuMemFree(buffer));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: graph execs, graphs, buffers, stream, module, primary context\n");

    course::printStep(9, "check");
    return verdict.finish();
#else
    return course::kExitNotApplicable;  // not reached: usableHere said why and returned false
#endif
}
