// Lesson 23, program 6 — the typed calls: one cuGraphAdd...Node per kind, and what they hand back.
//
// general_nodes adds every node through cuGraphAddNode. Older code (and lesson 15) adds each kind
// with its own call: cuGraphAddEventWaitNode, cuGraphAddEventRecordNode, cuGraphAddChildGraphNode,
// cuGraphAddBatchMemOpNode, cuGraphAddHostNode. This program builds one graph that way, removes a
// node with cuGraphDestroyNode before instantiating it, launches it behind a slow producer, and
// checks what each node did. Then it reads nodes back: a batch memory-operation node's
// parameters, a kernel node's priority attribute (set, read, and copied to another kernel node),
// and the parameters of an allocation node and its free node.
//
//   typed_nodes               the walkthrough
//   typed_nodes --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "lesson23.h"
#include "node_kinds.h"

#if CUDA_VERSION >= 12040
namespace {

constexpr int kCount = 1 << 16;
constexpr size_t kAll = kCount;
constexpr size_t kBytes = kCount * sizeof(float);
const unsigned int kOne = std::bit_cast<std::uint32_t>(1.0f);
constexpr float kProduced = 7.0f;                     // what the producer writes into y
constexpr unsigned long long kSpinNs = 20'000'000;    // the producer's spin: 20 ms by %globaltimer
constexpr unsigned int kWords[2] = {0xA11CE, 0xB0B};  // what the batch node writes
constexpr size_t kAllocBytes = 32u << 20;             // the allocation node's size

struct Pieces {
    CUcontext context;
    CUfunction axpb, addScaled;
    CUdeviceptr x, y, words;
    CUevent produced, started, finished;
    float* host;
    lesson23::HostView* view;
};

struct Nodes {
    CUgraphNode wait, start, fill, inner, add, batch, copy, look, end;
};

// The batch node's two operations: a 32-bit write to each word (no wait operations: cuda.h warns
// that a wait the scheduler cannot see may deadlock the application).
void writeOps(CUstreamBatchMemOpParams (&ops)[2], CUdeviceptr words) {
    std::memset(ops, 0, sizeof(ops));
    for (int i = 0; i < 2; ++i) {
        ops[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
        ops[i].writeValue.address = words + i * sizeof(unsigned int);
        ops[i].writeValue.value = kWords[i];
        ops[i].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    }
}

// x += s * y as a kernel node after `after`; the argument values are copied when the node is added.
CUgraphNode addScaledNode(CUgraph graph, const Pieces& p, std::initializer_list<CUgraphNode> after, float s) {
    CUdeviceptr x = p.x, y = p.y;
    int count = kCount;
    void* params[] = {&x, &y, &s, &count};
    return lesson23::addNode(graph, after, lesson23::kernelNode(p.addScaled, lesson23::blocksFor(count), 256, params));
}

// wait(produced) -----------------------------------------------+
// record(started) -> fill x = 1 -> child graph { x = 2x + 3 } -> add x += 3 * y -> copy x -> host node
//                 -> batch: write two words -------------------------------------------------+-> record(finished)
// (step 3 replaces `add` by a node with s = 1). Every node but fill, add and copy (lesson23.h's
// cuGraphAddNode builders) comes from its typed call.
CUgraph buildGraph(const Pieces& p, Nodes& n) {
    CUgraph graph = nullptr;
    CHECK_DRIVER(cuGraphCreate(&graph, 0));
    CHECK_DRIVER(cuGraphAddEventWaitNode(&n.wait, graph, nullptr, 0, p.produced));
    CHECK_DRIVER(cuGraphAddEventRecordNode(&n.start, graph, nullptr, 0, p.started));
    n.fill = lesson23::addNode(graph, {n.start}, lesson23::memsetNode(p.x, kOne, kCount, p.context));
    // cuGraphAddChildGraphNode clones the child graph: it must be complete before the call.
    CUgraph child = nullptr;
    CHECK_DRIVER(cuGraphCreate(&child, 0));
    CUdeviceptr x = p.x;
    float a = 2.0f, b = 3.0f;
    int count = kCount;
    void* axpbParams[] = {&x, &a, &b, &count};
    lesson23::addNode(child, {}, lesson23::kernelNode(p.axpb, lesson23::blocksFor(count), 256, axpbParams));
    CHECK_DRIVER(cuGraphAddChildGraphNode(&n.inner, graph, &n.fill, 1, child));
    CHECK_DRIVER(cuGraphDestroy(child));  // the node holds its own clone
    n.add = addScaledNode(graph, p, {n.inner, n.wait}, 3.0f);
    CUstreamBatchMemOpParams ops[2];
    writeOps(ops, p.words);
    CUDA_BATCH_MEM_OP_NODE_PARAMS batch{};
    batch.ctx = p.context;
    batch.count = 2;
    batch.paramArray = ops;  // copied by the call (cuda.h), so a local array will do
    CHECK_DRIVER(cuGraphAddBatchMemOpNode(&n.batch, graph, &n.start, 1, &batch));
    n.copy = lesson23::addNode(graph, {n.add}, lesson23::copyToHostNode(p.host, p.x, kBytes, p.context));
    const CUDA_HOST_NODE_PARAMS look{lesson23::inspect, p.view};
    CHECK_DRIVER(cuGraphAddHostNode(&n.look, graph, &n.copy, 1, &look));
    const CUgraphNode last[] = {n.look, n.batch};
    CHECK_DRIVER(cuGraphAddEventRecordNode(&n.end, graph, last, 2, p.finished));
    return graph;
}

// Step 5: the batch node's parameters read back. The array it returns belongs to the node.
bool batchReadsBack(CUgraphNode node, CUdeviceptr words) {
    CUDA_BATCH_MEM_OP_NODE_PARAMS read{};
    CHECK_DRIVER(cuGraphBatchMemOpNodeGetParams(node, &read));
    bool same = read.count == 2 && read.paramArray != nullptr;
    for (unsigned int i = 0; same && i < read.count; ++i) {
        const auto& op = read.paramArray[i].writeValue;
        same = op.operation == CU_STREAM_MEM_OP_WRITE_VALUE_32 && op.address == words + i * sizeof(unsigned int) &&
               op.value == kWords[i];
    }
    std::printf("batch node: %u operation(s)%s\n", read.count, same ? ", the two writes it was given" : "");
    return same;
}

// Step 6: an allocation node and its free node in a graph of their own (cuda.h: nodes of a graph
// that holds allocation or free nodes cannot be destroyed, and such a graph cannot be cloned),
// read back. The graph is never instantiated or launched.
void allocAndFreeReadBack(CUdevice device, course::Verdict& verdict) {
    CUgraph graph = nullptr;
    CHECK_DRIVER(cuGraphCreate(&graph, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS alloc{};
    alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    alloc.poolProps.location.id = device;
    alloc.bytesize = kAllocBytes;
    CUgraphNode allocNode = nullptr, freeNode = nullptr;
    CHECK_DRIVER(cuGraphAddMemAllocNode(&allocNode, graph, nullptr, 0, &alloc));
    CHECK_DRIVER(cuGraphAddMemFreeNode(&freeNode, graph, &allocNode, 1, alloc.dptr));
    CUDA_MEM_ALLOC_NODE_PARAMS allocRead{};
    CHECK_DRIVER(cuGraphMemAllocNodeGetParams(allocNode, &allocRead));
    CUdeviceptr freeRead = 0;
    CHECK_DRIVER(cuGraphMemFreeNodeGetParams(freeNode, &freeRead));
    const bool sameAlloc = allocRead.bytesize == kAllocBytes && allocRead.dptr == alloc.dptr &&
                           allocRead.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
                           allocRead.poolProps.location.id == device;
    std::printf("allocation node: %zu MiB, on %s, at %s\n", allocRead.bytesize >> 20,
                allocRead.poolProps.location.id == device ? "this device" : "another device",
                allocRead.dptr == alloc.dptr ? "the address cuGraphAddMemAllocNode returned" : "another address");
    std::printf("free node frees: %s\n", freeRead == alloc.dptr ? "the allocation node's address" : "another address");
    CHECK_DRIVER(cuGraphDestroy(graph));  // never instantiated or launched
    verdict.check("the allocation node reads back the size, device and address it was given", sameAlloc);
    verdict.check("the free node reads back the allocation node's address", freeRead == alloc.dptr);
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
    CUfunction axpb = nullptr, addScaled = nullptr, produce = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&axpb, module, "axpb"));
    CHECK_DRIVER(cuModuleGetFunction(&addScaled, module, "add_scaled"));
    CHECK_DRIVER(cuModuleGetFunction(&produce, module, "produce"));
    CUstream stream = nullptr, producer = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECK_DRIVER(cuStreamCreate(&producer, CU_STREAM_NON_BLOCKING));
    // started and finished keep timing (CU_EVENT_DEFAULT): cuEventElapsedTime answers
    // CUDA_ERROR_INVALID_HANDLE for an event never recorded by cuEventRecord (cuda.h); that a
    // record node's recording counts the same is what step 4 relies on, as observed on the H200.
    CUevent produced = nullptr, started = nullptr, finished = nullptr;
    CHECK_DRIVER(cuEventCreate(&produced, CU_EVENT_DISABLE_TIMING));
    CHECK_DRIVER(cuEventCreate(&started, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuEventCreate(&finished, CU_EVENT_DEFAULT));
    CUdeviceptr x = 0, y = 0, words = 0;
    CHECK_DRIVER(cuMemAlloc(&x, kBytes));
    CHECK_DRIVER(cuMemAlloc(&y, kBytes));
    CHECK_DRIVER(cuMemAlloc(&words, 2 * sizeof(unsigned int)));
    CHECK_DRIVER(cuMemsetD32(words, 0, 2));
    void* hostBuffer = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&hostBuffer, kBytes));
    float* host = static_cast<float*>(hostBuffer);
    lesson23::HostView view;
    view.buffer = host;
    view.count = kAll;

    course::printStep(2, "build the graph with the typed calls, one per node kind");
    const Pieces pieces{context, axpb, addScaled, x, y, words, produced, started, finished, host, &view};
    Nodes nodes{};
    CUgraph graph = buildGraph(pieces, nodes);
    std::printf("graph nodes: %zu\n", lesson23::nodeCount(graph));

    // Step 3: add's scale is wrong (3, not 1). Its replacement gets add's attributes (here its
    // priority) with cuGraphKernelNodeCopyAttributes; cuGraphDestroyNode removes add and its edges,
    // and copy is made to depend on the replacement.
    course::printStep(3, "replace a kernel node: priority set and read, attributes copied, old node destroyed");
    int least = 0, greatest = 0;
    CHECK_DRIVER(cuCtxGetStreamPriorityRange(&least, &greatest));
    CUkernelNodeAttrValue priority{};
    priority.priority = greatest;
    CHECK_DRIVER(cuGraphKernelNodeSetAttribute(nodes.add, CU_KERNEL_NODE_ATTRIBUTE_PRIORITY, &priority));
    CUkernelNodeAttrValue oldRead{}, newBefore{}, newRead{};
    CHECK_DRIVER(cuGraphKernelNodeGetAttribute(nodes.add, CU_KERNEL_NODE_ATTRIBUTE_PRIORITY, &oldRead));
    const CUgraphNode replacement = addScaledNode(graph, pieces, {nodes.inner, nodes.wait}, 1.0f);
    CHECK_DRIVER(cuGraphKernelNodeGetAttribute(replacement, CU_KERNEL_NODE_ATTRIBUTE_PRIORITY, &newBefore));
    CHECK_DRIVER(cuGraphKernelNodeCopyAttributes(replacement, nodes.add));
    CHECK_DRIVER(cuGraphKernelNodeGetAttribute(replacement, CU_KERNEL_NODE_ATTRIBUTE_PRIORITY, &newRead));
    const size_t nodesBefore = lesson23::nodeCount(graph);
    CHECK_DRIVER(cuGraphDestroyNode(nodes.add));
    nodes.add = replacement;
    CHECK_DRIVER(course::graphAddDependencies(graph, &nodes.add, &nodes.copy, 1));
    const size_t nodesAfter = lesson23::nodeCount(graph);
    const std::vector<CUgraphNode> copyAfter = lesson23::neighbours(nodes.copy, true);
    std::printf("stream priority range: %d (least) to %d (greatest)\n", least, greatest);
    std::printf("old add node's priority: %d; replacement's: %d before the copy, %d after\n", oldRead.priority,
                newBefore.priority, newRead.priority);
    std::printf("nodes: %zu with both, %zu after cuGraphDestroyNode; copy depends on %zu node(s)%s\n", nodesBefore,
                nodesAfter, copyAfter.size(),
                copyAfter.size() == 1 && copyAfter[0] == replacement ? ", the replacement" : "");
    course::Verdict verdict;
    if (greatest == least) {
        std::printf("section kernel node priority: SKIP (the context has one priority level only)\n");
    } else {
        verdict.check("the priority set on the kernel node reads back", oldRead.priority == greatest);
        verdict.check("cuGraphKernelNodeCopyAttributes gave the replacement that priority",
                      newRead.priority == greatest);
    }
    verdict.check("cuGraphDestroyNode removed the old node and its edges",
                  nodesAfter == nodesBefore - 1 && copyAfter.size() == 1 && copyAfter[0] == replacement);

    course::printStep(4, "instantiate, launch behind a slow producer, wait for the finished event");
    CUgraphExec exec = nullptr;
    CHECK_DRIVER(course::graphInstantiate(&exec, graph, 0));
    const lesson23::ProducerLaunch launch{produce,   producer, stream,   y,        kCount,
                                          kProduced, kSpinNs,  produced, finished, exec};
    std::fill(host, host + kCount, -1.0f);
    view.expected = 12.0f;
    lesson23::launchBehindProducer(launch);
    CHECK_DRIVER(cuStreamSynchronize(stream));
    float milliseconds = 0.0f;  // not printed: only whether the driver could compute it
    const CUresult elapsed = cuEventElapsedTime(&milliseconds, started, finished);
    const std::vector<unsigned int> written = lesson23::copyBack<unsigned int>(words, 2);
    const size_t twelve = lesson23::countEqual(host, kCount, 12.0f);
    std::printf("x: %zu of %d elements = 12 ((1 * 2 + 3) + 1 * 7)\n", twelve, kCount);
    std::printf("host node: %d call(s), saw %zu correct elements\n", view.calls.load(), view.correct.load());
    std::printf("words the batch node wrote: 0x%x 0x%x\n", written[0], written[1]);
    std::printf("cuEventElapsedTime(started, finished): %s\n", course::driverErrorName(elapsed));
    verdict.check("the child graph ran, after the producer's event, and the old node did not", twelve == kAll);
    verdict.check("the host node ran once, after the copy", view.calls == 1 && view.correct == kAll);
    verdict.check("the batch node wrote both words", written[0] == kWords[0] && written[1] == kWords[1]);
    // cuda.h (cuEventElapsedTime): CUDA_ERROR_INVALID_HANDLE where an event was never recorded.
    verdict.check("both event record nodes recorded their events", elapsed == CUDA_SUCCESS);

    course::printStep(5, "read the batch node back");
    verdict.check("the batch node reads back its two writes", batchReadsBack(nodes.batch, words));

    course::printStep(6, "an allocation node and its free node, read back");
    allocAndFreeReadBack(device, verdict);

    course::printStep(7, "release everything, newest first");
    CHECK_DRIVER(cuGraphExecDestroy(exec));
    CHECK_DRIVER(cuGraphDestroy(graph));
    CHECK_DRIVER(cuMemFreeHost(hostBuffer));
    CHECK_DRIVER(cuMemFree(words));
    CHECK_DRIVER(cuMemFree(y));
    CHECK_DRIVER(cuMemFree(x));
    CHECK_DRIVER(cuEventDestroy(finished));
    CHECK_DRIVER(cuEventDestroy(started));
    CHECK_DRIVER(cuEventDestroy(produced));
    CHECK_DRIVER(cuStreamDestroy(producer));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: graph exec, graph, buffers, events, streams, module, primary context\n");

    course::printStep(8, "check");
    return verdict.finish();
#else
    return course::kExitNotApplicable;  // not reached: usableHere said why and returned false
#endif
}
