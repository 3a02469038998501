// lesson23.h — lesson 23's shared pieces: the version guard and its SKIP lines, a copy back from
// the GPU, and the CUgraphNodeParams of the node kinds the programs add with cuGraphAddNode.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"

namespace lesson23 {

// Conditional nodes, cuStreamBeginCaptureToGraph, cuGraphAddNode and the edge-data calls are all
// in CUDA 12.4's cuda.h, the oldest 12.x headers the course checks against (make check-headers).
// The lesson asks for those headers and a driver of that version; older releases may have some
// of these calls, which the course does not check.
constexpr int kVersionNeeded = 12040;

// Why the lesson cannot run with these header and driver versions (CUDA_VERSION and
// cuDriverGetVersion's answer), or "" where it can. Both count: a driver older than the headers
// lacks calls that the headers declare.
inline std::string versionGap(int headerVersion, int driverVersion) {
    if (headerVersion < kVersionNeeded)
        return "built with CUDA " + course::formatCudaVersion(headerVersion) + " headers; the lesson needs " +
               course::formatCudaVersion(kVersionNeeded);
    if (driverVersion < kVersionNeeded)
        return "the driver supports CUDA " + course::formatCudaVersion(driverVersion) + "; the lesson needs " +
               course::formatCudaVersion(kVersionNeeded);
    return "";
}

// Step 1 of every program: the device, the header and driver versions. Prints the "section ... :
// SKIP" and "Result = SKIP" lines and returns false where the lesson cannot run: then the
// program exits 77.
inline bool usableHere(CUdevice device, int ordinal) {
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("device %d name: %s\n", ordinal, name);
    std::printf("built with CUDA headers: %s\n", course::formatCudaVersion(CUDA_VERSION).c_str());
    std::printf("driver supports CUDA: %s\n", course::formatCudaVersion(driverVersion).c_str());
    const std::string reason = versionGap(CUDA_VERSION, driverVersion);
    if (reason.empty()) return true;
    std::printf("section graphs that decide: SKIP (%s)\n", reason.c_str());
    std::printf("Result = SKIP (%s)\n", reason.c_str());
    return false;
}

// The whole buffer, copied back with a synchronous copy (it waits for the copy, and the legacy
// stream it runs on does not wait for the programs' CU_STREAM_NON_BLOCKING streams: call it
// after the work that wrote the buffer has been synchronised).
template <typename T>
std::vector<T> copyBack(CUdeviceptr buffer, size_t count) {
    std::vector<T> host(count);
    CHECK_DRIVER(cuMemcpyDtoH(host.data(), buffer, count * sizeof(T)));
    return host;
}

// Elements of `values` equal to `expected`.
template <typename T>
size_t countEqual(const T* values, size_t count, T expected) {
    return static_cast<size_t>(std::count(values, values + count, expected));
}

// Positions at which `a` and `b` hold the same value.
template <typename T>
size_t countMatching(const std::vector<T>& a, const std::vector<T>& b) {
    size_t same = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) same += a[i] == b[i] ? 1 : 0;
    return same;
}

// The folder to make temporary folders in: $TMPDIR (given here as `tmpdir`, the value of
// getenv("TMPDIR")) only where it is an absolute path, otherwise /tmp. A relative or empty TMPDIR
// would put the folder under the working directory, wherever the program happens to run.
inline std::string tempParent(const char* tmpdir) {
    return tmpdir != nullptr && tmpdir[0] == '/' ? std::string(tmpdir) : std::string("/tmp");
}

// Blocks of 256 threads that cover n elements.
constexpr unsigned int blocksFor(int n) {
    return static_cast<unsigned int>((n + 255) / 256);
}

#if CUDA_VERSION >= 12040
// The parameters of cuGraphAddNode are one tagged union, CUgraphNodeParams: `type` says which
// member counts. cuda.h (cuGraphAddNode): "All unused bytes ... must be set to zero", hence the
// value-initialisation ({}) in every builder below.

// A kernel node: `blocks` x `threads`, arguments through `params` (an array of pointers to
// the values, read when the node is added or set).
inline CUgraphNodeParams kernelNode(CUfunction function, unsigned int blocks, unsigned int threads, void** params) {
    CUgraphNodeParams node{};
    node.type = CU_GRAPH_NODE_TYPE_KERNEL;
    node.kernel.func = function;
    node.kernel.gridDimX = blocks;
    node.kernel.gridDimY = 1;
    node.kernel.gridDimZ = 1;
    node.kernel.blockDimX = threads;
    node.kernel.blockDimY = 1;
    node.kernel.blockDimZ = 1;
    node.kernel.kernelParams = params;
    return node;
}

