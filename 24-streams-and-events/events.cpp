// Lesson 24, program 5 — events beyond cuEventRecord: an external record inside a capture, a
// whole context recorded and waited for, and the device's asynchronous notifications.
//
// Inside a stream capture, cuEventRecordWithFlags(CU_EVENT_RECORD_EXTERNAL) makes the driver
// "create an event record node instead of the default behavior" (cuda.h:467-469); of such a node
// cuda.h says "Each launch of the graph will record event to capture execution of the node's
// dependencies" (cuGraphAddEventRecordNode, cuda.h:19191-19192), and step 2 checks that the
// captured node did so here. cuCtxRecordEvent (12.5) captures "all the activities of the context",
// and cuCtxWaitEvent makes "all future work submitted to context hCtx wait" for an event that "may
// be from a different context" (cuda.h:7013-7014, 7050-7059). Each order is checked by reads of a
// word that a gate kernel, held by the host until a control (the same read, not held by the wait)
// has run, stores: a wait that did not happen reads 0, like the control (lesson24::checkOrder).
// cuDeviceRegisterAsyncNotification (12.4 headers) registers a callback for notifications the
// driver sends; cuda.h defines one type (cuda.h:620-622).
//
//   events [--device N]
#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "streams.h"

namespace {

using lesson24::kControlBound;
using lesson24::kNotRead;
constexpr auto kNotificationWait = std::chrono::milliseconds(100);  // step 4: how long to wait for one
// kFirst and kSecond: what the two gated kernels store (1) once their gates (kGateFirst,
// kGateSecond) open; kSawFirst, kSawSecond, kControl: what the reads saw (kNotRead until they ran).
enum Word { kFirst, kSecond, kSawFirst, kSawSecond, kControl, kGateFirst, kGateSecond, kStarted, kWords };

// gated kernel (kFirst) -> record `event` -> gated kernel (kSecond), captured from `stream`; the
// record plain, or with CU_EVENT_RECORD_EXTERNAL.
CUgraph captureAroundRecord(const lesson24::Kernels& k, const lesson24::HostWords& w, CUstream stream, CUevent event,
                            bool external) {
    CHECK_DRIVER(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    lesson24::launchGated(k.gate, w, kGateFirst, kStarted, kFirst, stream);
    if (external)
        CHECK_DRIVER(cuEventRecordWithFlags(event, stream, CU_EVENT_RECORD_EXTERNAL));
    else
        CHECK_DRIVER(cuEventRecord(event, stream));
    lesson24::launchGated(k.gate, w, kGateSecond, kStarted, kSecond, stream);
    CUgraph graph = nullptr;
    CHECK_DRIVER(cuStreamEndCapture(stream, &graph));
    return graph;
}

#if CUDA_VERSION >= 12050
// One round of step 3: a gated kernel on s1 (kFirst) and on s2 (kSecond), one
// cuCtxRecordEvent(primary); the second context reads kFirst before cuCtxWaitEvent (the control:
// the wait holds only "future work") and both words after it. The host opens stream `opened`'s
// gate (0: s1, 1: s2) once the control has read, and the other only once that kernel has finished
// and the reads after the wait have had kHoldBeforeOpening to run: an event that covered only the
// stream released first would let them read a 0, and the two rounds release both orders first.
bool contextRound(CUcontext primary, CUcontext other, CUevent whole, const lesson24::Kernels& k,
                  const lesson24::Kernels& otherKernels, const lesson24::HostWords& w, CUstream s1, CUstream s2,
                  CUstream otherStream, int opened, bool& controlRan) {
    w.reset(kWords, {kSawFirst, kSawSecond, kControl});
    lesson24::launchGated(k.gate, w, kGateFirst, kStarted, kFirst, s1);
    lesson24::launchGated(k.gate, w, kGateSecond, kStarted, kSecond, s2);
    CHECK_DRIVER(cuCtxRecordEvent(primary, whole));
    CHECK_DRIVER(cuCtxPushCurrent(other));
    lesson24::launchLoad(otherKernels.loadWord, w.at(kFirst), w.at(kControl), otherStream);  // the control
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    CHECK_DRIVER(cuCtxWaitEvent(other, whole));
    CHECK_DRIVER(cuCtxPushCurrent(other));
    lesson24::launchLoad(otherKernels.loadWord, w.at(kFirst), w.at(kSawFirst), otherStream);
    lesson24::launchLoad(otherKernels.loadWord, w.at(kSecond), w.at(kSawSecond), otherStream);
    const int gates[2] = {kGateFirst, kGateSecond}, stored[2] = {kFirst, kSecond};
    controlRan = lesson24::waitForChange(w, kControl, kNotRead, kControlBound) && controlRan;
    lesson24::openAfterHold(w, gates[opened]);
    lesson24::waitForWord(w, stored[opened], 1, kControlBound);  // that kernel has finished
    std::this_thread::sleep_for(lesson24::kHoldBeforeOpening);
    const bool waited = w.read(kSawFirst) == kNotRead && w.read(kSawSecond) == kNotRead;
    w.write(gates[1 - opened], 1);
    CHECK_DRIVER(cuStreamSynchronize(otherStream));
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    CHECK_DRIVER(cuStreamSynchronize(s2));
    CHECK_DRIVER(cuStreamSynchronize(s1));
    std::printf(
        "stream %d released first: control read %u; reads after cuCtxWaitEvent while stream %d was held: %s; "
        "then they read %u and %u (1 = finished)\n",
        opened + 1, w.read(kControl), 2 - opened, waited ? "not run" : "already run", w.read(kSawFirst),
        w.read(kSawSecond));
    return waited && w.read(kControl) == 0 && w.read(kSawFirst) == 1 && w.read(kSawSecond) == 1;
}
#endif

// Step 3: two rounds of contextRound, releasing stream 1's kernel first, then stream 2's. The
// words are the primary context's mapped host memory, used from the second context: that needs
// unified addressing.
void contextEvents(CUdevice device, CUcontext primary, const lesson24::Kernels& k, const lesson24::HostWords& w,
                   CUstream s1, CUstream s2, int driverVersion, int unifiedAddressing, course::Verdict& verdict) {
    std::string missing = lesson24::missingVersion(driverVersion, 12050, "cuCtxRecordEvent");
    if (missing.empty()) missing = lesson24::missingUnifiedAddressing(unifiedAddressing);
    if (lesson24::skipSection("context events", missing)) return;
#if CUDA_VERSION >= 12050
    CUevent whole = nullptr;  // of the primary context, like the work it records
    CHECK_DRIVER(cuEventCreate(&whole, CU_EVENT_DISABLE_TIMING));
    CUcontext other = nullptr;
    CHECK_DRIVER(course::ctxCreate(&other, 0, device));  // pushed: current until the pop
    lesson24::Kernels otherKernels = lesson24::loadKernels();
    CUstream otherStream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&otherStream, CU_STREAM_NON_BLOCKING));
    lesson24::warmUpLoad(otherKernels.loadWord, w.at(kControl), otherStream);  // its first launch in this context
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    bool controlRan = true;
    bool held = true;
    for (int opened : {0, 1})
        held = contextRound(primary, other, whole, k, otherKernels, w, s1, s2, otherStream, opened, controlRan) && held;
    lesson24::checkOrder(verdict, "work in another context after cuCtxWaitEvent saw both streams' writes", held,
                         controlRan);
    CHECK_DRIVER(cuCtxPushCurrent(other));
    CHECK_DRIVER(cuStreamDestroy(otherStream));
    CHECK_DRIVER(cuModuleUnload(otherKernels.module));
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    CHECK_DRIVER(cuCtxDestroy(other));
    CHECK_DRIVER(cuEventDestroy(whole));
#else
    (void)device, (void)primary, (void)k, (void)w, (void)s1, (void)s2, (void)unifiedAddressing, (void)verdict;
#endif
}

