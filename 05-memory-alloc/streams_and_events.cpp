// Lesson 05, program 4 — two streams ordered by an event, an event pair that times a copy,
// and an event the host waits on without spinning.
//
// cuStreamWaitEvent makes "all future work" of a stream wait for the work an event captured,
// and cuEventRecord captures a stream's contents "at the time of this call" (cuda.h): so the
// record comes first, the wait second. Step 3 holds stream A with a gate only the host opens
// (as async_copies does) and checks, without a clock, that stream B waits for it. Step 4 times
// a copy between two events and checks only what cannot vary; step 5 waits on an event created
// with CU_EVENT_BLOCKING_SYNC.
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

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    constexpr size_t kBytes = size_t{64} << 20;
    constexpr size_t kWords = kBytes / sizeof(std::uint32_t);
    constexpr std::uint32_t kValue = 0x600dcafe;
    // cuda.h: elapsed times have "a resolution of around 0.5 microseconds" (as bandwidth allows for).
    constexpr double kEventResolutionMs = 0.5e-3;
    course::Verdict verdict;

    // Step 1: the primary context (lesson 04), two streams and five events. The ordering events
    // need no timestamps: cuda.h says events with CU_EVENT_DISABLE_TIMING (and without
    // BLOCKING_SYNC) "provide the best performance" with cuStreamWaitEvent and cuEventQuery.
    course::printStep(1, "two streams and five events");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUstream streamA = nullptr;
    CUstream streamB = nullptr;
    CHECK_DRIVER(cuStreamCreate(&streamA, CU_STREAM_NON_BLOCKING));
    CHECK_DRIVER(cuStreamCreate(&streamB, CU_STREAM_NON_BLOCKING));
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
    std::printf("streams A and B: CU_STREAM_NON_BLOCKING\n");
    std::printf("events: ready and done (DISABLE_TIMING), start and stop (DEFAULT), blocking (BLOCKING_SYNC)\n");

    // Step 2: a device buffer set to zero now, a pinned buffer, and one mapped pinned word:
    // the gate that holds stream A until the host writes 1 into it.
    course::printStep(2, "device, pinned and gate buffers");
    CUdeviceptr deviceBuffer = 0;
    CHECK_DRIVER(cuMemAlloc(&deviceBuffer, kBytes));
    CHECK_DRIVER(cuMemsetD32(deviceBuffer, 0, kWords));
    void* pinnedHost = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&pinnedHost, kBytes));
    auto* pinned = static_cast<std::uint32_t*>(pinnedHost);
    std::fill(pinned, pinned + kWords, 0u);
    void* gateHost = nullptr;
    CHECK_DRIVER(cuMemHostAlloc(&gateHost, sizeof(std::uint32_t), CU_MEMHOSTALLOC_DEVICEMAP));
    auto* gate = static_cast<std::uint32_t*>(gateHost);
    std::atomic_ref<std::uint32_t>(*gate).store(0);
    CUdeviceptr gateDevice = 0;
    CHECK_DRIVER(cuMemHostGetDevicePointer(&gateDevice, gateHost, 0));
    std::printf("device buffer (all zero) and pinned buffer: %zu bytes each; gate: one mapped pinned word\n", kBytes);

    // Step 3: A (held) sets the buffer and records `ready`; B waits for `ready`, copies the
    // buffer to the host and records `done`. Whatever B's copy takes, B must stay NOT_READY as long as A is held:
    // the host watches it for 50 ms (a mistake shows at once: B's copy runs and finishes).
    // While A is held the host makes no call that waits for A or B: it would never return.
    course::printStep(3, "stream B waits for an event recorded on stream A");
    if (const CUresult held = REPORT_DRIVER(cuStreamWaitValue32(streamA, gateDevice, 1, CU_STREAM_WAIT_VALUE_EQ));
        held == CUDA_SUCCESS) {
        CHECK_DRIVER(cuMemsetD32Async(deviceBuffer, kValue, kWords, streamA));
        CHECK_DRIVER(cuEventRecord(ready, streamA));         // captures A's work so far: gate and memset
        CHECK_DRIVER(cuStreamWaitEvent(streamB, ready, 0));  // after the record, never before
        CHECK_DRIVER(cuMemcpyDtoHAsync(pinnedHost, deviceBuffer, kBytes, streamB));
        CHECK_DRIVER(cuEventRecord(done, streamB));
        CUresult stateB = CUDA_ERROR_NOT_READY;
        const auto watchUntil = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
        while (stateB == CUDA_ERROR_NOT_READY && std::chrono::steady_clock::now() < watchUntil) {
            stateB = cuStreamQuery(streamB);  // CUDA_ERROR_NOT_READY is an answer, not a failure
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::printf("cuStreamQuery(B) while A is held, watched for 50 ms: %s\n", course::driverErrorName(stateB));
        verdict.check("stream B waits for A's event", stateB == CUDA_ERROR_NOT_READY);
        std::atomic_ref<std::uint32_t>(*gate).store(1);  // open the gate: A runs, then B
        CHECK_DRIVER(cuEventSynchronize(done));
        const auto set = std::count(pinned, pinned + kWords, kValue);
        std::printf("words B copied back that hold A's value 0x%08x: %td of %zu\n", kValue, set, kWords);
        verdict.check("B's copy reads A's memset", static_cast<size_t>(set) == kWords);
    } else {
        std::printf("section held stream: SKIP (cuStreamWaitValue32 on host memory: %s)\n",
                    course::driverErrorName(held));
    }

    // Step 4: two events around one upload on stream A, and the host's clock around the same
    // span. cuda.h: the time "may be greater than expected" (other work may run between the
    // events), so only what cannot vary is checked: it is positive, and it fits inside the
    // host's span, which begins before the first record and ends after the wait for the second.
    course::printStep(4, "timing a copy with two events");
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

    // Step 5: an event created with CU_EVENT_BLOCKING_SYNC. cuda.h: cuEventSynchronize on it
    // makes "the calling CPU thread to block until the event has been completed by the device";
    // without the flag the thread "will busy-wait". Either way, when it returns the captured
    // work is done, and cuEventQuery says so.
    course::printStep(5, "a blocking wait on an event");
    CHECK_DRIVER(cuMemcpyDtoHAsync(pinnedHost, deviceBuffer, kBytes, streamB));
    CHECK_DRIVER(cuEventRecord(blocking, streamB));
    CHECK_DRIVER(cuEventSynchronize(blocking));
    const CUresult afterWait = cuEventQuery(blocking);
    std::printf("cuEventQuery(blocking) after cuEventSynchronize: %s\n", course::driverErrorName(afterWait));
    verdict.check("blocking event complete after cuEventSynchronize", afterWait == CUDA_SUCCESS);

    // Step 6: give everything back, newest first, once nothing queued can still use it (after
    // a failed check some copy may still be running).
    course::printStep(6, "release everything, newest first");
    CHECK_DRIVER(cuCtxSynchronize());
    CHECK_DRIVER(cuMemFreeHost(gateHost));
    CHECK_DRIVER(cuMemFreeHost(pinnedHost));
    CHECK_DRIVER(cuMemFree(deviceBuffer));
    CHECK_DRIVER(cuEventDestroy(blocking));
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    CHECK_DRIVER(cuEventDestroy(done));
    CHECK_DRIVER(cuEventDestroy(ready));
    CHECK_DRIVER(cuStreamDestroy(streamB));
    CHECK_DRIVER(cuStreamDestroy(streamA));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context: released\n");
    return verdict.finish();
}
