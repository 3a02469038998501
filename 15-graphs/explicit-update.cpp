// Lesson 15, program 2 — a graph built node by node, then changed without re-instantiating.
//
// Capture records whatever a stream did; building a graph by hand says exactly which
// node depends on which. This program builds memset -> kernel -> copy to the host with
// cuGraphAdd*Node, launches it, and then changes what it computes in the two ways the
// driver offers without a new cuGraphInstantiate: set one node's parameters in the
// executable graph (cuGraphExecKernelNodeSetParams), or edit the CUgraph and let
// cuGraphExecUpdate carry the changes over. Last, it shows an update the driver
// refuses because the graph's shape changed, what the answer says, and that the refused
// update left the executable graph as it was.
//
//   explicit-update               the walkthrough
//   explicit-update --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"

namespace {

constexpr int kCount = 1 << 20;
constexpr size_t kBytes = kCount * sizeof(float);

const char* updateResultName(CUgraphExecUpdateResult result) {
    switch (result) {
        case CU_GRAPH_EXEC_UPDATE_SUCCESS: return "CU_GRAPH_EXEC_UPDATE_SUCCESS";
        case CU_GRAPH_EXEC_UPDATE_ERROR: return "CU_GRAPH_EXEC_UPDATE_ERROR";
        case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED: return "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED";
        case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED: return "CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED";
        case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED: return "CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED";
        case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED: return "CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED";
        case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED: return "CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED";
        default: return "(another CUgraphExecUpdateResult)";
    }
}

// The parameters of the axpb kernel node: x = a * x + b over kCount floats. The driver
// copies the values kernelParams points to when the node is added or set, so the
// locals of this function may go away afterwards.
struct AxpbArguments {
    CUdeviceptr x;
    float a;
    float b;
    int n;
};

CUDA_KERNEL_NODE_PARAMS axpbNode(CUfunction axpb, AxpbArguments& arguments, void* (&pointers)[4]) {
    pointers[0] = &arguments.x;
    pointers[1] = &arguments.a;
    pointers[2] = &arguments.b;
    pointers[3] = &arguments.n;
    CUDA_KERNEL_NODE_PARAMS params{};  // newer fields (CUDA 12: kern, ctx) stay zero: use func
    params.func = axpb;
    params.gridDimX = (kCount + 255) / 256;
    params.gridDimY = 1;
    params.gridDimZ = 1;
    params.blockDimX = 256;
    params.blockDimY = 1;
    params.blockDimZ = 1;
    params.kernelParams = pointers;
    return params;
}

CUDA_MEMSET_NODE_PARAMS fillNode(CUdeviceptr x, float value) {
    CUDA_MEMSET_NODE_PARAMS params{};
    params.dst = x;
    params.value = std::bit_cast<std::uint32_t>(value);
    params.elementSize = 4;  // 1, 2 or 4 bytes, like cuMemsetD8/D16/D32
    params.width = kCount;   // in elements
    params.height = 1;
    params.pitch = kBytes;
    return params;
}

// Launches the executable graph and counts the host elements equal to `expected`.
size_t launchAndCount(CUgraphExec exec, CUstream stream, float* host, float expected) {
    std::fill(host, host + kCount, -1.0f);
    CHECK_DRIVER(cuGraphLaunch(exec, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    return static_cast<size_t>(std::count(host, host + kCount, expected));
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "initialise, load the kernel, allocate the buffers");
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
    void* hostBuffer = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&hostBuffer, kBytes));
    float* host = static_cast<float*>(hostBuffer);

    // Step 2: nodes and edges. Each node lists the nodes it waits for. A kernel node
    // carries its context in its function; memset and memcpy nodes name the context
    // whose memory they touch, because a graph is not tied to any one context.
    course::printStep(2, "build memset -> kernel -> copy by hand");
    CUgraph graph = nullptr;
    CHECK_DRIVER(cuGraphCreate(&graph, 0));
    const CUDA_MEMSET_NODE_PARAMS fill = fillNode(x, 1.0f);
    CUgraphNode memsetNode = nullptr;
    CHECK_DRIVER(cuGraphAddMemsetNode(&memsetNode, graph, nullptr, 0, &fill, context));
    AxpbArguments arguments{x, 2.0f, 3.0f, kCount};
    void* pointers[4] = {};
    CUDA_KERNEL_NODE_PARAMS kernel = axpbNode(axpb, arguments, pointers);
    CUgraphNode kernelNode = nullptr;
    CHECK_DRIVER(cuGraphAddKernelNode(&kernelNode, graph, &memsetNode, 1, &kernel));
    CUDA_MEMCPY3D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = x;
    copy.dstMemoryType = CU_MEMORYTYPE_HOST;
    copy.dstHost = host;
    copy.WidthInBytes = kBytes;
    copy.Height = 1;
    copy.Depth = 1;
    CUgraphNode copyNode = nullptr;
    CHECK_DRIVER(cuGraphAddMemcpyNode(&copyNode, graph, &kernelNode, 1, &copy, context));
    size_t nodeCount = 0;
    CHECK_DRIVER(cuGraphGetNodes(graph, nullptr, &nodeCount));
    std::printf("graph nodes: %zu (memset, kernel after it, memcpy after that)\n", nodeCount);
    course::Verdict verdict;
    verdict.check("graph has the three nodes added", nodeCount == 3);
    const auto all = static_cast<size_t>(kCount);

