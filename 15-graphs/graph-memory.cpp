// Lesson 15, program 3 — memory the graph owns: allocation and free nodes (CUDA 11.4+).
//
// A graph that needs scratch memory can allocate it itself: a memory allocation node
// gives an address when it is added to the graph, so later nodes can take it as a
// parameter, and a free node gives it back when the graph runs. The driver backs it
// from a per-device pool that it keeps between launches, so a replay does not pay for
// cuMemAlloc and cuMemFree. This program builds alloc -> memset -> kernel -> copy to
// the host -> free, launches it twice, and measures the pool with
// cuDeviceGetGraphMemAttribute: after each launch, after the graph is destroyed, and after
// cuDeviceGraphMemTrim hands the memory back.
//
//   graph-memory               the walkthrough
//   graph-memory --device N    another GPU
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

unsigned long long reservedGraphMemory(CUdevice device) {
    cuuint64_t value = 0;
    CHECK_DRIVER(cuDeviceGetGraphMemAttribute(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &value));
    return value;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    // Step 1: graph memory nodes come from the stream-ordered allocator's machinery;
    // a device without memory pools cannot have them.
    course::printStep(1, "initialise, check memory pool support, load the kernel");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", ordinal, name);
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    int poolsSupported = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&poolsSupported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device));
    std::printf("memory pools supported: %s\n", poolsSupported ? "yes" : "no");
    if (driverVersion < 11040 || !poolsSupported) {
        std::printf("section graph-memory: SKIP (needs a CUDA 11.4 driver and memory pool support)\n");
        std::printf("Result = SKIP (graph memory nodes are not available here)\n");
        return course::kExitNotApplicable;
    }
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("graph_kernels.fatbin").c_str()));
    CUfunction axpb = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&axpb, module, "axpb"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    void* hostBuffer = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&hostBuffer, kBytes));
    float* host = static_cast<float*>(hostBuffer);

    // Step 2: the allocation node. Its address is fixed now, at construction: the
    // driver reserves the virtual range, and maps memory behind it when the graph runs.
    course::printStep(2, "an allocation node: the address exists before the graph runs");
    CUgraph graph = nullptr;
    CHECK_DRIVER(cuGraphCreate(&graph, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS alloc{};
    alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    alloc.poolProps.location.id = device;
    alloc.bytesize = kBytes;
    CUgraphNode allocNode = nullptr;
    CHECK_DRIVER(cuGraphAddMemAllocNode(&allocNode, graph, nullptr, 0, &alloc));
    const CUdeviceptr scratch = alloc.dptr;
    std::printf("graph allocation: 0x%llx (%zu bytes)\n", static_cast<unsigned long long>(scratch), kBytes);

    // Step 3: the nodes that use it, and the free node after the last of them. Without
    // the free node the memory would outlive the launch and belong to the caller.
    course::printStep(3, "memset -> kernel -> copy -> free, all on the graph's memory");
    CUDA_MEMSET_NODE_PARAMS fill{};
    fill.dst = scratch;
    fill.value = std::bit_cast<std::uint32_t>(6.0f);
    fill.elementSize = 4;
    fill.width = kCount;
    fill.height = 1;
    fill.pitch = kBytes;
    CUgraphNode memsetNode = nullptr;
    CHECK_DRIVER(cuGraphAddMemsetNode(&memsetNode, graph, &allocNode, 1, &fill, context));
    CUdeviceptr x = scratch;
    float a = 7.0f;
    float b = 0.0f;
    int n = kCount;
    void* kernelArguments[] = {&x, &a, &b, &n};
    CUDA_KERNEL_NODE_PARAMS kernel{};
    kernel.func = axpb;
    kernel.gridDimX = (kCount + 255) / 256;
    kernel.gridDimY = 1;
    kernel.gridDimZ = 1;
    kernel.blockDimX = 256;
    kernel.blockDimY = 1;
    kernel.blockDimZ = 1;
    kernel.kernelParams = kernelArguments;
    CUgraphNode kernelNode = nullptr;
    CHECK_DRIVER(cuGraphAddKernelNode(&kernelNode, graph, &memsetNode, 1, &kernel));
    CUDA_MEMCPY3D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = scratch;
    copy.dstMemoryType = CU_MEMORYTYPE_HOST;
    copy.dstHost = host;
    copy.WidthInBytes = kBytes;
    copy.Height = 1;
    copy.Depth = 1;
    CUgraphNode copyNode = nullptr;
    CHECK_DRIVER(cuGraphAddMemcpyNode(&copyNode, graph, &kernelNode, 1, &copy, context));
    CUgraphNode freeNode = nullptr;
    CHECK_DRIVER(cuGraphAddMemFreeNode(&freeNode, graph, &copyNode, 1, scratch));
    size_t nodeCount = 0;
    CHECK_DRIVER(cuGraphGetNodes(graph, nullptr, &nodeCount));
    std::printf("graph nodes: %zu (alloc, memset, kernel, memcpy, free)\n", nodeCount);

    // Step 4: launch twice, and read the pool's size (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
    // "memory currently allocated for use by the CUDA graphs asynchronous allocator") after
    // instantiation and after each launch. The free node ends the allocation at the end of
    // each launch, but the pool keeps the memory behind it for the next one: the second
    // launch should find it there and reserve nothing more. The address stays the same
    // (cuda.h: "fixed across instantiations and launches").
    course::printStep(4, "instantiate, launch twice, watch the graph memory pool");
    course::Verdict verdict;
    verdict.check("graph has the five nodes added", nodeCount == 5);
    // cuda.h does not say when the pool grows; NVIDIA's CUDA Programming Guide (section
    // 4.2.5.4.1) does: the memory is mapped when the graph is launched, not when it is
    // instantiated. So instantiation must leave the pool as it was.
    const unsigned long long reservedBefore = reservedGraphMemory(device);
    CUgraphExec exec = nullptr;
    CHECK_DRIVER(course::graphInstantiate(&exec, graph, 0));
    const unsigned long long reservedInstantiated = reservedGraphMemory(device);
    std::printf("graph memory reserved before and after instantiation: %llu, %llu bytes\n", reservedBefore,
                reservedInstantiated);
    verdict.check("instantiation reserved no graph memory", reservedInstantiated == reservedBefore);
    const char* const launchNames[] = {"first", "second"};
    size_t correct[2] = {};
    unsigned long long reservedAfter[2] = {};
    for (int launch = 0; launch < 2; ++launch) {
        std::fill(host, host + kCount, -1.0f);
        CHECK_DRIVER(cuGraphLaunch(exec, stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
        correct[launch] = static_cast<size_t>(std::count(host, host + kCount, 42.0f));
        reservedAfter[launch] = reservedGraphMemory(device);
        std::printf("%s launch: %zu of %d elements = 42 (6 * 7)\n", launchNames[launch], correct[launch], kCount);
        std::printf("graph memory reserved after the %s launch: %llu bytes\n", launchNames[launch],
                    reservedAfter[launch]);
    }
    const auto all = static_cast<size_t>(kCount);
    verdict.check("first launch computes every element", correct[0] == all);
    verdict.check("second launch computes every element", correct[1] == all);
    verdict.check("pool holds the allocation after the first launch", reservedAfter[0] >= kBytes);
    verdict.check("second launch reserved nothing more", reservedAfter[1] == reservedAfter[0]);

    // Step 5: destroying the exec and the graph ends the allocation node, yet the pool
    // keeps its memory for the next graph (measured below). cuDeviceGraphMemTrim frees the
    // blocks that no executing or scheduled graph uses back to the OS (cuda.h).
    course::printStep(5, "release, then trim the pool");
    CHECK_DRIVER(cuGraphExecDestroy(exec));
    CHECK_DRIVER(cuGraphDestroy(graph));
    const unsigned long long reservedAfterDestroy = reservedGraphMemory(device);
    std::printf("graph memory reserved after cuGraphExecDestroy and cuGraphDestroy: %llu bytes\n",
                reservedAfterDestroy);
    verdict.check("destroying the graph kept the pool", reservedAfterDestroy == reservedAfter[1]);
    CHECK_DRIVER(cuDeviceGraphMemTrim(device));
    const unsigned long long reservedAfterTrim = reservedGraphMemory(device);
    std::printf("graph memory reserved after cuDeviceGraphMemTrim: %llu bytes\n", reservedAfterTrim);
    verdict.check("trim gave the pool back", reservedAfterTrim < reservedAfterDestroy);
    CHECK_DRIVER(cuMemFreeHost(hostBuffer));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: graph exec, graph, host buffer, stream, module, primary context\n");

    course::printStep(6, "check");
    return verdict.finish();
}