#if CUDA_VERSION >= 12040
// What the driver sent, written by the callback (on a thread the driver calls it from).
struct Notifications {
    std::atomic<int> count{0};
    std::atomic<int> type{0};
    std::atomic<unsigned long long> bytesOverBudget{0};
};

void CUDA_CB onNotification(CUasyncNotificationInfo* info, void* userData, CUasyncCallbackHandle) {
    auto& notes = *static_cast<Notifications*>(userData);
    notes.type = static_cast<int>(info->type);
    if (info->type == CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET)
        notes.bytesOverBudget = info->info.overBudget.bytesOverBudget;
    ++notes.count;
}
#endif

// Step 4: register a callback, run a kernel, wait kNotificationWait for a notification, unregister.
// cuda.h gives no time by which one arrives (cuda.h:9099-9112), so "none" means none within
// that wait. The callback's data is static: cuda.h does not say that
// cuDeviceUnregisterAsyncNotification waits for a callback already running (cuda.h:9136-9156), so
// it lives as long as the program. Whether unregistering took effect cannot be seen here: no
// notification arrives to show that the callback is no longer called.
void asyncNotifications(CUdevice device, const lesson24::Kernels& k, CUstream stream, int driverVersion,
                        course::Verdict& verdict) {
    if (lesson24::skipSection("async notifications",
                              lesson24::missingVersion(driverVersion, 12040, "cuDeviceRegisterAsyncNotification")))
        return;
#if CUDA_VERSION >= 12040
    static Notifications notes;
    CUasyncCallbackHandle handle = nullptr;
    const CUresult registered =
        REPORT_DRIVER(cuDeviceRegisterAsyncNotification(device, onNotification, &notes, &handle));
    std::printf("cuDeviceRegisterAsyncNotification: %s\n", course::driverErrorName(registered));
    if (registered == CUDA_ERROR_NOT_SUPPORTED) {
        std::printf("section async notifications: SKIP (the driver answered CUDA_ERROR_NOT_SUPPORTED)\n");
        return;
    }
    verdict.check("the notification callback was registered", registered == CUDA_SUCCESS && handle != nullptr);
    if (registered != CUDA_SUCCESS) return;
    lesson24::launchSpin(k.spin, 1, lesson24::kMillisecond, 0, 0, 0, stream);
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const auto deadline = std::chrono::steady_clock::now() + kNotificationWait;
    while (notes.count == 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const long long waitedMs = static_cast<long long>(kNotificationWait.count());
    std::printf("notifications received by %lld ms after a kernel ran: %d\n", waitedMs, notes.count.load());
    if (notes.count == 0)
        std::printf(
            "section notification contents: SKIP (none arrived within %lld ms after a kernel ran; the one type "
            "cuda.h defines, CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET, is sent when the process has exceeded its "
            "device memory budget)\n",
            waitedMs);
    else
        std::printf("last notification: type %d, bytes over budget %llu\n", notes.type.load(),
                    notes.bytesOverBudget.load());
    CHECK_DRIVER(cuDeviceUnregisterAsyncNotification(device, handle));
    std::printf("cuDeviceUnregisterAsyncNotification: CUDA_SUCCESS\n");
#else
    (void)device, (void)k, (void)stream, (void)verdict;
#endif
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    course::printStep(1, "initialise, the kernels, two streams, mapped host words");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    const int driverVersion = lesson24::printDeviceAndVersions(device, ordinal);
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    CHECK_DRIVER(cuCtxSetCurrent(primary));
    lesson24::Kernels kernels = lesson24::loadKernels();
    CUstream s1 = nullptr;
    CUstream s2 = nullptr;
    CHECK_DRIVER(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHECK_DRIVER(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    lesson24::HostWords words = lesson24::allocHostWords(kWords);
    int unifiedAddressing = 0;  // step 3 hands the words to a second context
    CHECK_DRIVER(cuDeviceGetAttribute(&unifiedAddressing, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, device));
    std::printf("CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: %d\n", unifiedAddressing);
    lesson24::warmUpLoad(kernels.loadWord, words.at(kControl), s2);  // before any gate kernel is held

    // Step 2: the same three calls captured twice. Then the graph runs on s1; s2 reads the first
    // kernel's word before waiting for the graph's event (the control) and both words after it.
    // The first kernel is held until the control has read, the second until s2 has read both
    // words (at most kControlBound: cuda.h does not say how soon a waiting stream is released).
    course::printStep(2, "cuEventRecordWithFlags(CU_EVENT_RECORD_EXTERNAL) inside a capture");
    CUevent plain = nullptr;
    CUevent external = nullptr;
    CHECK_DRIVER(cuEventCreate(&plain, CU_EVENT_DISABLE_TIMING));
    CHECK_DRIVER(cuEventCreate(&external, CU_EVENT_DISABLE_TIMING));
    CUgraph plainGraph = captureAroundRecord(kernels, words, s1, plain, false);
    CUgraph externalGraph = captureAroundRecord(kernels, words, s1, external, true);
    size_t plainRecords = 0;
    size_t externalRecords = 0;
    const size_t plainNodes = lesson24::countNodes(plainGraph, CU_GRAPH_NODE_TYPE_EVENT_RECORD, plainRecords);
    const size_t externalNodes = lesson24::countNodes(externalGraph, CU_GRAPH_NODE_TYPE_EVENT_RECORD, externalRecords);
    std::printf("captured with cuEventRecord: %zu nodes, %zu of them event record nodes\n", plainNodes, plainRecords);
    std::printf("captured with CU_EVENT_RECORD_EXTERNAL: %zu nodes, %zu of them event record nodes\n", externalNodes,
                externalRecords);
    verdict.check("a plain cuEventRecord inside a capture adds no event record node", plainRecords == 0);
    verdict.check("CU_EVENT_RECORD_EXTERNAL adds one event record node",
                  externalRecords == 1 && externalNodes == plainNodes + 1);
    // Without its event record node the graph never records `external`, and cuStreamWaitEvent on
    // an event that was never recorded is not what this step shows: the order checks need the node.
    if (externalRecords != 1) {
        std::printf("section the graph's event: SKIP (the graph has no event record node to wait for)\n");
    } else {
        CUgraphExec exec = nullptr;
        CHECK_DRIVER(course::graphInstantiate(&exec, externalGraph, 0));
        words.reset(kWords, {kSawFirst, kSawSecond, kControl});
        CHECK_DRIVER(cuGraphLaunch(exec, s1));
        lesson24::launchLoad(kernels.loadWord, words.at(kFirst), words.at(kControl), s2);  // the control
        CHECK_DRIVER(cuStreamWaitEvent(s2, external, 0));
        lesson24::launchLoad(kernels.loadWord, words.at(kFirst), words.at(kSawFirst), s2);
        lesson24::launchLoad(kernels.loadWord, words.at(kSecond), words.at(kSawSecond), s2);
        const bool controlRan = lesson24::waitForChange(words, kControl, kNotRead, kControlBound);
        lesson24::openAfterHold(words, kGateFirst);
        const bool readWhileHeld = lesson24::waitForChange(words, kSawSecond, kNotRead, kControlBound);
        words.write(kGateSecond, 1);
        CHECK_DRIVER(cuStreamSynchronize(s2));
        std::printf("stream 2 before the wait read the first kernel's word: %u (the control: 0 = not finished yet)\n",
                    words.read(kControl));
        std::printf(
            "stream waiting on the graph's event read the first kernel's word: %u (1 = that kernel had finished)\n",
            words.read(kSawFirst));
        std::printf("and the second kernel's word: %u (0 = the graph was still running), %s\n", words.read(kSawSecond),
                    readWhileHeld ? "read while that kernel was held" : "not read while that kernel was held");
        lesson24::checkOrder(verdict,
                             "a stream waiting on the graph's event ran after the kernel before the record node",
                             words.read(kSawFirst) == 1 && words.read(kControl) == 0, controlRan);
        lesson24::checkOrder(verdict, "the graph's event did not wait for the kernel after the record node",
                             readWhileHeld && words.read(kSawSecond) == 0, controlRan);
        CHECK_DRIVER(cuStreamSynchronize(s1));
        CHECK_DRIVER(cuGraphExecDestroy(exec));
    }
    CHECK_DRIVER(cuGraphDestroy(externalGraph));
    CHECK_DRIVER(cuGraphDestroy(plainGraph));
    CHECK_DRIVER(cuEventDestroy(external));
    CHECK_DRIVER(cuEventDestroy(plain));

    course::printStep(3, "cuCtxRecordEvent and cuCtxWaitEvent: a whole context, waited for by another");
    contextEvents(device, primary, kernels, words, s1, s2, driverVersion, unifiedAddressing, verdict);

    course::printStep(4, "cuDeviceRegisterAsyncNotification: what the driver reports");
    asyncNotifications(device, kernels, s1, driverVersion, verdict);

    course::printStep(5, "release everything, newest first");
    CHECK_DRIVER(cuMemFreeHost(words.host));
    CHECK_DRIVER(cuStreamDestroy(s2));
    CHECK_DRIVER(cuStreamDestroy(s1));
    CHECK_DRIVER(cuModuleUnload(kernels.module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: host words, streams, module, primary context\n");

    course::printStep(6, "check");
    return verdict.finish();
}
