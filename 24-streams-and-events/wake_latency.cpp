// Lesson 24, program 7 — how soon a host thread notices the GPU: four ways to wait.
//
// One round: a one-thread kernel stores "started" in a mapped host word, then spins until the
// host opens a gate word (at most 1 s). The host takes t0 and opens the gate; the stream goes
// on to the signal being measured; the waiting host thread takes t1 when it wakes. t1 - t0 is
// a round trip — the GPU noticing the gate, then the signal reaching the host. This program
// assumes that the first half costs the same for every way (the same kernel notices the same
// gate; nothing in cuda.h says so), and only under that assumption are the differences between
// the ways the ways' own:
//   cuEventSynchronize, CU_EVENT_BLOCKING_SYNC event: it "will cause the calling CPU thread to
//     block until the event has been completed by the device" (cuda.h:16079-16081)
//   cuEventSynchronize, default event: "the CPU thread will busy-wait" (cuda.h:16081-16083)
//   cuLaunchHostFunc: t1 is taken inside the host function, on the thread the driver calls it on
//   cuStreamWriteValue32 to a mapped host word, which the host thread polls
// Before it opens the gate the host checks that no way has signalled yet: everything after the
// kernel must still be pending, whatever the clock says; and every wake must be stamped after
// the gate opened (t1 > t0), which for the host function is taken on another thread. Then what
// the two events' waits cost the waiting thread: its CPU time (CLOCK_THREAD_CPUTIME_ID) while
// cuEventSynchronize waits for a 50 ms kernel. A thread that blocks uses little of it; one that
// busy-waits, nearly all.
//
//   wake_latency               21 rounds of each way (2 untimed first), medians printed
//   wake_latency --bench       201 rounds of each, and "bench:" lines
//   wake_latency --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "streams.h"

namespace {

enum Way { kBlockingEvent = 0, kSpinningEvent, kHostFunction, kPolledFlag, kWays };
const char* const kWayNames[kWays] = {"cuEventSynchronize, CU_EVENT_BLOCKING_SYNC event",
                                      "cuEventSynchronize, default (spinning) event", "cuLaunchHostFunc",
                                      "host polls a cuStreamWriteValue32 word"};
enum Word { kStarted = 0, kGate = 1, kDone = 2, kFlag = 3, kWords = 4 };
constexpr unsigned long long kGateTimeoutNs = 1000 * lesson24::kMillisecond;
constexpr auto kHostTimeout = std::chrono::seconds(2);
constexpr unsigned long long kCpuKernelNs = 50 * lesson24::kMillisecond;  // step 3's kernel

long long steadyNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// The calling thread's CPU time (POSIX CLOCK_THREAD_CPUTIME_ID), in nanoseconds.
long long threadCpuNs() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec;
}

// The host function's record: how often it ran, and when it last started.
struct Wake {
    std::atomic<int> calls{0};
    std::atomic<long long> ns{0};
};

void CUDA_CB wakeUp(void* userData) {
    auto& wake = *static_cast<Wake*>(userData);
    wake.ns = steadyNs();
    ++wake.calls;
}

struct Setup {
    lesson24::Kernels kernels;
    lesson24::HostWords words;
    CUstream stream = nullptr;
    CUevent events[2] = {};  // blocking, spinning
    Wake wake;
};

// One round of `way` with `tag`: the latency in microseconds; `early` when the way had
// signalled before the gate opened or its wake was stamped no later than t0, `lost` when the
// kernel never saw its gate or the host never saw the signal.
double oneRound(Setup& s, Way way, unsigned int tag, bool& early, bool& lost) {
    const lesson24::HostWords& w = s.words;
    lesson24::launchGate(s.kernels.gate, w.at(kGate), tag, kGateTimeoutNs, w.at(kStarted), w.at(kDone), s.stream);
    const int callsBefore = s.wake.calls;
    if (way == kBlockingEvent || way == kSpinningEvent) CHECK_DRIVER(cuEventRecord(s.events[way], s.stream));
#if CUDA_VERSION >= 11070
    if (way == kPolledFlag) CHECK_DRIVER(course::streamWriteValue32(s.stream, w.at(kFlag), tag, 0));
#endif
    if (way == kHostFunction) CHECK_DRIVER(cuLaunchHostFunc(s.stream, wakeUp, &s.wake));
    lost = !lesson24::waitForWord(w, kStarted, tag, kHostTimeout);
    if (way == kBlockingEvent || way == kSpinningEvent) {
        const CUresult state = cuEventQuery(s.events[way]);  // CUDA_ERROR_NOT_READY: still pending
        if (state != CUDA_ERROR_NOT_READY) CHECK_DRIVER(state);
        early = state == CUDA_SUCCESS;
    } else {
        early = way == kHostFunction ? s.wake.calls != callsBefore : w.read(kFlag) == tag;
    }
    const long long t0 = steadyNs();
    w.write(kGate, tag);
    long long t1 = 0;
    if (way == kBlockingEvent || way == kSpinningEvent) {
        CHECK_DRIVER(cuEventSynchronize(s.events[way]));
        t1 = steadyNs();
    } else if (way == kHostFunction) {
        const long long deadline = t0 + std::chrono::nanoseconds(kHostTimeout).count();
        while (s.wake.calls == callsBefore && steadyNs() < deadline) {
        }
        lost = lost || s.wake.calls != callsBefore + 1;
        t1 = s.wake.ns;
    } else {
        lost = lost || !lesson24::waitForWord(w, kFlag, tag, kHostTimeout);
        t1 = steadyNs();
    }
    CHECK_DRIVER(cuStreamSynchronize(s.stream));
    lost = lost || w.read(kDone) != tag;
    early = early || (!lost && t1 <= t0);  // a wake stamped before the gate opened
    return static_cast<double>(t1 - t0) / 1e3;
}

