// Lesson 24, program 3 — host work in stream order: cuLaunchHostFunc and cuStreamAddCallback.
//
// Both queue a host function: it is called after the work queued before it in the stream has
// completed, and the work queued after it waits until it returns. They differ in what cuda.h
// lets them do (cuda.h:15273-15291 and 18067-18102):
//   cuLaunchHostFunc    not called "in the event of an error in the CUDA context"; supported
//                       with stream capture, "unlike" the callback (cuda.h does not say as
//                       what: step 4 checks that it is one host node); a CUDA call inside it
//                       "may result in CUDA_ERROR_NOT_PERMITTED, but this is not required".
//   cuStreamAddCallback "slated for eventual deprecation"; receives the stream and a status
//                       (an error code after a device error); "not supported" in a capture; a
//                       CUDA call inside it "will result in CUDA_ERROR_NOT_PERMITTED".
// Neither may make CUDA calls, nor wait for work that is not ordered before it. Here each one
// sits between two kernels: the first holds until the host opens its gate and then stores 1, the
// host function reads that word and stores 2 in another, the second kernel reads that one. While
// the first kernel is held the host looks: nothing queued behind it may have run, and no word may
// be written yet. A host function run too early reads 0; a kernel run before it reads 0.
//
//   host_work [--device N]
#include <cuda.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "streams.h"

