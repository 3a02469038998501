// Lesson 05, program 3 — asynchronous copies on a stream, and what "Async" means for
// pinned and for pageable memory.
//
// With pinned memory a cu...Async copy only queues a DMA and returns; the host must not
// touch the buffers until the stream says the copy is done. With pageable memory the
// copy engine cannot reach the pages: the reference says only that the call "might be
// synchronous with respect to host", and that where the data must first be staged to
// pinned memory the driver may synchronize with the stream and stage it. The program
// times each call and prints what this driver did (observations, not checks), then
// checks the pinned promise without a clock: a download queued behind a held stream has
// not run when its call returns.
//
//   async_copies [--device N]
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    constexpr size_t kBytes = size_t{4} << 20;
    course::Verdict verdict;

    // Step 1: the primary context (lesson 04), and a stream of our own. NON_BLOCKING: it
    // does not wait for the legacy default stream, nor that stream for it.
    course::printStep(1, "a stream and two events");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUevent start = nullptr;
    CUevent stop = nullptr;
    CHECK_DRIVER(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    std::printf("stream: CU_STREAM_NON_BLOCKING; events: CU_EVENT_DEFAULT (the time between them on the stream)\n");

    // Step 2: buffers. Write-combined for the upload (the CPU only writes it, in one
    // pass), plain pinned for the download, pageable vectors for comparison, and one
    // mapped pinned word that step 5 uses to hold the stream.
    course::printStep(2, "device, pinned and pageable buffers");
    CUdeviceptr deviceBuffer = 0;
    CHECK_DRIVER(cuMemAlloc(&deviceBuffer, kBytes));
    void* writeCombined = nullptr;
    CHECK_DRIVER(cuMemHostAlloc(&writeCombined, kBytes, CU_MEMHOSTALLOC_WRITECOMBINED));
    void* pinned = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&pinned, kBytes));
    std::vector<unsigned char> source(kBytes);
    std::vector<unsigned char> back(kBytes, 0);
    for (size_t i = 0; i < kBytes; ++i) source[i] = static_cast<unsigned char>((i * 2654435761u) >> 24);
    void* gateHost = nullptr;
    CHECK_DRIVER(cuMemHostAlloc(&gateHost, sizeof(std::uint32_t), CU_MEMHOSTALLOC_DEVICEMAP));
    auto* gate = static_cast<std::uint32_t*>(gateHost);
    CUdeviceptr gateDevice = 0;
    CHECK_DRIVER(cuMemHostGetDevicePointer(&gateDevice, gateHost, 0));
    std::printf("device buffer, write-combined and pinned host buffers, two pageable vectors: %zu bytes each\n",
                kBytes);

    // Step 3: both calls only queue work: `pinned` holds the data once the stream is done,
    // and not one moment before.
    course::printStep(3, "an asynchronous round trip through pinned memory");
    std::memcpy(writeCombined, source.data(), kBytes);
    CHECK_DRIVER(cuMemcpyHtoDAsync(deviceBuffer, writeCombined, kBytes, stream));
    CHECK_DRIVER(cuMemcpyDtoHAsync(pinned, deviceBuffer, kBytes, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const bool asyncRoundTrip = std::memcmp(pinned, source.data(), kBytes) == 0;
    std::printf("async round trip write-combined -> device -> pinned: %s (%zu bytes)\n",
                asyncRoundTrip ? "equal" : "DIFFERENT", kBytes);
    verdict.check("round trip through pinned memory returns the source", asyncRoundTrip);

    // Step 4: how long does the host wait inside each call? Observations, printed, never
    // compared. The host clock times the call. The events give the time between the stream
    // reaching `start` and reaching `stop`: that includes whatever held the stream in
    // between, not only the DMA: the host still submitting the copy after `start` (a large
    // share for a small copy) and, for pageable memory, the staging through pinned memory,
    // so a pageable "between the events" can come close to the time the call blocked.
    course::printStep(4, "how long each call blocks the host");
    const struct {
        const char* what;
        bool upload;
        void* host;
        const char* documented;
    } timedCalls[] = {
        {"cuMemcpyHtoDAsync from pinned memory", true, pinned,
         "fully asynchronous: do not write the source until the stream says the copy is done"},
        {"cuMemcpyHtoDAsync from pageable memory", true, source.data(),
         "might be synchronous: where the data must be staged to pinned memory, the driver may synchronize "
         "with the stream"},
        {"cuMemcpyDtoHAsync to pinned memory", false, pinned,
         "fully asynchronous: do not read the destination until the stream says the copy is done"},
        {"cuMemcpyDtoHAsync to pageable memory", false, back.data(),
         "might be synchronous: where the data must be staged to pinned memory, the driver may synchronize "
         "with the stream"},
    };
    for (const auto& call : timedCalls) {
        CHECK_DRIVER(cuEventRecord(start, stream));
        const auto before = std::chrono::steady_clock::now();
        if (call.upload)
            CHECK_DRIVER(cuMemcpyHtoDAsync(deviceBuffer, call.host, kBytes, stream));
        else
            CHECK_DRIVER(cuMemcpyDtoHAsync(call.host, deviceBuffer, kBytes, stream));
        const auto returned = std::chrono::steady_clock::now();
        CHECK_DRIVER(cuEventRecord(stop, stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
        float eventMilliseconds = 0.0f;
        CHECK_DRIVER(cuEventElapsedTime(&eventMilliseconds, start, stop));
        const double hostMilliseconds = std::chrono::duration<double, std::milli>(returned - before).count();
        std::printf("%s: the call returned after %.3f ms; %.3f ms between the events on the stream\n", call.what,
                    hostMilliseconds, eventMilliseconds);
        std::printf("  documented: %s\n", call.documented);
    }
    // The device buffer holds `source` (every upload sent it), so the last download, read
    // after its cuStreamSynchronize, must too.
    const bool pageableDownload = back == source;
    std::printf("download to pageable memory: %s\n", pageableDownload ? "equal to the source" : "DIFFERENT");
    verdict.check("pageable download returns the source", pageableDownload);

    // Step 5: the promise for pinned memory, checked without a clock. cuStreamWaitValue32
    // holds the stream until the word `gate` reads 1; only the host writes it, after
    // looking. So the copy queued behind it cannot have run when its call returns, and
    // the destination must still hold the zeros written before. (While the stream is held
    // the host makes no call that could wait for it: that would never return.)
    course::printStep(5, "a held stream: the pinned call returns before its copy runs");
    std::atomic_ref<std::uint32_t>(*gate).store(0);
    std::memset(pinned, 0, kBytes);
    if (const CUresult held = REPORT_DRIVER(cuStreamWaitValue32(stream, gateDevice, 1, CU_STREAM_WAIT_VALUE_EQ));
        held == CUDA_SUCCESS) {
        CHECK_DRIVER(cuMemcpyDtoHAsync(pinned, deviceBuffer, kBytes, stream));
        const CUresult state = cuStreamQuery(stream);  // CUDA_ERROR_NOT_READY is an answer, not a failure
        const auto* landed = static_cast<const unsigned char*>(pinned);
        const bool untouched = std::all_of(landed, landed + kBytes, [](unsigned char b) { return b == 0; });
        std::printf("cuStreamQuery right after the call: %s\n", course::driverErrorName(state));
        std::printf("pinned destination while the stream is held: %s\n",
                    untouched ? "still all zero" : "ALREADY WRITTEN");
        verdict.check("pinned download not run when its call returns", state == CUDA_ERROR_NOT_READY && untouched);
        std::atomic_ref<std::uint32_t>(*gate).store(1);  // release the stream
        CHECK_DRIVER(cuStreamSynchronize(stream));
        const bool arrived = std::memcmp(pinned, source.data(), kBytes) == 0;
        std::printf("pinned destination after cuStreamSynchronize: %s\n",
                    arrived ? "equal to the source" : "DIFFERENT");
        verdict.check("pinned download lands once the stream runs", arrived);
    } else {
        std::printf("section held stream: SKIP (cuStreamWaitValue32 on host memory: %s)\n",
                    course::driverErrorName(held));
    }

    // Step 6: give everything back, newest first. cuMemGetInfo would show device memory
    // only; for a destroyed stream or event there is no query at all (the handle is
    // invalid after destroy), so what is checked here is that every call succeeded.
    course::printStep(6, "release everything, newest first");
    CHECK_DRIVER(cuMemFreeHost(gateHost));
    CHECK_DRIVER(cuMemFreeHost(pinned));
    CHECK_DRIVER(cuMemFreeHost(writeCombined));
    CHECK_DRIVER(cuMemFree(deviceBuffer));
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context: released\n");
    return verdict.finish();
}
