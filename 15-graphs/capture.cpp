// Lesson 15, program 1 — stream capture: record a stream's work into a graph, launch it as one.
//
// A CUDA graph is work described once and launched many times. The driver checks and
// lays out every node when the graph is instantiated, so a launch is one call however
// many nodes the graph holds. The quickest way to get a graph is to record what a
// stream would have run: between cuStreamBeginCapture and cuStreamEndCapture the
// stream runs nothing, it records. This program first shows what the capture mode
// controls, then records memset -> 3 kernels -> copy to the host, instantiates the
// graph, launches it twice and checks every element on the host.
//
//   capture               the walkthrough
//   capture --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <map>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"

namespace {

const char* captureStatusName(CUstreamCaptureStatus status) {
    switch (status) {
        case CU_STREAM_CAPTURE_STATUS_NONE: return "CU_STREAM_CAPTURE_STATUS_NONE";
        case CU_STREAM_CAPTURE_STATUS_ACTIVE: return "CU_STREAM_CAPTURE_STATUS_ACTIVE";
        case CU_STREAM_CAPTURE_STATUS_INVALIDATED: return "CU_STREAM_CAPTURE_STATUS_INVALIDATED";
        default: return "(unknown CUstreamCaptureStatus)";
    }
}

CUstreamCaptureStatus captureStatus(CUstream stream) {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CHECK_DRIVER(cuStreamIsCapturing(stream, &status));
    return status;
}

// Queues x = a * x + b for n floats on the stream: 256 threads a block, enough blocks.
void queueAxpb(CUfunction axpb, CUdeviceptr x, float a, float b, int n, CUstream stream) {
    void* params[] = {&x, &a, &b, &n};
    CHECK_DRIVER(cuLaunchKernel(axpb, (n + 255) / 256, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
}

// Opens a capture in `mode`, tries cuMemAlloc inside it, closes the capture. cuMemAlloc
// is not stream work: a graph cannot record it, so a replay would not allocate again.
// That is what the driver calls "potentially unsafe" while a capture is open.
// Returns whether cuMemAlloc was allowed; graphReturned: whether cuStreamEndCapture gave a graph.
bool tryAllocationDuringCapture(CUstream stream, CUstreamCaptureMode mode, const char* modeName, bool& graphReturned) {
    CHECK_DRIVER(cuStreamBeginCapture(stream, mode));
    CUdeviceptr scratch = 0;
    const CUresult allocated = REPORT_DRIVER(cuMemAlloc(&scratch, 4096));
    std::printf("%s: cuMemAlloc inside the capture: %s\n", modeName, course::driverErrorName(allocated));
    std::printf("%s: capture status after it: %s\n", modeName, captureStatusName(captureStatus(stream)));
    CUgraph graph = nullptr;
    const CUresult ended = REPORT_DRIVER(cuStreamEndCapture(stream, &graph));
    std::printf("%s: cuStreamEndCapture: %s, graph %s\n", modeName, course::driverErrorName(ended),
                graph != nullptr ? "returned" : "not returned");
    graphReturned = graph != nullptr;
    if (graph != nullptr) CHECK_DRIVER(cuGraphDestroy(graph));
    if (allocated == CUDA_SUCCESS) CHECK_DRIVER(cuMemFree(scratch));
    return allocated == CUDA_SUCCESS;
}

// Number of elements of `values` equal to `expected`.
size_t countEqual(const float* values, size_t count, float expected) {
    return static_cast<size_t>(std::count(values, values + count, expected));
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    constexpr int kCount = 1 << 20;
    constexpr size_t kBytes = kCount * sizeof(float);

    // Step 1: the usual set-up. Capture needs a stream of our own: the legacy default
    // stream (NULL) cannot be captured. NON_BLOCKING keeps the synchronous calls other
    // code makes on the legacy stream from joining, and so breaking, the capture.
    course::printStep(1, "initialise, load the kernels, create a stream");
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
    CUfunction axpb = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&axpb, module, "axpb"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr x = 0;
    CHECK_DRIVER(cuMemAlloc(&x, kBytes));
    void* hostBuffer = nullptr;  // pinned: a captured copy to pageable memory is refused
    CHECK_DRIVER(cuMemAllocHost(&hostBuffer, kBytes));
    float* host = static_cast<float*>(hostBuffer);
    std::printf("stream capture status before capture: %s\n", captureStatusName(captureStatus(stream)));

    // Step 2: the capture mode says which calls the driver refuses while a capture is
    // open. GLOBAL (the usual choice) refuses unsafe calls in every thread while any
    // GLOBAL capture is open; THREAD_LOCAL only in the capturing thread; RELAXED never,
    // and leaves it to you. A refused call also invalidates the capture.
    course::printStep(2, "the capture mode: what the driver refuses while recording");
    course::Verdict verdict;
    bool globalGraph = false, relaxedGraph = false;
    const bool globalAllowed = tryAllocationDuringCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL, "GLOBAL", globalGraph);
    verdict.check("global capture refuses cuMemAlloc", !globalAllowed);
    const bool relaxedAllowed =
        tryAllocationDuringCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED, "RELAXED", relaxedGraph);
    verdict.check("relaxed capture allows cuMemAlloc", relaxedAllowed);
    // cuda.h: where the capture was invalidated, cuStreamEndCapture returns a NULL graph.
    verdict.check("cuStreamEndCapture returns a graph for the valid capture only", !globalGraph && relaxedGraph);

    // Step 3: record the chain. Each call returns at once and runs nothing: it adds a
    // node whose dependencies are the nodes recorded before it on this stream.
    course::printStep(3, "record memset -> 3 kernels -> copy to the host");
    std::fill(host, host + kCount, -1.0f);
    CHECK_DRIVER(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_DRIVER(cuMemsetD32Async(x, std::bit_cast<std::uint32_t>(1.0f), kCount, stream));
    queueAxpb(axpb, x, 2.0f, 3.0f, kCount, stream);   // 1 -> 5
    queueAxpb(axpb, x, 10.0f, 0.0f, kCount, stream);  // 5 -> 50
    queueAxpb(axpb, x, 1.0f, -8.0f, kCount, stream);  // 50 -> 42
    CHECK_DRIVER(cuMemcpyDtoHAsync(host, x, kBytes, stream));
    std::printf("stream capture status while recording: %s\n", captureStatusName(captureStatus(stream)));
    CUgraph graph = nullptr;
    CHECK_DRIVER(cuStreamEndCapture(stream, &graph));
    std::printf("stream capture status after cuStreamEndCapture: %s\n", captureStatusName(captureStatus(stream)));
    size_t nodeCount = 0;
    CHECK_DRIVER(cuGraphGetNodes(graph, nullptr, &nodeCount));
    std::vector<CUgraphNode> nodes(nodeCount);
    CHECK_DRIVER(cuGraphGetNodes(graph, nodes.data(), &nodeCount));
    std::map<CUgraphNodeType, int> byType;
    for (CUgraphNode node : nodes) {
        CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
        CHECK_DRIVER(cuGraphNodeGetType(node, &type));
        ++byType[type];
    }
    std::printf("captured nodes: %zu (%d memset, %d kernel, %d memcpy)\n", nodeCount, byType[CU_GRAPH_NODE_TYPE_MEMSET],
                byType[CU_GRAPH_NODE_TYPE_KERNEL], byType[CU_GRAPH_NODE_TYPE_MEMCPY]);
    const size_t untouched = countEqual(host, kCount, -1.0f);
    std::printf("host buffer after the capture, before any launch: %zu of %d elements still -1\n", untouched, kCount);
    verdict.check("capture recorded one node per call", nodeCount == 5);
    verdict.check("the captured nodes have the types of the calls", byType[CU_GRAPH_NODE_TYPE_MEMSET] == 1 &&
                                                                        byType[CU_GRAPH_NODE_TYPE_KERNEL] == 3 &&
                                                                        byType[CU_GRAPH_NODE_TYPE_MEMCPY] == 1);
    verdict.check("nothing ran while recording", untouched == static_cast<size_t>(kCount));

    // Step 4: instantiate. The driver validates the graph and prepares every launch now,
    // once, so that cuGraphLaunch has almost nothing left to do. The call's signature
    // changed in CUDA 12.0; course::graphInstantiate is the (exec, graph, flags) form.
    course::printStep(4, "instantiate the graph (course::graphInstantiate)");
    CUgraphExec exec = nullptr;
    CHECK_DRIVER(course::graphInstantiate(&exec, graph, 0));
    std::printf("graph instantiated: CUgraphExec ready\n");

    // Step 5: launch. The whole chain is one call on the stream; it runs in stream
    // order like any other work. The executable graph is independent of `graph` and of
    // the capture: launch it again and the same five nodes run again.
    course::printStep(5, "launch the graph twice and check every element");
    size_t correct[2] = {};
    for (size_t& launchCorrect : correct) {
        std::fill(host, host + kCount, -1.0f);
        CHECK_DRIVER(cuGraphLaunch(exec, stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
        launchCorrect = countEqual(host, kCount, 42.0f);
    }
    std::printf("first launch: %zu of %d elements = 42 ((1 * 2 + 3) * 10 - 8)\n", correct[0], kCount);
    std::printf("second launch: %zu of %d elements = 42\n", correct[1], kCount);
    verdict.check("first launch computes every element", correct[0] == static_cast<size_t>(kCount));
    verdict.check("second launch computes every element", correct[1] == static_cast<size_t>(kCount));

    // Step 6: release, newest first. The CUgraph could have gone right after step 4.
    course::printStep(6, "release everything, newest first");
    CHECK_DRIVER(cuGraphExecDestroy(exec));
    CHECK_DRIVER(cuGraphDestroy(graph));
    CHECK_DRIVER(cuMemFreeHost(hostBuffer));
    CHECK_DRIVER(cuMemFree(x));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: graph exec, graph, buffers, stream, module, primary context\n");

    course::printStep(7, "check");
    return verdict.finish();
}