namespace {

enum Word { kFirstKernelWrote, kHostWrote, kSecondKernelSaw, kGate, kStarted, kWords };

// What a host function saw and was given. Written by the host function, on a thread the driver
// calls it from (cuda.h does not say which), read by main after cuStreamSynchronize: atomics.
struct HostStep {
    const lesson24::HostWords* words = nullptr;
    std::atomic<unsigned int> saw{0};
    std::atomic<int> calls{0};
    std::atomic<int> status{-1};  // cuStreamAddCallback's status argument
    std::atomic<CUstream> stream{nullptr};
};

// The host work itself: memory only, no CUDA call.
void doStep(HostStep& step) {
    step.saw = step.words->read(kFirstKernelWrote);
    step.words->write(kHostWrote, 2);
    ++step.calls;
}

void CUDA_CB hostFunction(void* userData) {
    doStep(*static_cast<HostStep*>(userData));
}

void CUDA_CB streamCallback(CUstream stream, CUresult status, void* userData) {
    auto& step = *static_cast<HostStep*>(userData);
    step.status = static_cast<int>(status);
    step.stream = stream;
    doStep(step);
}

void CUDA_CB countCall(void* userData) {
    ++*static_cast<std::atomic<int>*>(userData);
}

// gated kernel -> host work (queued by `enqueueHost`) -> kernel, on one stream; checks both
// orders. The words start at 0 and the gate shut; the host opens it once the kernel has started
// and lesson24::kHoldBeforeOpening has passed with nothing behind it run.
template <class EnqueueHost>
void betweenKernels(const char* what, const lesson24::Kernels& k, const lesson24::HostWords& words, CUstream stream,
                    HostStep& step, course::Verdict& verdict, EnqueueHost enqueueHost) {
    words.clear(kWords);
    lesson24::launchGated(k.gate, words, kGate, kStarted, kFirstKernelWrote, stream);
    enqueueHost();
    lesson24::launchLoad(k.loadWord, words.at(kHostWrote), words.at(kSecondKernelSaw), stream);
    const bool started = lesson24::waitForWord(words, kStarted, 1, lesson24::kControlBound);
    std::this_thread::sleep_for(lesson24::kHoldBeforeOpening);
    const bool nothingYet = started && step.calls == 0 && words.read(kFirstKernelWrote) == 0 &&
                            words.read(kHostWrote) == 0 && words.read(kSecondKernelSaw) == 0;
    words.write(kGate, 1);
    CHECK_DRIVER(cuStreamSynchronize(stream));
    std::printf("%s while the first kernel was held: %s\n", what,
                nothingYet ? "not called, no word written" : "called, or a word written, or the kernel not started");
    std::printf("%s: calls %d, read the first kernel's word: %u (1 = that kernel had finished)\n", what,
                step.calls.load(), step.saw.load());
    std::printf("second kernel, after the %s: read %u (2 = the %s had run)\n", what, words.read(kSecondKernelSaw),
                what);
    const std::string name(what);
    verdict.check(("the " + name + " ran once, after the kernel before it").c_str(),
                  nothingYet && step.calls == 1 && step.saw == 1);
    verdict.check(("the kernel after the " + name + " saw its write").c_str(), words.read(kSecondKernelSaw) == 2);
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    course::printStep(1, "initialise, the kernels, a stream, mapped host words");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    lesson24::printDeviceAndVersions(device, ordinal);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    lesson24::Kernels kernels = lesson24::loadKernels();
    // A stream of its own, non-blocking: step 4 captures it, and capture "may not be initiated
    // if stream is CU_STREAM_LEGACY" (cuda.h:15350-15351).
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    lesson24::HostWords words = lesson24::allocHostWords(kWords);
    lesson24::warmUpLoad(kernels.loadWord, words.at(kSecondKernelSaw), stream);  // before any gate kernel is held

    course::printStep(2, "cuLaunchHostFunc between two kernels");
    HostStep function;
    function.words = &words;
    betweenKernels("host function", kernels, words, stream, function, verdict,
                   [&] { CHECK_DRIVER(cuLaunchHostFunc(stream, hostFunction, &function)); });

    // Step 3: the same with a callback, which is also handed its stream and a status.
    course::printStep(3, "cuStreamAddCallback between two kernels");
    HostStep callback;
    callback.words = &words;
    betweenKernels("callback", kernels, words, stream, callback, verdict,
                   [&] { CHECK_DRIVER(cuStreamAddCallback(stream, streamCallback, &callback, 0)); });
    std::printf("callback's arguments: status %s, stream %s\n",
                course::driverErrorName(static_cast<CUresult>(callback.status.load())),
                callback.stream == stream ? "the stream it was added to" : "another");
    verdict.check("the callback got CUDA_SUCCESS and its own stream",
                  callback.status == CUDA_SUCCESS && callback.stream == stream);

    // Step 4: cuda.h says cuLaunchHostFunc is supported with stream capture and
    // cuStreamAddCallback is not (cuda.h:15275-15277); it does not say what the capture makes of
    // the host function. The checks: one host node, run at every graph launch, not while recording.
    course::printStep(4, "in a capture: cuLaunchHostFunc becomes a host node, cuStreamAddCallback is refused");
    std::atomic<int> graphCalls{0};
    CHECK_DRIVER(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_DRIVER(cuLaunchHostFunc(stream, countCall, &graphCalls));
    CUgraph graph = nullptr;
    CHECK_DRIVER(cuStreamEndCapture(stream, &graph));
    size_t nodeCount = 0;
    CHECK_DRIVER(cuGraphGetNodes(graph, nullptr, &nodeCount));
    CUgraphNode node = nullptr;
    size_t one = 1;
    CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
    CHECK_DRIVER(cuGraphGetNodes(graph, &node, &one));  // the first node, if there is one
    if (one == 1) CHECK_DRIVER(cuGraphNodeGetType(node, &type));
    std::printf("captured: %zu node(s), the first %s; calls while recording: %d\n", nodeCount,
                type == CU_GRAPH_NODE_TYPE_HOST ? "a host node" : "not a host node", graphCalls.load());
    verdict.check("capture records cuLaunchHostFunc as one host node, without calling it",
                  nodeCount == 1 && type == CU_GRAPH_NODE_TYPE_HOST && graphCalls == 0);
    CUgraphExec exec = nullptr;
    CHECK_DRIVER(course::graphInstantiate(&exec, graph, 0));
    CHECK_DRIVER(cuGraphLaunch(exec, stream));
    CHECK_DRIVER(cuGraphLaunch(exec, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    std::printf("host node calls after two graph launches: %d\n", graphCalls.load());
    verdict.check("the host node ran once per graph launch", graphCalls == 2);
    CHECK_DRIVER(cuGraphExecDestroy(exec));
    CHECK_DRIVER(cuGraphDestroy(graph));

    HostStep neverCalled;  // the refused callback's data; also what it would get if accepted
    neverCalled.words = &words;
    CHECK_DRIVER(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    const CUresult added = REPORT_DRIVER(cuStreamAddCallback(stream, streamCallback, &neverCalled, 0));
    CUgraph refused = nullptr;
    const CUresult ended = REPORT_DRIVER(cuStreamEndCapture(stream, &refused));
    std::printf("cuStreamAddCallback inside a capture: %s\n", course::driverErrorName(added));
    std::printf("cuStreamEndCapture after it: %s, graph %s\n", course::driverErrorName(ended),
                refused != nullptr ? "returned" : "not returned");
    if (refused != nullptr) CHECK_DRIVER(cuGraphDestroy(refused));  // never launched
    // cuda.h says two things: cuStreamAddCallback's list of return codes has
    // CUDA_ERROR_NOT_SUPPORTED (cuda.h:15323-15329), and CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
    // "indicates that the operation is not permitted when the stream is capturing"
    // (cuda.h:3070-3074). Either is a refusal; any other code is some other failure.
    verdict.check("capture refuses cuStreamAddCallback",
                  added == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || added == CUDA_ERROR_NOT_SUPPORTED);

    // Step 5: no host function may still be queued when the memory it uses goes.
    course::printStep(5, "release everything, newest first");
    CHECK_DRIVER(cuStreamSynchronize(stream));
    CHECK_DRIVER(cuMemFreeHost(words.host));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(kernels.module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: host words, stream, module, primary context\n");

    course::printStep(6, "check");
    return verdict.finish();
}