// A memset node: `count` 32-bit words at `destination` set to `value`, in `context`.
inline CUgraphNodeParams memsetNode(CUdeviceptr destination, unsigned int value, size_t count, CUcontext context) {
    CUgraphNodeParams node{};
    node.type = CU_GRAPH_NODE_TYPE_MEMSET;
    node.memset.dst = destination;
    node.memset.value = value;
    node.memset.elementSize = 4;  // 1, 2 or 4 bytes
    node.memset.width = count;    // in elements
    node.memset.height = 1;
    node.memset.pitch = count * 4;  // unused with height 1
    node.memset.ctx = context;
    return node;
}

// A 1-D copy of `bytes` from device memory to host memory (page-locked: the programs use
// cuMemAllocHost).
inline CUDA_MEMCPY3D deviceToHost(void* host, CUdeviceptr source, size_t bytes) {
    CUDA_MEMCPY3D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = source;
    copy.dstMemoryType = CU_MEMORYTYPE_HOST;
    copy.dstHost = host;
    copy.WidthInBytes = bytes;
    copy.Height = 1;
    copy.Depth = 1;
    return copy;
}

inline CUgraphNodeParams copyToHostNode(void* host, CUdeviceptr source, size_t bytes, CUcontext context) {
    CUgraphNodeParams node{};
    node.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    node.memcpy.copyCtx = context;
    node.memcpy.copyParams = deviceToHost(host, source, bytes);
    return node;
}

// cuGraphAddNode (through common/cuda_compat.h): a node of any kind, after `dependencies`.
inline CUgraphNode addNode(CUgraph graph, std::initializer_list<CUgraphNode> dependencies, CUgraphNodeParams params) {
    CUgraphNode node = nullptr;
    CHECK_DRIVER(course::graphAddNode(&node, graph, dependencies.begin(), dependencies.size(), &params));
    return node;
}

inline const char* nodeTypeName(CUgraphNodeType type) {
    switch (type) {
        case CU_GRAPH_NODE_TYPE_KERNEL: return "kernel";
        case CU_GRAPH_NODE_TYPE_MEMCPY: return "memcpy";
        case CU_GRAPH_NODE_TYPE_MEMSET: return "memset";
        case CU_GRAPH_NODE_TYPE_HOST: return "host";
        case CU_GRAPH_NODE_TYPE_GRAPH: return "child graph";
        case CU_GRAPH_NODE_TYPE_EMPTY: return "empty";
        case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return "event wait";
        case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "event record";
        case CU_GRAPH_NODE_TYPE_CONDITIONAL: return "conditional";
        default: return "another type";
    }
}

inline const char* captureStatusName(CUstreamCaptureStatus status) {
    switch (status) {
        case CU_STREAM_CAPTURE_STATUS_NONE: return "CU_STREAM_CAPTURE_STATUS_NONE";
        case CU_STREAM_CAPTURE_STATUS_ACTIVE: return "CU_STREAM_CAPTURE_STATUS_ACTIVE";
        case CU_STREAM_CAPTURE_STATUS_INVALIDATED: return "CU_STREAM_CAPTURE_STATUS_INVALIDATED";
        default: return "(another CUstreamCaptureStatus)";
    }
}

inline const char* captureModeName(CUstreamCaptureMode mode) {
    switch (mode) {
        case CU_STREAM_CAPTURE_MODE_GLOBAL: return "CU_STREAM_CAPTURE_MODE_GLOBAL";
        case CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: return "CU_STREAM_CAPTURE_MODE_THREAD_LOCAL";
        case CU_STREAM_CAPTURE_MODE_RELAXED: return "CU_STREAM_CAPTURE_MODE_RELAXED";
        default: return "(another CUstreamCaptureMode)";
    }
}

// A node's dependencies (`up`) or dependents, through the wrappers of common/cuda_compat.h: once
// for the count, once for the nodes. cuda.h does not say in which order they come.
inline std::vector<CUgraphNode> neighbours(CUgraphNode node, bool up) {
    size_t count = 0;
    CHECK_DRIVER(up ? course::nodeGetDependencies(node, nullptr, &count)
                    : course::nodeGetDependentNodes(node, nullptr, &count));
    std::vector<CUgraphNode> nodes(count);
    if (count > 0)
        CHECK_DRIVER(up ? course::nodeGetDependencies(node, nodes.data(), &count)
                        : course::nodeGetDependentNodes(node, nodes.data(), &count));
    nodes.resize(count);
    return nodes;
}

// The number of nodes of a graph (not counting those inside child graphs or conditional bodies).
inline size_t nodeCount(CUgraph graph) {
    size_t count = 0;
    CHECK_DRIVER(cuGraphGetNodes(graph, nullptr, &count));
    return count;
}

inline CUgraphNodeType nodeType(CUgraphNode node) {
    CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
    CHECK_DRIVER(cuGraphNodeGetType(node, &type));
    return type;
}
#endif

}  // namespace lesson23
