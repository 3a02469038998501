// Lesson 05, program 4 — two streams ordered by an event, an event pair that times a copy,
// and an event the host waits on without spinning.
//
// cuStreamWaitEvent makes "all future work" of a stream wait for the work an event captured,
// and cuEventRecord captures a stream's contents "at the time of this call" (cuda.h): so the
// record comes first, the wait second. Step 3 holds stream A with a gate only the host opens
// (as async_copies does) and checks, without a clock, that stream B waits for it and that A's
// memset has not run. Step 4 times a copy between two events and checks only what cannot vary;
// step 5 waits on an event created with CU_EVENT_BLOCKING_SYNC.
//
//   streams_and_events [--device N]
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "pcie_link.h"

namespace {

constexpr size_t kBytes = size_t{64} << 20;
constexpr size_t kWords = kBytes / sizeof(std::uint32_t);
constexpr std::uint32_t kValue = 0x600dcafe;     // step 3's memset
constexpr std::uint32_t kUploaded = 0x5ca1ab1e;  // step 4's upload, which step 5 downloads
// cuda.h: elapsed times have "a resolution of around 0.5 microseconds" (as bandwidth allows for).
constexpr double kEventResolutionMs = 0.5e-3;

// cuStreamGetFlags gives "a logical 'OR' of all flags that were used while creating this
// stream" (cuda.h): whether `stream` was made with CU_STREAM_NON_BLOCKING.
bool isNonBlocking(CUstream stream, const char* name) {
    unsigned int flags = 0;
    CHECK_DRIVER(cuStreamGetFlags(stream, &flags));
    const bool nonBlocking = (flags & CU_STREAM_NON_BLOCKING) != 0;
    std::printf("cuStreamGetFlags(%s): 0x%x (%s)\n", name, flags, nonBlocking ? "NON_BLOCKING" : "not NON_BLOCKING");
    return nonBlocking;
}

// Asks cuStreamQuery about `stream` every millisecond for `milliseconds`, and stops at the first
// answer other than CUDA_ERROR_NOT_READY (which is an answer, not a failure).
CUresult queryFor(CUstream stream, int milliseconds) {
    CUresult state = CUDA_ERROR_NOT_READY;
    const auto watchUntil = std::chrono::steady_clock::now() + std::chrono::milliseconds(milliseconds);
    while (state == CUDA_ERROR_NOT_READY && std::chrono::steady_clock::now() < watchUntil) {
        state = cuStreamQuery(stream);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return state;
}

// Counts the words of a pinned buffer of kBytes that hold `value`, prints "LABEL 0x...: N of M"
// and checks that all of them do.
void checkEveryWord(course::Verdict& verdict, const char* check, const char* label, const void* buffer,
                    std::uint32_t value) {
    const auto* words = static_cast<const std::uint32_t*>(buffer);
    const auto matching = std::count(words, words + kWords, value);
    std::printf("%s 0x%08x: %td of %zu\n", label, value, matching, kWords);
    verdict.check(check, static_cast<size_t>(matching) == kWords);
}

// Step 3's probe: a copy of the buffer on a stream that waits for neither A nor B must find
// step 2's zeros while A is held. The host waits for it 1 s at most, not without a limit: cuda.h
// promises no two streams run side by side (hardware connections "could cause a dependency", it
// says of green contexts).
void checkBufferUntouched(course::Verdict& verdict, CUstream probe, CUdeviceptr deviceBuffer, void* probeHost) {
    CHECK_DRIVER(cuMemcpyDtoHAsync(probeHost, deviceBuffer, kBytes, probe));
    if (const CUresult probed = queryFor(probe, 1000); probed == CUDA_SUCCESS)
        checkEveryWord(verdict, "buffer still zero while A is held", "words the probe read while A is held that hold",
                       probeHost, 0u);
    else
        std::printf("section probe: SKIP (cuStreamQuery(probe) after 1 s: %s)\n", course::driverErrorName(probed));
}

// Step 4's bound: no copy outruns the PCIe link at its best (max_link_*, read from sysfs as
// bandwidth reads it), so kBytes take at least kBytes / the link's rate; the event time is taken
// 0.5 us longer for the timer's resolution. Where the GPU is integrated or reaches host memory
// through the host's page tables, a copy need not cross that link: no bound, the section is skipped.
void checkUploadAgainstLink(course::Verdict& verdict, CUdevice device, float eventMs) {
    int integrated = 0;
    int hostPageTables = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&hostPageTables, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
                                      device));
    char busId[32] = {};
    CHECK_DRIVER(cuDeviceGetPCIBusId(busId, sizeof(busId), device));
    const pcie::Link link = pcie::readLink("/sys", busId, "max");
    const bool discretePcie = integrated == 0 && hostPageTables == 0;
    if (!discretePcie || !link.known) {
        std::printf("section upload vs link: SKIP (%s)\n",
                    discretePcie ? link.reason.c_str() : "integrated GPU or host page tables: not over this link");
        return;
    }
    const double shortestMs = static_cast<double>(kBytes) / (link.gigabytesPerSecond * 1e9) * 1e3;
    std::printf("PCIe link at most (max_link_*): %.2f GB/s per direction, so %zu MiB take at least %.3f ms\n",
                link.gigabytesPerSecond, kBytes >> 20, shortestMs);
    verdict.check("upload, with the timer's resolution allowed for, within the link's theoretical maximum",
                  eventMs + kEventResolutionMs >= shortestMs);
}