// Step 3: a 50 ms kernel, `event` recorded behind it, cuEventSynchronize: the share of the wait
// (wall clock) that the waiting thread spent on a CPU, in percent.
double cpuShareOfWait(Setup& s, CUevent event) {
    lesson24::launchSpin(s.kernels.spin, 1, kCpuKernelNs, 0, 0, 0, s.stream);
    CHECK_DRIVER(cuEventRecord(event, s.stream));
    const long long wall0 = steadyNs();
    const long long cpu0 = threadCpuNs();
    CHECK_DRIVER(cuEventSynchronize(event));
    const long long cpu1 = threadCpuNs();
    const long long wall1 = steadyNs();
    return 100.0 * static_cast<double>(cpu1 - cpu0) / static_cast<double>(wall1 - wall0);
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    const bool bench = args.has("--bench");
    course::Verdict verdict;

    course::printStep(1, "initialise, the kernels, a stream, two events, mapped host words");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    const int driverVersion = lesson24::printDeviceAndVersions(device, ordinal);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    Setup s;
    s.kernels = lesson24::loadKernels();
    CHECK_DRIVER(cuStreamCreate(&s.stream, CU_STREAM_NON_BLOCKING));
    // No timing data is needed from these events: only their completion.
    CHECK_DRIVER(cuEventCreate(&s.events[kBlockingEvent], CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING));
    CHECK_DRIVER(cuEventCreate(&s.events[kSpinningEvent], CU_EVENT_DISABLE_TIMING));
    s.words = lesson24::allocHostWords(kWords);
    const std::string noFlag =
        lesson24::missingVersion(driverVersion, course::kMemOpsV2Version, "cuStreamWriteValue32 (v2)");

    // Step 2: every way, one round at a time. A way stops at its first failed round: a round
    // that lost its gate costs the kernel's whole 1 s timeout.
    course::printStep(2, "rounds: the host opens the gate, each way wakes a host thread");
    const int rounds = bench ? 201 : 21;
    std::printf("rounds: %d of each way (2 more, untimed, first), host steady_clock from the gate to the wake\n",
                rounds);
    unsigned int tag = 0;
    bool anyEarly = false;
    bool anyLost = false;
    std::vector<double> latencies[kWays];
    for (int way = 0; way < kWays; ++way) {
        if (way == kPolledFlag && !noFlag.empty()) {
            std::printf("section %s: SKIP (%s)\n", kWayNames[way], noFlag.c_str());
            continue;
        }
        for (int round = -2; round < rounds; ++round) {
            bool early = false;
            bool lost = false;
            const double us = oneRound(s, static_cast<Way>(way), ++tag, early, lost);
            anyEarly = anyEarly || early;
            anyLost = anyLost || lost;
            if (early || lost) break;
            if (round >= 0) latencies[way].push_back(us);
        }
    }
    verdict.check("no way signalled before the host opened the gate", !anyEarly);
    verdict.check("every kernel saw its gate and every way woke the host", !anyLost);

    // Step 3: cuda.h says a thread waiting on a CU_EVENT_BLOCKING_SYNC event will "block", on a
    // default event "busy-wait" (cuda.h:16079-16083). The check asks of the blocking wait only
    // that the thread spent under half of it on a CPU; the default one's share is printed.
    course::printStep(3, "the waiting thread's CPU time during a 50 ms wait");
    const double blockingShare = cpuShareOfWait(s, s.events[kBlockingEvent]);
    const double spinningShare = cpuShareOfWait(s, s.events[kSpinningEvent]);
    std::printf("on a CPU while waiting, CU_EVENT_BLOCKING_SYNC event: %.0f %% of the wait\n", blockingShare);
    std::printf("on a CPU while waiting, default (spinning) event: %.0f %% of the wait\n", spinningShare);
    verdict.check("the thread waiting on the CU_EVENT_BLOCKING_SYNC event left the CPU", blockingShare < 50.0);

    // Step 4: medians and the 90th percentile. Printed, never checked: they belong to this GPU,
    // this CPU and this driver, and change from run to run.
    course::printStep(4, "what each way costs, gate to wake");
    for (int way = 0; way < kWays; ++way) {
        std::vector<double>& samples = latencies[way];
        if (samples.empty()) continue;
        std::sort(samples.begin(), samples.end());
        const double median = course::median(samples);
        const double p90 = samples[samples.size() * 9 / 10];
        std::printf("%s: median %.1f us, 90th percentile %.1f us\n", kWayNames[way], median, p90);
        if (bench) std::printf("bench: gate to wake, %s = %.1f us\n", kWayNames[way], median);
    }

    course::printStep(5, "release everything, newest first");
    CHECK_DRIVER(cuMemFreeHost(s.words.host));
    CHECK_DRIVER(cuEventDestroy(s.events[kSpinningEvent]));
    CHECK_DRIVER(cuEventDestroy(s.events[kBlockingEvent]));
    CHECK_DRIVER(cuStreamDestroy(s.stream));
    CHECK_DRIVER(cuModuleUnload(s.kernels.module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: host words, events, stream, module, primary context\n");

    course::printStep(6, "check");
    return verdict.finish();
}