    course::printStep(3, "instantiate and launch");
    CUgraphExec exec = nullptr;
    CHECK_DRIVER(course::graphInstantiate(&exec, graph, 0));
    const size_t first = launchAndCount(exec, stream, host, 5.0f);
    std::printf("launch with a = 2, b = 3: %zu of %d elements = 5\n", first, kCount);
    verdict.check("first launch computes every element", first == all);

    // Step 4: change one kernel node of the executable graph in place. Only the exec
    // changes: the CUgraph still says a = 2, b = 3.
    course::printStep(4, "cuGraphExecKernelNodeSetParams: new arguments, same exec");
    arguments.a = 4.0f;
    arguments.b = 0.5f;
    kernel = axpbNode(axpb, arguments, pointers);
    CHECK_DRIVER(cuGraphExecKernelNodeSetParams(exec, kernelNode, &kernel));
    const size_t second = launchAndCount(exec, stream, host, 4.5f);
    std::printf("launch with a = 4, b = 0.5: %zu of %d elements = 4.5\n", second, kCount);
    verdict.check("exec node parameters changed the next launch", second == all);

    // Step 5: edit the CUgraph (two nodes here), then carry the changes over at once.
    // cuGraphExecUpdate pairs the nodes of the two graphs and copies their parameters into
    // the exec. It copies only what its rules allow (cuda.h lists them: same topology and
    // node types, a kernel's function in the same context, memset and memcpy operands on
    // the same devices and from the same contexts, no change of memcpy memory type, of a 2D
    // memset's size, of cooperative launch, and more); here only values change, so it succeeds.
    course::printStep(5, "edit the graph, then cuGraphExecUpdate (course::graphExecUpdate)");
    const CUDA_MEMSET_NODE_PARAMS fillTwo = fillNode(x, 2.0f);
    CHECK_DRIVER(cuGraphMemsetNodeSetParams(memsetNode, &fillTwo));
    arguments.a = 3.0f;
    arguments.b = -2.0f;
    kernel = axpbNode(axpb, arguments, pointers);
    CHECK_DRIVER(cuGraphKernelNodeSetParams(kernelNode, &kernel));
    CUgraphExecUpdateResult sameShapeResult = CU_GRAPH_EXEC_UPDATE_ERROR;
    CUgraphNode errorNode = nullptr;
    const CUresult updated = REPORT_DRIVER(course::graphExecUpdate(exec, graph, &sameShapeResult, &errorNode));
    std::printf("cuGraphExecUpdate, same shape: %s, %s\n", course::driverErrorName(updated),
                updateResultName(sameShapeResult));
    verdict.check("cuGraphExecUpdate accepts the same shape",
                  updated == CUDA_SUCCESS && sameShapeResult == CU_GRAPH_EXEC_UPDATE_SUCCESS);
    const size_t third = launchAndCount(exec, stream, host, 4.0f);
    std::printf("launch with fill 2, a = 3, b = -2: %zu of %d elements = 4\n", third, kCount);
    verdict.check("updated exec computes the edited graph", third == all);

    // Step 6: a new node changes the topology, and the kernel gets new arguments too. An
    // exec's nodes and edges are fixed at instantiation, so the driver refuses, and says
    // why in the update result. cuda.h: CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE means "the
    // graph update was not performed": none of the changes reached the exec, which stays
    // valid and still computes what it did before (the launch below shows it).
    course::printStep(6, "add a node: cuGraphExecUpdate refuses a changed topology");
    CUgraphNode emptyNode = nullptr;
    CHECK_DRIVER(cuGraphAddEmptyNode(&emptyNode, graph, &copyNode, 1));
    arguments.a = 5.0f;
    arguments.b = 0.0f;
    kernel = axpbNode(axpb, arguments, pointers);
    CHECK_DRIVER(cuGraphKernelNodeSetParams(kernelNode, &kernel));
    CUgraphExecUpdateResult topologyResult = CU_GRAPH_EXEC_UPDATE_ERROR;
    const CUresult refused = REPORT_DRIVER(course::graphExecUpdate(exec, graph, &topologyResult, &errorNode));
    std::printf("cuGraphExecUpdate, one node more: %s, %s\n", course::driverErrorName(refused),
                updateResultName(topologyResult));
    std::printf("error node: %s\n", errorNode == nullptr     ? "none (the node counts differ)"
                                    : errorNode == emptyNode ? "the added empty node"
                                                             : "another node");
    verdict.check("cuGraphExecUpdate refuses a changed topology",
                  refused == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE &&
                      topologyResult == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    const size_t unchanged = launchAndCount(exec, stream, host, 4.0f);
    std::printf("launch of the same exec after the refused update: %zu of %d elements = 4 (as in step 5)\n", unchanged,
                kCount);
    verdict.check("refused update left the exec as it was", unchanged == all);
    // To run the new shape, instantiate the edited graph; the old exec is no longer needed.
    CHECK_DRIVER(cuGraphExecDestroy(exec));
    CHECK_DRIVER(course::graphInstantiate(&exec, graph, 0));
    const size_t fourth = launchAndCount(exec, stream, host, 10.0f);
    std::printf("launch after a new instantiation: %zu of %d elements = 10 (2 * 5 + 0)\n", fourth, kCount);
    verdict.check("new instantiation computes the edited graph", fourth == all);

    course::printStep(7, "release everything, newest first");
    CHECK_DRIVER(cuGraphExecDestroy(exec));
    CHECK_DRIVER(cuGraphDestroy(graph));  // destroys its nodes too
    CHECK_DRIVER(cuMemFreeHost(hostBuffer));
    CHECK_DRIVER(cuMemFree(x));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: graph exec, graph, buffers, stream, module, primary context\n");

    course::printStep(8, "check");
    return verdict.finish();
}
