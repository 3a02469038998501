// Lesson 23, program 4 — more from stream capture, and a picture of the graph it made.
//
// Lesson 15 captured a stream into a new graph. Here the capture goes on where a hand-built graph
// stops (cuStreamBeginCaptureToGraph); a capture is joined by a node added by hand in the middle
// (cuStreamGetCaptureInfo names the graph and the nodes the next one will depend on,
// cuStreamUpdateCaptureDependencies makes the hand-added node the next one's dependency); and a
// thread's own capture mode refuses an unsafe call during a capture, then, swapped to RELAXED for
// a moment (cuThreadExchangeStreamCaptureMode), lets it through. Last, cuGraphDebugDotPrint writes
// a graph as a DOT file, in a fresh folder of its own that the program removes again.
//
//   capture_more               the walkthrough
//   capture_more --keep-dot    keep the DOT file and print its path
//   capture_more --device N    another GPU
#include <cuda.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "lesson23.h"

#if CUDA_VERSION >= 12040
namespace {

using lesson23::captureModeName;
using lesson23::captureStatusName;
using lesson23::neighbours;
constexpr int kCount = 1 << 16;
constexpr size_t kAll = kCount;
constexpr size_t kBytes = kCount * sizeof(float);

// Queues x = a * x + b on the stream (captured, when the stream is capturing).
void queueAxpb(CUfunction axpb, CUdeviceptr x, float a, float b, CUstream stream) {
    int n = kCount;
    void* params[] = {&x, &a, &b, &n};
    CHECK_DRIVER(cuLaunchKernel(axpb, lesson23::blocksFor(n), 1, 1, 256, 1, 1, 0, stream, params, nullptr));
}

// Instantiates, launches once, and counts the host elements equal to `expected`.
size_t runOnce(CUgraph graph, CUstream stream, float* host, float expected) {
    CUgraphExec exec = nullptr;
    CHECK_DRIVER(course::graphInstantiate(&exec, graph, 0));
    std::fill(host, host + kCount, -1.0f);
    CHECK_DRIVER(cuGraphLaunch(exec, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    CHECK_DRIVER(cuGraphExecDestroy(exec));
    return lesson23::countEqual(host, kAll, expected);
}

// Step 3's capture: memset x = 2 and x = 2x captured; then a kernel node x = x + 3 added by hand
// to the capture's graph after the nodes that cuStreamGetCaptureInfo names, and made the
// stream's only dependency; then x = 10x and the copy captured, and the edges read back: the
// hand-added node's, and the dependencies of the node that depends on it. cuda.h:15561-15563:
// the graph and the dependencies cuStreamGetCaptureInfo returns are valid only when the capture
// status is ACTIVE; otherwise the capture is ended here and `graph` stays nullptr.
struct Joined {
    CUgraph graph = nullptr;                 // the captured graph
    CUgraphNode added = nullptr;             // the hand-added node
    CUgraphNode reported = nullptr;          // the one node cuStreamGetCaptureInfo named, copied out
    std::vector<CUgraphNode> before, after;  // the hand-added node's dependencies and dependents
    std::vector<CUgraphNode> nextWaitsFor;   // the dependencies of its one dependent (the next captured node)
};

Joined captureWithHandAddedNode(CUfunction axpb, CUdeviceptr x, float* host, CUstream stream) {
    Joined joined;
    CHECK_DRIVER(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_DRIVER(cuMemsetD32Async(x, std::bit_cast<std::uint32_t>(2.0f), kCount, stream));
    queueAxpb(axpb, x, 2.0f, 0.0f, stream);
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUgraph capturing = nullptr;
    const CUgraphNode* dependencies = nullptr;  // the driver's array, valid until the next call on the stream
    size_t count = 0;
    CHECK_DRIVER(course::streamGetCaptureInfo(stream, &status, nullptr, &capturing, &dependencies, &count));
    std::printf("capture status: %s, %zu dependency for the next node\n", captureStatusName(status), count);
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {  // `capturing` and `dependencies` mean nothing
        CUgraph ended = nullptr;
        (void)REPORT_DRIVER(cuStreamEndCapture(stream, &ended));
        if (ended != nullptr) CHECK_DRIVER(cuGraphDestroy(ended));
        return joined;
    }
    if (count == 1) joined.reported = dependencies[0];  // a handle stays valid with its graph
    CUdeviceptr xArg = x;
    float one = 1.0f, three = 3.0f;
    int n = kCount;
    void* plus3Params[] = {&xArg, &one, &three, &n};
    CUgraphNodeParams plus3 = lesson23::kernelNode(axpb, lesson23::blocksFor(n), 256, plus3Params);
    // cuda.h:15587-15588: the driver's array may be passed to calls on the graph as it is.
    CHECK_DRIVER(course::graphAddNode(&joined.added, capturing, dependencies, count, &plus3));
    CHECK_DRIVER(
        course::streamUpdateCaptureDependencies(stream, &joined.added, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
    queueAxpb(axpb, x, 10.0f, 0.0f, stream);
    CHECK_DRIVER(cuMemcpyDtoHAsync(host, x, kBytes, stream));
    CHECK_DRIVER(cuStreamEndCapture(stream, &joined.graph));
    joined.before = neighbours(joined.added, true);
    joined.after = neighbours(joined.added, false);
    if (joined.after.size() == 1) joined.nextWaitsFor = neighbours(joined.after[0], true);
    return joined;
}

// Step 4: a GLOBAL capture; in the middle of it this thread swaps its own mode to `threadMode`
// (cuThreadExchangeStreamCaptureMode), calls cuMemAlloc, and swaps back; then the capture ends.
// cuda.h:15442-15458: in GLOBAL mode (the default) a thread with a capture of its own is
// "prohibited from potentially unsafe API calls" (its example is cudaMalloc; cuMemAlloc is the
// driver's allocation); in RELAXED mode it is not. Prints what happened, frees what it got.
struct AllocInCapture {
    CUresult allocated = CUDA_SUCCESS;
    CUstreamCaptureStatus after = CU_STREAM_CAPTURE_STATUS_NONE;  // the capture's status after cuMemAlloc
    bool graphReturned = false;
};

AllocInCapture allocInCapture(CUstream stream, CUdeviceptr x, CUstreamCaptureMode threadMode) {
    AllocInCapture result;
    CHECK_DRIVER(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_DRIVER(cuMemsetD32Async(x, 0, kCount, stream));
    CUstreamCaptureMode mode = threadMode;
    CHECK_DRIVER(cuThreadExchangeStreamCaptureMode(&mode));  // `mode` gets the thread's mode before
    const CUstreamCaptureMode before = mode;
    CUdeviceptr scratch = 0;
    result.allocated = REPORT_DRIVER(cuMemAlloc(&scratch, 4096));
    CHECK_DRIVER(cuThreadExchangeStreamCaptureMode(&mode));  // back to `before`
    CHECK_DRIVER(cuStreamIsCapturing(stream, &result.after));
    CUgraph graph = nullptr;
    const CUresult ended = REPORT_DRIVER(cuStreamEndCapture(stream, &graph));
    result.graphReturned = graph != nullptr;
    const char* label = captureModeName(threadMode);
    std::printf("thread mode %s, the exchange handed back: %s\n", label, captureModeName(before));
    std::printf("thread mode %s, cuMemAlloc in the capture: %s, capture status after it: %s\n", label,
                course::driverErrorName(result.allocated), captureStatusName(result.after));
    std::printf("thread mode %s, cuStreamEndCapture: %s, graph %s\n", label, course::driverErrorName(ended),
                result.graphReturned ? "returned" : "not returned");
    if (graph != nullptr) CHECK_DRIVER(cuGraphDestroy(graph));
    if (result.allocated == CUDA_SUCCESS) CHECK_DRIVER(cuMemFree(scratch));
    return result;
}

// The calling thread's capture mode, read the only way cuda.h offers: an exchange (which sets
// GLOBAL and hands back the mode the thread had), then a second one that puts that mode back.
CUstreamCaptureMode threadCaptureMode() {
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    CHECK_DRIVER(cuThreadExchangeStreamCaptureMode(&mode));  // `mode`: the thread's mode
    CUstreamCaptureMode swappedIn = mode;
    CHECK_DRIVER(cuThreadExchangeStreamCaptureMode(&swappedIn));  // back to it
    return mode;
}

// Step 5: cuGraphDebugDotPrint into a folder that mkdtemp makes (mode 0700, a new name: nothing
// another user planted) under an absolute $TMPDIR or /tmp, then the file read back. Without --keep-dot the file and the folder go
// again on every path, a failed cuGraphDebugDotPrint included.
struct DotFile {
    bool namesKernel = false;
    bool leftBehind = false;  // the file or the folder could not be removed
};

DotFile writeDotFile(CUgraph graph, const char* kernel, bool keep) {
    DotFile result;
    std::string folder = lesson23::tempParent(std::getenv("TMPDIR")) + "/lesson23-dot-XXXXXX";
    if (mkdtemp(folder.data()) == nullptr) {
        std::perror("mkdtemp");
        return result;
    }
    const std::string path = folder + "/graph.dot";
    const CUresult printed = REPORT_DRIVER(cuGraphDebugDotPrint(graph, path.c_str(), 0));
    const std::string dot = printed == CUDA_SUCCESS ? course::readFile(path).value_or("") : std::string();
    result.namesKernel = dot.find(kernel) != std::string::npos;
    std::printf("DOT file names the kernel %s: %s\n", kernel, result.namesKernel ? "yes" : "no");
    if (keep && printed == CUDA_SUCCESS) {
        std::printf("DOT file kept at: %s\n", path.c_str());
        return result;
    }
    const bool fileGone = std::remove(path.c_str()) == 0 || errno == ENOENT;  // none if the print failed
    const bool folderGone = rmdir(folder.c_str()) == 0;
    result.leftBehind = !fileGone || !folderGone;
    std::printf("DOT file and its folder removed: %s\n", result.leftBehind ? "no" : "yes (--keep-dot keeps them)");
    return result;
}

}  // namespace
#endif

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--keep-dot"}, {"--device"}, "[--device N] [--keep-dot]", args))
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
    CUfunction axpb = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&axpb, module, "axpb"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr x = 0;
    CHECK_DRIVER(cuMemAlloc(&x, kBytes));
    void* hostBuffer = nullptr;  // page-locked, as for every copy the lesson's graphs make
    CHECK_DRIVER(cuMemAllocHost(&hostBuffer, kBytes));
    float* host = static_cast<float*>(hostBuffer);
    course::Verdict verdict;

    // Step 2: a hand-built graph (one memset node), then a capture that continues it: the first
    // captured node depends on the memset node given to cuStreamBeginCaptureToGraph.
    course::printStep(2, "cuStreamBeginCaptureToGraph: capture after a hand-built memset node");
    CUgraph built = nullptr;
    CHECK_DRIVER(cuGraphCreate(&built, 0));
    const CUgraphNode fill =
        lesson23::addNode(built, {}, lesson23::memsetNode(x, std::bit_cast<std::uint32_t>(1.0f), kCount, context));
    CHECK_DRIVER(cuStreamBeginCaptureToGraph(stream, built, &fill, nullptr, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    queueAxpb(axpb, x, 2.0f, 3.0f, stream);
    queueAxpb(axpb, x, 10.0f, 0.0f, stream);
    CHECK_DRIVER(cuMemcpyDtoHAsync(host, x, kBytes, stream));
    CUgraph captured = nullptr;
    CHECK_DRIVER(cuStreamEndCapture(stream, &captured));
    size_t roots = 0;
    CHECK_DRIVER(cuGraphGetRootNodes(built, nullptr, &roots));
    std::printf("cuStreamEndCapture returned: %s\n",
                captured == built ? "the graph given to the capture" : "another graph");
    std::printf("continued graph nodes: %zu (the memset + 3 captured), root nodes: %zu\n", lesson23::nodeCount(built),
                roots);
    verdict.check("the capture continued the hand-built graph", lesson23::nodeCount(built) == 4 && roots == 1);
    const size_t fifties = runOnce(built, stream, host, 50.0f);
    std::printf("continued graph launch: %zu of %d elements = 50 ((1 * 2 + 3) * 10)\n", fifties, kCount);
    verdict.check("the continued graph computes (1 * 2 + 3) * 10", fifties == kAll);
    if (captured != built) CHECK_DRIVER(cuGraphDestroy(captured));  // cuda.h does not say it is the same handle
    CHECK_DRIVER(cuGraphDestroy(built));

    // Step 3: mid-capture, add a node by hand after the stream's current dependencies, then make
    // it the only dependency of what the stream captures next. The edges are read back afterwards.
    course::printStep(3, "cuStreamGetCaptureInfo + cuStreamUpdateCaptureDependencies: a hand-added node mid-capture");
    const Joined joined = captureWithHandAddedNode(axpb, x, host, stream);
    const bool active = joined.graph != nullptr;
    const bool followsReported = joined.before.size() == 1 && joined.before[0] == joined.reported;
    if (active)
        std::printf("joined graph nodes: %zu (memset, kernel, hand-added kernel, kernel, memcpy)\n",
                    lesson23::nodeCount(joined.graph));
    std::printf("the hand-added node depends on: %s\n",
                followsReported ? "the node the capture reported" : "other nodes or none");
    // CU_STREAM_SET_CAPTURE_DEPENDENCIES replaced the stream's dependencies: the next captured node
    // waits for the hand-added node and for nothing else (ADD would have kept x = 2x there too).
    const bool nextWaitsForAddedOnly = joined.nextWaitsFor.size() == 1 && joined.nextWaitsFor[0] == joined.added;
    std::printf("nodes that depend on the hand-added one: %zu\n", joined.after.size());
    std::printf("the next captured node depends on: %s\n",
                nextWaitsForAddedOnly ? "the hand-added node only" : "other nodes too, or none");
    verdict.check("the hand-added node depends on the node the capture reported", followsReported);
    verdict.check("the next captured node depends on the hand-added node only",
                  joined.after.size() == 1 && nextWaitsForAddedOnly);
    const size_t seventies = active ? runOnce(joined.graph, stream, host, 70.0f) : 0;
    std::printf("joined graph launch: %zu of %d elements = 70 ((2 * 2 + 3) * 10)\n", seventies, kCount);
    verdict.check("the joined graph computes (2 * 2 + 3) * 10", seventies == kAll);

    // Step 4: this thread's own mode decides what it may call during its GLOBAL capture: in GLOBAL
    // mode cuMemAlloc is refused; swapped to RELAXED for a moment, it goes through.
    course::printStep(4, "cuThreadExchangeStreamCaptureMode: cuMemAlloc inside a GLOBAL capture");
    const AllocInCapture global = allocInCapture(stream, x, CU_STREAM_CAPTURE_MODE_GLOBAL);
    verdict.check("a GLOBAL thread mode refused cuMemAlloc during the capture", global.allocated != CUDA_SUCCESS);
    const AllocInCapture relaxed = allocInCapture(stream, x, CU_STREAM_CAPTURE_MODE_RELAXED);
    verdict.check(
        "a RELAXED thread mode let cuMemAlloc through the capture",
        relaxed.allocated == CUDA_SUCCESS && relaxed.after == CU_STREAM_CAPTURE_STATUS_ACTIVE && relaxed.graphReturned);
    // Each swap was undone with the mode it handed back: the thread is in GLOBAL, its default, again.
    const CUstreamCaptureMode afterSwaps = threadCaptureMode();
    std::printf("this thread's capture mode after the swaps: %s\n", captureModeName(afterSwaps));
    verdict.check("the thread's capture mode is GLOBAL again after the swaps",
                  afterSwaps == CU_STREAM_CAPTURE_MODE_GLOBAL);

    // Step 5: the picture of step 3's graph. By default cuda.h:21282 says it holds the topology,
    // node types and ids, kernel names and memcpy directions.
    course::printStep(5, "cuGraphDebugDotPrint of step 3's graph");
    const bool keep = args.has("--keep-dot");
    const DotFile dot = active ? writeDotFile(joined.graph, "axpb", keep) : DotFile{};
    verdict.check("the DOT file names the graph's kernel", dot.namesKernel);
    if (!keep) verdict.check("the program removed the DOT file and its folder", !dot.leftBehind);

    course::printStep(6, "release everything, newest first");
    if (active) CHECK_DRIVER(cuGraphDestroy(joined.graph));
    CHECK_DRIVER(cuMemFreeHost(hostBuffer));
    CHECK_DRIVER(cuMemFree(x));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: graph, buffers, stream, module, primary context\n");

    course::printStep(7, "check");
    return verdict.finish();
#else
    return course::kExitNotApplicable;  // not reached: usableHere said why and returned false
#endif
}