// `ready`, recorded and complete in step 3, keeps no time. cuda.h: "If either event was created
// with the ::CU_EVENT_DISABLE_TIMING flag, then this function will return
// ::CUDA_ERROR_INVALID_HANDLE." The error is provoked on purpose; `stop` is a complete timed event.
void checkReadyKeepsNoTime(course::Verdict& verdict, CUevent ready, CUevent stop) {
    float readyMs = 0.0f;
    const CUresult untimed = REPORT_DRIVER(cuEventElapsedTime(&readyMs, ready, stop));
    std::printf("cuEventElapsedTime(ready, stop): %s\n", course::driverErrorName(untimed));
    verdict.check("ready keeps no timestamp", untimed == CUDA_ERROR_INVALID_HANDLE);
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    // Step 1: the primary context (lesson 04), three streams and five events. Non-blocking streams
    // "perform no implicit synchronization with stream 0" (cuda.h): only the events order A and B.
    // cuda.h: events with CU_EVENT_DISABLE_TIMING (and without BLOCKING_SYNC) "provide the best
    // performance" with cuStreamWaitEvent and cuEventQuery; the ordering events need no timestamps.
    course::printStep(1, "three streams and five events");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUstream streamA = nullptr;
    CUstream streamB = nullptr;
    CUstream probe = nullptr;  // only looks at the buffer in step 3
    CHECK_DRIVER(cuStreamCreate(&streamA, CU_STREAM_NON_BLOCKING));
    CHECK_DRIVER(cuStreamCreate(&streamB, CU_STREAM_NON_BLOCKING));
    CHECK_DRIVER(cuStreamCreate(&probe, CU_STREAM_NON_BLOCKING));
    const bool aNonBlocking = isNonBlocking(streamA, "A");
    const bool bNonBlocking = isNonBlocking(streamB, "B");
    verdict.check("streams A and B are non-blocking", aNonBlocking && bNonBlocking);
    CUevent ready = nullptr;
    CUevent done = nullptr;
    CUevent start = nullptr;
    CUevent stop = nullptr;
    CUevent blocking = nullptr;
    CHECK_DRIVER(cuEventCreate(&ready, CU_EVENT_DISABLE_TIMING));
    CHECK_DRIVER(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    CHECK_DRIVER(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuEventCreate(&blocking, CU_EVENT_BLOCKING_SYNC));
    std::printf("events: ready and done (DISABLE_TIMING), start and stop (DEFAULT), blocking (BLOCKING_SYNC)\n");

    // Step 2: a device buffer set to zero (cuMemsetD32 takes no stream, and nothing orders the
    // non-blocking streams after it: cuCtxSynchronize "Blocks until the current context has
    // completed all preceding requested tasks", cuda.h), two pinned buffers (for B and for the
    // probe) and one mapped pinned word: the gate that holds stream A until the host writes 1 into it.
    course::printStep(2, "device, pinned and gate buffers");
    CUdeviceptr deviceBuffer = 0;
    CHECK_DRIVER(cuMemAlloc(&deviceBuffer, kBytes));
    CHECK_DRIVER(cuMemsetD32(deviceBuffer, 0, kWords));
    CHECK_DRIVER(cuCtxSynchronize());
    void* pinnedHost = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&pinnedHost, kBytes));
    auto* pinned = static_cast<std::uint32_t*>(pinnedHost);
    std::fill(pinned, pinned + kWords, 0u);
    void* probeHost = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&probeHost, kBytes));
    void* gateHost = nullptr;
    CHECK_DRIVER(cuMemHostAlloc(&gateHost, sizeof(std::uint32_t), CU_MEMHOSTALLOC_DEVICEMAP));
    auto* gate = static_cast<std::uint32_t*>(gateHost);
    std::atomic_ref<std::uint32_t>(*gate).store(0);
    CUdeviceptr gateDevice = 0;
    CHECK_DRIVER(cuMemHostGetDevicePointer(&gateDevice, gateHost, 0));
    std::printf("device buffer (all zero), two pinned buffers: %zu bytes each; gate: one mapped pinned word\n", kBytes);

    // Step 3: A (held) sets the buffer and records `ready`; B waits for `ready`, copies the
    // buffer to the host and records `done`. Whatever B's copy takes, B must stay NOT_READY as long as A is held:
    // the host watches it for 50 ms (on the H200 this lesson was captured on, B's copy ran and finished within it when the wait was missing). Then the
    // probe stream, which waits for neither, finds the buffer as step 2 left it: A's memset is
    // still behind the gate. While A is held the host makes no call that waits for A or B: it would never return.
    course::printStep(3, "stream B waits for an event recorded on stream A");
    const CUresult held = REPORT_DRIVER(cuStreamWaitValue32(streamA, gateDevice, 1, CU_STREAM_WAIT_VALUE_EQ));
    if (held == CUDA_SUCCESS) {
        CHECK_DRIVER(cuMemsetD32Async(deviceBuffer, kValue, kWords, streamA));
        CHECK_DRIVER(cuEventRecord(ready, streamA));         // captures A's work so far: gate and memset
        CHECK_DRIVER(cuStreamWaitEvent(streamB, ready, 0));  // after the record, never before
        CHECK_DRIVER(cuMemcpyDtoHAsync(pinnedHost, deviceBuffer, kBytes, streamB));
        CHECK_DRIVER(cuEventRecord(done, streamB));
        const CUresult stateB = queryFor(streamB, 50);
        std::printf("cuStreamQuery(B) while A is held, watched for 50 ms: %s\n", course::driverErrorName(stateB));
        verdict.check("stream B waits for A's event", stateB == CUDA_ERROR_NOT_READY);
        checkBufferUntouched(verdict, probe, deviceBuffer, probeHost);
        std::atomic_ref<std::uint32_t>(*gate).store(1);  // open the gate: A runs, then B
        CHECK_DRIVER(cuEventSynchronize(done));
        checkEveryWord(verdict, "B's copy reads A's memset", "words B copied back that hold A's value", pinned, kValue);
    } else {
        std::printf("section held stream: SKIP (cuStreamWaitValue32 on host memory: %s)\n",
                    course::driverErrorName(held));
    }

    // Step 4: two events around one upload of a new value on stream A, and the host's clock
    // around the same span. cuda.h: the time "may be greater than expected" (other work may run
    // between the events), so only what cannot vary is checked: it is positive, it fits inside
    // the host's span (from before the first record to after the wait for the second), and it
    // is no shorter than the PCIe link allows.
    course::printStep(4, "timing a copy with two events");
    std::fill(pinned, pinned + kWords, kUploaded);
    const auto before = std::chrono::steady_clock::now();
    CHECK_DRIVER(cuEventRecord(start, streamA));
    CHECK_DRIVER(cuMemcpyHtoDAsync(deviceBuffer, pinnedHost, kBytes, streamA));
    CHECK_DRIVER(cuEventRecord(stop, streamA));
    CHECK_DRIVER(cuEventSynchronize(stop));
    const auto after = std::chrono::steady_clock::now();
    float eventMs = 0.0f;
    CHECK_DRIVER(cuEventElapsedTime(&eventMs, start, stop));
    const double hostMs = std::chrono::duration<double, std::milli>(after - before).count();
    std::printf("upload of %zu MiB between the events: %.3f ms (%.2f GB/s)\n", kBytes >> 20, eventMs,
                eventMs > 0.0f ? static_cast<double>(kBytes) / 1e9 / (eventMs * 1e-3) : 0.0);
    std::printf("host clock from before the first record to after cuEventSynchronize: %.3f ms\n", hostMs);
    verdict.check("event time is positive", eventMs > 0.0f);
    verdict.check("event time within the host clock around it", eventMs <= hostMs + kEventResolutionMs);
    checkUploadAgainstLink(verdict, device, eventMs);
    if (held == CUDA_SUCCESS) checkReadyKeepsNoTime(verdict, ready, stop);

    // Step 5: an event created with CU_EVENT_BLOCKING_SYNC behind a download (on B, into the
    // cleared pinned buffer) of step 4's upload. cuda.h: cuEventSynchronize on it makes "the calling
    // CPU thread to block until the event has been completed by the device"; without the flag it
    // "will busy-wait". Either way, on return all of B's work that it captured is done.
    course::printStep(5, "a blocking wait on an event");
    std::fill(pinned, pinned + kWords, 0u);
    CHECK_DRIVER(cuMemcpyDtoHAsync(pinnedHost, deviceBuffer, kBytes, streamB));
    CHECK_DRIVER(cuEventRecord(blocking, streamB));
    CHECK_DRIVER(cuEventSynchronize(blocking));
    const CUresult afterWait = cuEventQuery(blocking);
    const CUresult streamBAfterWait = cuStreamQuery(streamB);
    std::printf("cuEventQuery(blocking) after cuEventSynchronize: %s\n", course::driverErrorName(afterWait));
    std::printf("cuStreamQuery(B) after cuEventSynchronize: %s\n", course::driverErrorName(streamBAfterWait));
    verdict.check("blocking event complete after cuEventSynchronize", afterWait == CUDA_SUCCESS);
    verdict.check("stream B has nothing left once the blocking event completed", streamBAfterWait == CUDA_SUCCESS);
    checkEveryWord(verdict, "download returns the timed upload", "words downloaded that hold the uploaded value",
                   pinnedHost, kUploaded);

    // Step 6: give everything back, newest first, once nothing queued can still use it (after
    // a failed check some copy may still be running).
    course::printStep(6, "release everything, newest first");
    CHECK_DRIVER(cuCtxSynchronize());
    CHECK_DRIVER(cuMemFreeHost(gateHost));
    CHECK_DRIVER(cuMemFreeHost(probeHost));
    CHECK_DRIVER(cuMemFreeHost(pinnedHost));
    CHECK_DRIVER(cuMemFree(deviceBuffer));
    CHECK_DRIVER(cuEventDestroy(blocking));
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    CHECK_DRIVER(cuEventDestroy(done));
    CHECK_DRIVER(cuEventDestroy(ready));
    CHECK_DRIVER(cuStreamDestroy(probe));
    CHECK_DRIVER(cuStreamDestroy(streamB));
    CHECK_DRIVER(cuStreamDestroy(streamA));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context: released\n");
    return verdict.finish();
}
