// Lesson 05, program 3 — asynchronous copies on a stream, and what "Async" means for
// pinned and for pageable memory.
//
// With pinned memory a cu...Async copy only queues a DMA and returns; the host must not
// touch the buffers until the stream says the copy is done. With pageable memory the
// copy engine cannot reach the pages, so the driver copies through pinned staging
// memory of its own, with the CPU, and the call blocks for about the whole copy. The
// program times each call on the host and each copy on the GPU, and prints next to
// each what the CUDA reference ("API synchronization behavior") documents for it.
//
//   async_copies [--device N]
#include <cuda.h>

#include <chrono>
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

    // Step 1: the primary context (lesson 04), and a stream of our own. NON_BLOCKING: it
    // does not wait for the legacy default stream.
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
    std::printf("stream: CU_STREAM_NON_BLOCKING; events: CU_EVENT_DEFAULT (they time the GPU's side)\n");

    // Step 2: buffers. Write-combined for the upload (the CPU only writes it, in one
    // pass), plain pinned for the download, pageable vectors for comparison.
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

    // Step 4: how long does the host wait inside each call? The host clock times the call,
    // the events time the copy on the GPU. The "documented" line is what the reference
    // promises; the measurement shows what this driver did.
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
         "may be synchronous: the source is staged through pinned memory, and may be reused once the call "
         "returns"},
        {"cuMemcpyDtoHAsync to pinned memory", false, pinned,
         "fully asynchronous: do not read the destination until the stream says the copy is done"},
        {"cuMemcpyDtoHAsync to pageable memory", false, back.data(),
         "may be synchronous: a download to pageable memory returns when the copy is done"},
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
        float gpuMilliseconds = 0.0f;
        CHECK_DRIVER(cuEventElapsedTime(&gpuMilliseconds, start, stop));
        const double hostMilliseconds = std::chrono::duration<double, std::milli>(returned - before).count();
        std::printf("%s: the call returned after %.3f ms; the copy took %.3f ms on the GPU\n", call.what,
                    hostMilliseconds, gpuMilliseconds);
        std::printf("  documented: %s\n", call.documented);
    }
    // The device buffer holds `source` (every upload sent it), so the last download must too.
    const bool pageableDownload = back == source;
    std::printf("download to pageable memory: %s\n", pageableDownload ? "equal to the source" : "DIFFERENT");

    // Step 5: give everything back, newest first.
    course::printStep(5, "release everything, newest first");
    CHECK_DRIVER(cuMemFreeHost(pinned));
    CHECK_DRIVER(cuMemFreeHost(writeCombined));
    CHECK_DRIVER(cuMemFree(deviceBuffer));
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context: released\n");
    const bool pass = asyncRoundTrip && pageableDownload;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
