// Lesson 23, program 7 — editing a graph after instantiation: what reaches the exec, and when.
//
// The typed setters of the graph (cuGraphHostNodeSetParams, cuGraphMemcpyNodeSetParams,
// cuGraphEventRecordNodeSetEvent, cuGraphEventWaitNodeSetEvent, cuGraphBatchMemOpNodeSetParams)
// edit the CUgraph; that an exec made from it before the edit went on running what it was
// instantiated with is what step 3 observed on the H200 (cuda.h says it the other way round: the
// cuGraphExec...SetParams / ...SetEvent calls change the exec's node and leave the graph as it
// was). cuGraphExecUpdate carries the graph's parameters into the exec. This program edits a
// graph, launches the old exec, updates it, then sets the exec directly (child graph, events,
// batch memory operation), and checks on the host what each launch did.
//
//   graph_or_exec               the walkthrough
//   graph_or_exec --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "lesson23.h"
#include "node_kinds.h"

#if CUDA_VERSION >= 12040
namespace {

using lesson23::eventNode;
using lesson23::HostView;
constexpr int kCount = 1 << 16;
constexpr size_t kAll = kCount;
constexpr size_t kBytes = kCount * sizeof(float);
const unsigned int kOne = std::bit_cast<std::uint32_t>(1.0f);
constexpr float kProduced = 7.0f;                   // what the producer writes into y
constexpr unsigned long long kSpinNs = 20'000'000;  // the producer's spin: 20 ms by %globaltimer

struct Nodes {
    CUgraphNode begin, wait, fill, inner, add, copy, look, batch, record;
};

// A child graph of one node, x = a * x + b (the kernel's arguments are copied when it is added).
CUgraph axpbGraph(CUfunction axpb, CUdeviceptr x, float a, float b) {
    CUgraph child = nullptr;
    CHECK_DRIVER(cuGraphCreate(&child, 0));
    int n = kCount;
    void* params[] = {&x, &a, &b, &n};
    lesson23::addNode(child, {}, lesson23::kernelNode(axpb, lesson23::blocksFor(n), 256, params));
    return child;
}

// A batch node's parameters: one 32-bit write of `value` to `word` (`op` holds the operation).
CUDA_BATCH_MEM_OP_NODE_PARAMS writeWord(CUstreamBatchMemOpParams& op, CUcontext context, CUdeviceptr word,
                                        unsigned int value) {
    std::memset(&op, 0, sizeof(op));
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = word;
    op.writeValue.value = value;
    op.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    CUDA_BATCH_MEM_OP_NODE_PARAMS params{};
    params.ctx = context;
    params.count = 1;
    params.paramArray = &op;  // copied by the calls that take it (cuda.h)
    return params;
}

// The value the graph's own batch node writes (its one operation), read back.
unsigned int graphBatchValue(CUgraphNode node) {
    CUDA_BATCH_MEM_OP_NODE_PARAMS read{};
    CHECK_DRIVER(cuGraphBatchMemOpNodeGetParams(node, &read));
    return read.count == 1 ? read.paramArray[0].writeValue.value : 0u;
}

// What the graph's nodes use. Three events of each kind: the graph's first, the graph edit's,
// the exec setter's.
struct Pieces {
    CUcontext context;
    CUfunction axpb, addScaled;
    CUdeviceptr x, y, word;
    CUevent begin;        // recorded at the start of every launch
    CUevent produced[3];  // recorded behind the producer; the wait node waits for one
    CUevent recorded[3];  // the record node records one
    float* hostA;
    HostView* viewA;
};

// record(begin) -> batch: word = 1 -------------------------------------------------------+
// wait(produced[0]) ---------------------------+                                           |
// fill x = 1 -> child graph { x = 2x + 3 } -> add x += 1 * y -> copy x to hostA -> host node (viewA)
//                                                                                         +-> record(recorded[0])
CUgraph buildGraph(const Pieces& p, Nodes& n) {
    CUgraph graph = nullptr;
    CHECK_DRIVER(cuGraphCreate(&graph, 0));
    n.begin = lesson23::addNode(graph, {}, eventNode(CU_GRAPH_NODE_TYPE_EVENT_RECORD, p.begin));
    CUstreamBatchMemOpParams op;
    const CUDA_BATCH_MEM_OP_NODE_PARAMS one = writeWord(op, p.context, p.word, 1);
    CHECK_DRIVER(cuGraphAddBatchMemOpNode(&n.batch, graph, &n.begin, 1, &one));
    n.wait = lesson23::addNode(graph, {}, eventNode(CU_GRAPH_NODE_TYPE_WAIT_EVENT, p.produced[0]));
    n.fill = lesson23::addNode(graph, {}, lesson23::memsetNode(p.x, kOne, kCount, p.context));
    CUgraph child = axpbGraph(p.axpb, p.x, 2.0f, 3.0f);
    CHECK_DRIVER(cuGraphAddChildGraphNode(&n.inner, graph, &n.fill, 1, child));
    CHECK_DRIVER(cuGraphDestroy(child));  // the node holds its own clone
    CUdeviceptr x = p.x, y = p.y;
    float s = 1.0f;
    int count = kCount;
    void* addParams[] = {&x, &y, &s, &count};
    n.add = lesson23::addNode(graph, {n.inner, n.wait},
                              lesson23::kernelNode(p.addScaled, lesson23::blocksFor(count), 256, addParams));
    n.copy = lesson23::addNode(graph, {n.add}, lesson23::copyToHostNode(p.hostA, p.x, kBytes, p.context));
    n.look = lesson23::addNode(graph, {n.copy}, lesson23::hostNode(p.viewA));
    n.record = lesson23::addNode(graph, {n.look, n.batch}, eventNode(CU_GRAPH_NODE_TYPE_EVENT_RECORD, p.recorded[0]));
    return graph;
}

size_t holding(const float* buffer, float value) {
    return lesson23::countEqual(buffer, kCount, value);
}

// Whether `event` has been recorded: cuda.h (cuEventElapsedTime) answers CUDA_ERROR_INVALID_HANDLE
// where cuEventRecord "has not been called on either event"; `begin` is recorded by every launch.
// The time itself is not used.
CUresult everRecorded(CUevent begin, CUevent event) {
    float milliseconds = 0.0f;
    return cuEventElapsedTime(&milliseconds, begin, event);
}

}  // namespace
#endif

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
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
    Pieces p{};
    p.context = context;
    CUfunction produce = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&p.axpb, module, "axpb"));
    CHECK_DRIVER(cuModuleGetFunction(&p.addScaled, module, "add_scaled"));
    CHECK_DRIVER(cuModuleGetFunction(&produce, module, "produce"));
    CUstream stream = nullptr, producer = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECK_DRIVER(cuStreamCreate(&producer, CU_STREAM_NON_BLOCKING));
    // begin and the record node's events keep timing (CU_EVENT_DEFAULT), for everRecorded.
    CHECK_DRIVER(cuEventCreate(&p.begin, CU_EVENT_DEFAULT));
    for (CUevent& event : p.produced) CHECK_DRIVER(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
    for (CUevent& event : p.recorded) CHECK_DRIVER(cuEventCreate(&event, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuMemAlloc(&p.x, kBytes));
    CHECK_DRIVER(cuMemAlloc(&p.y, kBytes));
    CHECK_DRIVER(cuMemAlloc(&p.word, sizeof(unsigned int)));
    void* hostBuffers[2] = {};
    for (void*& buffer : hostBuffers) CHECK_DRIVER(cuMemAllocHost(&buffer, kBytes));
    float* hostA = static_cast<float*>(hostBuffers[0]);
    float* hostB = static_cast<float*>(hostBuffers[1]);
    HostView viewA, viewB;
    viewA.buffer = hostA;
    viewB.buffer = hostB;
    viewA.count = viewB.count = kAll;
    viewA.expected = viewB.expected = 12.0f;
    p.hostA = hostA;
    p.viewA = &viewA;

    course::printStep(2, "build the graph, instantiate it, launch it once");
    Nodes nodes{};
    CUgraph graph = buildGraph(p, nodes);
    CUgraphExec exec = nullptr;
    CHECK_DRIVER(course::graphInstantiate(&exec, graph, 0));
    // One launch behind the slow producer, which records `produced` when y holds 7; then the
    // stream is synchronised (the record node's event may have changed).
    auto launchBehind = [&](CUevent produced) {
        const lesson23::ProducerLaunch launch{produce,   producer, stream,   p.y,           kCount,
                                              kProduced, kSpinNs,  produced, p.recorded[0], exec};
        lesson23::launchBehindProducer(launch);
        CHECK_DRIVER(cuStreamSynchronize(stream));
    };
    std::fill(hostA, hostA + kCount, -1.0f);
    std::fill(hostB, hostB + kCount, -1.0f);
    launchBehind(p.produced[0]);
    const unsigned int firstWord = lesson23::copyBack<unsigned int>(p.word, 1)[0];
    std::printf("first launch: first buffer %zu of %d = 12 ((1 * 2 + 3) + 1 * 7), word %u\n", holding(hostA, 12.0f),
                kCount, firstWord);

    // Step 3: the graph's setters change the CUgraph. The exec, made before, does not see them.
    course::printStep(3, "edit the graph (copy, host node, both events), launch the old exec");
    const CUDA_MEMCPY3D toB = lesson23::deviceToHost(hostB, p.x, kBytes);
    CHECK_DRIVER(cuGraphMemcpyNodeSetParams(nodes.copy, &toB));
    const CUDA_HOST_NODE_PARAMS lookAtB{lesson23::inspect, &viewB};
    CHECK_DRIVER(cuGraphHostNodeSetParams(nodes.look, &lookAtB));
    CHECK_DRIVER(cuGraphEventRecordNodeSetEvent(nodes.record, p.recorded[1]));
    CHECK_DRIVER(cuGraphEventWaitNodeSetEvent(nodes.wait, p.produced[1]));
    std::fill(hostA, hostA + kCount, -1.0f);
    launchBehind(p.produced[0]);  // the exec still waits for the first event
    const CUresult secondRecordedEarly = everRecorded(p.begin, p.recorded[1]);
    std::printf("old exec after the edits: first buffer %zu of %d = 12, second buffer %zu still -1\n",
                holding(hostA, 12.0f), kCount, holding(hostB, -1.0f));
    std::printf("host node calls: first view %d, second view %d; second record event: %s\n", viewA.calls.load(),
                viewB.calls.load(), course::driverErrorName(secondRecordedEarly));
    course::Verdict verdict;
    verdict.check("the exec kept its parameters after the graph was edited",
                  holding(hostA, 12.0f) == kAll && holding(hostB, -1.0f) == kAll && viewA.calls == 2 &&
                      viewB.calls == 0 && secondRecordedEarly == CUDA_ERROR_INVALID_HANDLE);

    // Step 4: cuGraphExecUpdate copies the parameters of a graph of the same topology into the exec.
    course::printStep(4, "cuGraphExecUpdate, then launch behind a producer that records the new event");
    CUgraphExecUpdateResult result = CU_GRAPH_EXEC_UPDATE_ERROR;
    CUgraphNode errorNode = nullptr;
    CHECK_DRIVER(course::graphExecUpdate(exec, graph, &result, &errorNode));
    std::printf("cuGraphExecUpdate: %s\n",
                result == CU_GRAPH_EXEC_UPDATE_SUCCESS ? "CU_GRAPH_EXEC_UPDATE_SUCCESS" : "another result");
    launchBehind(p.produced[1]);
    const CUresult secondRecorded = everRecorded(p.begin, p.recorded[1]);
    std::printf("updated exec: second buffer %zu of %d = 12, %zu still -1\n", holding(hostB, 12.0f), kCount,
                holding(hostB, -1.0f));
    std::printf("host node calls: first view %d, second view %d; second record event: %s\n", viewA.calls.load(),
                viewB.calls.load(), course::driverErrorName(secondRecorded));
    verdict.check("the update carried the copy's new destination", holding(hostB, -1.0f) == 0);
    verdict.check("the update carried the wait node's new event", holding(hostB, 12.0f) == kAll);
    verdict.check("the update carried the host node's new data", viewB.calls == 1 && viewB.correct == kAll);
    verdict.check("the update carried the record node's new event", secondRecorded == CUDA_SUCCESS);

    // Step 5: the exec setters change one node of the exec; the batch node gets a graph edit (2)
    // and an exec edit (3). A child graph for the exec must have the topology of the node's own.
    course::printStep(5, "exec setters: child graph, both events, batch node; graph setter: batch node");
    CUstreamBatchMemOpParams op;
    const CUDA_BATCH_MEM_OP_NODE_PARAMS two = writeWord(op, context, p.word, 2);
    CHECK_DRIVER(cuGraphBatchMemOpNodeSetParams(nodes.batch, &two));
    const CUDA_BATCH_MEM_OP_NODE_PARAMS three = writeWord(op, context, p.word, 3);
    CHECK_DRIVER(cuGraphExecBatchMemOpNodeSetParams(exec, nodes.batch, &three));
    CUgraph tenfold = axpbGraph(p.axpb, p.x, 10.0f, 3.0f);
    CHECK_DRIVER(cuGraphExecChildGraphNodeSetParams(exec, nodes.inner, tenfold));
    // cuda.h does not say the exec keeps its own copy: tenfold lives until the launches are done.
    CHECK_DRIVER(cuGraphExecEventWaitNodeSetEvent(exec, nodes.wait, p.produced[2]));
    CHECK_DRIVER(cuGraphExecEventRecordNodeSetEvent(exec, nodes.record, p.recorded[2]));
    viewB.expected = 20.0f;
    launchBehind(p.produced[2]);
    const unsigned int word = lesson23::copyBack<unsigned int>(p.word, 1)[0];
    const unsigned int graphWord = graphBatchValue(nodes.batch);
    const CUresult thirdRecorded = everRecorded(p.begin, p.recorded[2]);
    std::printf("exec after its setters: second buffer %zu of %d = 20 ((1 * 10 + 3) + 7)\n", holding(hostB, 20.0f),
                kCount);
    std::printf("word the exec wrote: %u; the graph's batch node writes: %u\n", word, graphWord);
    std::printf("third record event: %s\n", course::driverErrorName(thirdRecorded));
    verdict.check("the exec ran the new child graph, after the third producer event", holding(hostB, 20.0f) == kAll);
    verdict.check("cuGraphExecBatchMemOpNodeSetParams changed the word the exec writes", word == 3);
    verdict.check("cuGraphBatchMemOpNodeSetParams changed the graph's batch node", graphWord == 2);
    verdict.check("the exec's record node recorded the third event", thirdRecorded == CUDA_SUCCESS);

    course::printStep(6, "release everything, newest first");
    CHECK_DRIVER(cuGraphExecDestroy(exec));
    CHECK_DRIVER(cuGraphDestroy(tenfold));
    CHECK_DRIVER(cuGraphDestroy(graph));
    for (void* buffer : hostBuffers) CHECK_DRIVER(cuMemFreeHost(buffer));
    CHECK_DRIVER(cuMemFree(p.word));
    CHECK_DRIVER(cuMemFree(p.y));
    CHECK_DRIVER(cuMemFree(p.x));
    for (CUevent event : p.recorded) CHECK_DRIVER(cuEventDestroy(event));
    for (CUevent event : p.produced) CHECK_DRIVER(cuEventDestroy(event));
    CHECK_DRIVER(cuEventDestroy(p.begin));
    CHECK_DRIVER(cuStreamDestroy(producer));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: graph exec, graph, buffers, events, streams, module, primary context\n");

    course::printStep(7, "check");
    return verdict.finish();
#else
    return course::kExitNotApplicable;  // not reached: usableHere said why and returned false
#endif
}
