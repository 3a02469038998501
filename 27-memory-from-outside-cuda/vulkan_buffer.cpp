// Lesson 27, program 1 — a Vulkan buffer and a Vulkan timeline semaphore, imported into CUDA.
//
// Vulkan allocates a buffer whose memory may be exported, exports it as an opaque file
// descriptor, and CUDA imports that descriptor (cuImportExternalMemory) and maps the memory, the
// buffer at its start, into its address space (cuExternalMemoryGetMappedBuffer). A Vulkan timeline
// semaphore goes the same way (cuImportExternalSemaphore). Then Vulkan writes the buffer, CUDA
// transforms it in place, and Vulkan copies it back to the host — three pieces of work queued at
// once, before the host waits for anything, and ordered by nothing but the semaphore's values. A
// second semaphore, a gate only the host opens, holds each side back long enough to show that the
// other one waits.
//
//   vulkan_buffer               the walkthrough
//   vulkan_buffer --device N    another GPU
#include "vulkan_device.h"

#if !LESSON27_HAVE_VULKAN
int main(int argc, char** argv) {
    return lesson27::skipWithoutVulkanHeaders(argc, argv);
}
#else

#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace {

using lesson27::Vulkan;

constexpr int kCount = 1 << 18;                             // elements of the shared buffer
constexpr VkDeviceSize kBytes = kCount * sizeof(uint32_t);  // 1 MiB
constexpr VkDeviceSize kUpdateChunk = 65536;                // the Vulkan spec's most for one vkCmdUpdateBuffer
// The exported allocation has room for the buffer twice (one allocation may hold several
// resources), unless the driver wants it dedicated. Then the allocation is larger than the buffer,
// and a mapping of the whole allocation shows whether the import took all of it (step 4).
constexpr VkDeviceSize kAllocationBytes = 2 * kBytes;
constexpr VkBufferUsageFlags kSharedUsage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;

// What Vulkan writes into element i: a multiplicative hash, so that neighbours differ and a
// misplaced or missing chunk shows. The kernel turns it into 3 * value + 7 (unsigned, wrapping).
uint32_t vulkanValue(uint32_t i) {
    return 2654435761u * (i + 1u);
}

VkBufferMemoryBarrier bufferBarrier(VkBuffer buffer, VkAccessFlags from, VkAccessFlags to, uint32_t fromFamily,
                                    uint32_t toFamily) {
    VkBufferMemoryBarrier barrier{};
    barrier.sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER;
    barrier.srcAccessMask = from;
    barrier.dstAccessMask = to;
    barrier.srcQueueFamilyIndex = fromFamily;
    barrier.dstQueueFamilyIndex = toFamily;
    barrier.buffer = buffer;
    barrier.size = VK_WHOLE_SIZE;
    return barrier;
}

// Vulkan's first batch: fill the shared buffer with transfer commands (no shader, so no SPIR-V
// to ship), then release it to VK_QUEUE_FAMILY_EXTERNAL: the buffer's contents are handed to an
// API outside this Vulkan instance, and the batch's semaphore signal comes after the release.
// vkCmdUpdateBuffer copies its data into the command buffer as it is recorded (the Vulkan
// specification), so `values` need not outlive this function.
void recordWrite(const Vulkan& vk, VkCommandBuffer commands, VkBuffer shared) {
    std::vector<uint32_t> values(kCount);
    for (uint32_t i = 0; i < kCount; ++i) values[i] = vulkanValue(i);
    lesson27::beginCommands(vk, commands);
    const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
    for (VkDeviceSize offset = 0; offset < kBytes; offset += kUpdateChunk)
        vk.vkCmdUpdateBuffer(commands, shared, offset, std::min(kUpdateChunk, kBytes - offset), bytes + offset);
    const VkBufferMemoryBarrier release =
        bufferBarrier(shared, VK_ACCESS_TRANSFER_WRITE_BIT, 0, vk.queueFamily, VK_QUEUE_FAMILY_EXTERNAL);
    vk.vkCmdPipelineBarrier(commands, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, 0, 0,
                            nullptr, 1, &release, 0, nullptr);
    CHECK_VULKAN(vk.vkEndCommandBuffer(commands));
}

// Vulkan's second batch: take the buffer back from outside (the acquire half of the transfer;
// its source stage is the one the semaphore wait holds, so it comes after the wait), copy it to
// host-visible memory, and make the copy visible to the host.
void recordReadBack(const Vulkan& vk, VkCommandBuffer commands, VkBuffer shared, VkBuffer readback) {
    lesson27::beginCommands(vk, commands);
    const VkBufferMemoryBarrier acquire =
        bufferBarrier(shared, 0, VK_ACCESS_TRANSFER_READ_BIT, VK_QUEUE_FAMILY_EXTERNAL, vk.queueFamily);
    vk.vkCmdPipelineBarrier(commands, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, nullptr, 1,
                            &acquire, 0, nullptr);
    const VkBufferCopy region{0, 0, kBytes};
    vk.vkCmdCopyBuffer(commands, shared, readback, 1, &region);
    const VkBufferMemoryBarrier toHost = bufferBarrier(readback, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT,
                                                       VK_QUEUE_FAMILY_IGNORED, VK_QUEUE_FAMILY_IGNORED);
    vk.vkCmdPipelineBarrier(commands, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 0, nullptr, 1,
                            &toHost, 0, nullptr);
    CHECK_VULKAN(vk.vkEndCommandBuffer(commands));
}

// Step 4: the whole allocation mapped from offset 0, where the buffer is bound (cuda.h:16400-16403
// recommends mapping "the combined range instead of mapping separate buffers"). What the driver does
// with a mapping larger than the import, cuda.h does not say; the driver is asked how large a range
// it mapped (cuMemGetAddressRange, which cuda.h:8713-8715 describes for cuMemAlloc's allocations
// only). Returns the pointer, or 0 (nothing left mapped) where the mapping was refused or the
// reported range does not cover the allocation.
CUdeviceptr mapWholeAllocation(CUexternalMemory external, unsigned long long bytes) {
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC whole{};  // offset 0, flags 0
    whole.size = bytes;
    CUdeviceptr mapped = 0;
    if (REPORT_DRIVER(cuExternalMemoryGetMappedBuffer(&mapped, external, &whole)) != CUDA_SUCCESS) return 0;
    CUdeviceptr base = 0;
    size_t size = 0;
    CHECK_DRIVER(cuMemGetAddressRange(&base, &size, mapped));
    std::printf("mapped into CUDA: %llu bytes from offset 0, the buffer its first %llu\n", bytes,
                static_cast<unsigned long long>(kBytes));
    std::printf("mapped range (cuMemGetAddressRange): %zu bytes, base %llu bytes below the pointer\n", size,
                static_cast<unsigned long long>(mapped - base));
    if (base <= mapped && mapped + bytes <= base + size) return mapped;
    CHECK_DRIVER(cuMemFree(mapped));
    return 0;
}

// CUDA's part, queued on `stream`: wait for Vulkan's value 1, transform, record `kernelDone`,
// wait for the host's gate to reach 2, then set the timeline to 2. A wait on a timeline semaphore
// lasts until its value is greater than or equal to the one given (cuda.h:16774-16781).
void queueCudaWork(CUstream stream, CUexternalSemaphore timeline, CUexternalSemaphore gate, CUfunction transform,
                   CUdeviceptr shared, CUdeviceptr seen, CUevent kernelDone) {
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS waitWrite{};
    waitWrite.params.fence.value = 1;
    CHECK_DRIVER(cuWaitExternalSemaphoresAsync(&timeline, &waitWrite, 1, stream));
    int count = kCount;
    void* params[] = {&shared, &seen, &count};
    CHECK_DRIVER(cuLaunchKernel(transform, (kCount + 255) / 256, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
    CHECK_DRIVER(cuEventRecord(kernelDone, stream));
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS waitGate{};
    waitGate.params.fence.value = 2;
    CHECK_DRIVER(cuWaitExternalSemaphoresAsync(&gate, &waitGate, 1, stream));
    CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS signalDone{};
    signalDone.params.fence.value = 2;
    CHECK_DRIVER(cuSignalExternalSemaphoresAsync(&timeline, &signalDone, 1, stream));
}

// What the host saw in step 7. Each side is held while the value it waits for is missing (kHold)
// and runs once the value comes (within kWaitLimit): "waited for the signal" takes both halves.
struct Gate {
    bool cudaHeld = false, kernelRan = false;      // CUDA's kernel, before and after Vulkan's signal
    bool vulkanHeld = false, readBackRan = false;  // Vulkan's read-back, before and after CUDA's signal
};

// Step 7: the host opens the gate step by step. At 1, Vulkan writes and signals timeline = 1, and
// CUDA's kernel runs; the Vulkan side is then watched from the kernel's end on. At 2, CUDA passes
// its gate and signals timeline = 2, and Vulkan reads back. Stops where a side did not run in time.
Gate openGate(const Vulkan& vk, VkSemaphore gate, CUevent kernelDone, CUstream stream, VkFence readDone) {
    const long long holdMs = lesson27::kHold.count();
    const long long limitS = lesson27::kWaitLimit.count();
    Gate seen;  // what the host saw
    seen.cudaHeld = lesson27::stillRunningAfterHold([&] { return cuEventQuery(kernelDone); });
    std::printf("CUDA's kernel %lld ms after queuing, gate at 0: %s\n", holdMs, seen.cudaHeld ? "not run" : "ran");
    lesson27::signalFromHost(vk, gate, 1);
    seen.kernelRan = lesson27::finishedInTime([&] { return cuEventQuery(kernelDone); });
    std::printf("CUDA's kernel once the gate is at 1, within %lld s: %s\n", limitS, seen.kernelRan ? "ran" : "not run");
    if (!seen.kernelRan) return seen;
    seen.vulkanHeld = lesson27::fenceUnsignalledAfterHold(vk, readDone);
    std::printf("Vulkan's read-back %lld ms after CUDA's kernel, gate at 1: %s\n", holdMs,
                seen.vulkanHeld ? "not run" : "ran");
    lesson27::signalFromHost(vk, gate, 2);
    seen.readBackRan =
        lesson27::finishedInTime([&] { return cuStreamQuery(stream); }) && lesson27::fenceSignalledInTime(vk, readDone);
    std::printf("Vulkan's read-back once the gate is at 2, within %lld s: %s\n", limitS,
                seen.readBackRan ? "ran" : "not run");
    return seen;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    // Step 1: Vulkan first, so that a machine without a Vulkan driver answers before any CUDA call.
    course::printStep(1, "Vulkan: the loader and a Vulkan 1.2 instance");
    Vulkan vk;
    std::string skip = lesson27::openInstance(vk);
    if (!skip.empty()) return lesson27::skipAndClose(vk, skip);

    course::printStep(2, "CUDA: the device, its UUID, timeline semaphore interop");
    CHECK_DRIVER(cuInit(0));
    const lesson27::CudaDevice cuda = lesson27::openCudaDevice(ordinal);
    const CUdevice device = cuda.device;
    if (!cuda.timelineInterop)
        return lesson27::skipAndClose(vk, "this CUDA device cannot import timeline semaphores");

    course::printStep(3, "Vulkan: the device with the same UUID, and one queue");
    skip = lesson27::pickDevice(vk, cuda.uuid);
    if (skip.empty()) skip = lesson27::bufferExportable(vk, kSharedUsage);
    if (!skip.empty()) return lesson27::skipAndClose(vk, skip);
    lesson27::createDevice(vk);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("vulkan_kernels.fatbin").c_str()));
    CUfunction transform = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&transform, module, "transform"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    // Step 4: CUDA imports the whole VkDeviceMemory, so the size is the allocation's, here more than
    // the buffer's bytes; then it maps all of it (mapWholeAllocation says why and how it is checked).
    course::printStep(4, "a Vulkan buffer, its memory exported as an fd, imported into CUDA");
    lesson27::ExportableMemory sharedMemory;
    const VkBuffer shared = lesson27::createExportableBuffer(vk, kBytes, kSharedUsage, kAllocationBytes, sharedMemory);
    std::printf("buffer size: %llu bytes; memory it requires (vkGetBufferMemoryRequirements2): %llu bytes\n",
                static_cast<unsigned long long>(kBytes), static_cast<unsigned long long>(sharedMemory.required));
    std::printf("allocation size: %llu bytes; dedicated: %s (driver prefers it: %s, requires it: %s)\n",
                static_cast<unsigned long long>(sharedMemory.size), sharedMemory.dedicated ? "yes" : "no",
                sharedMemory.prefersDedicated ? "yes" : "no", sharedMemory.requiresDedicated ? "yes" : "no");
    const CUexternalMemory external = lesson27::importMemory(lesson27::exportMemoryFd(vk, sharedMemory.memory),
                                                             sharedMemory.size, sharedMemory.dedicated);
    const CUdeviceptr sharedPtr = external != nullptr ? mapWholeAllocation(external, sharedMemory.size) : 0;
    course::Verdict verdict;
    verdict.check("CUDA imported the whole allocation", sharedPtr != 0);
    if (sharedPtr == 0) {  // refused or short (reported above)
        lesson27::releaseAfterRefusal(vk, external, stream, module, device, shared, VK_NULL_HANDLE,
                                      sharedMemory.memory);
        return verdict.finish();
    }
    CUdeviceptr seen = 0;
    CHECK_DRIVER(cuMemAlloc(&seen, kBytes));

    course::printStep(5, "two timeline semaphores imported into CUDA: Vulkan <-> CUDA, and the host's gate");
    const VkSemaphore timeline = lesson27::createExportableTimeline(vk);
    const VkSemaphore gate = lesson27::createExportableTimeline(vk);
    CUexternalSemaphore cuTimeline = lesson27::importTimelineSemaphore(lesson27::exportSemaphoreFd(vk, timeline));
    CUexternalSemaphore cuGate = lesson27::importTimelineSemaphore(lesson27::exportSemaphoreFd(vk, gate));
    std::printf("semaphores imported: timeline, gate (both start at 0)\n");

    course::printStep(6, "queue everything; the host waits for nothing yet");
    const VkCommandPool pool = lesson27::createCommandPool(vk);
    VkCommandBuffer commands[2] = {};
    lesson27::allocateCommandBuffers(vk, pool, 2, commands);
    lesson27::HostBuffer readback = lesson27::createHostBuffer(vk, kBytes, VK_BUFFER_USAGE_TRANSFER_DST_BIT);
    const VkFence readDone = lesson27::createFence(vk);
    recordWrite(vk, commands[0], shared);
    recordReadBack(vk, commands[1], shared, readback.buffer);
    CUevent kernelDone = nullptr;
    CHECK_DRIVER(cuEventCreate(&kernelDone, CU_EVENT_DISABLE_TIMING));
    // Waits queued before their signals (gate >= 1, gate >= 2: the host signals later). The CUDA
    // Programming Guide (4.21.2) makes that illegal for binary semaphores; for timeline ones the Vulkan
    // specification allows it, and cuda.h states no order: the wait lasts "until the value of the
    // semaphore is greater than or equal to" the one given (cuda.h:16774-16781). Step 7 checks it.
    lesson27::submit(vk, commands[0], gate, 1, timeline, 1, VK_NULL_HANDLE);
    queueCudaWork(stream, cuTimeline, cuGate, transform, sharedPtr, seen, kernelDone);
    lesson27::submit(vk, commands[1], timeline, 2, VK_NULL_HANDLE, 0, readDone);
    std::printf("Vulkan write: waits gate >= 1, signals timeline = 1\n");
    std::printf("CUDA: waits timeline >= 1, kernel, waits gate >= 2, signals timeline = 2\n");
    std::printf("Vulkan read-back: waits timeline >= 2, then the fence\n");
    // A side that did not run in time still waits: lesson27::endUnfinished says what can be released.
    const auto unfinished = [&] {
        CHECK_DRIVER(cuEventDestroy(kernelDone));
        CHECK_DRIVER(cuStreamDestroy(stream));
        return lesson27::endUnfinished(verdict, "CUDA's semaphores, mapping, memory, module; Vulkan's objects");
    };

    course::printStep(7, "open the gate step by step: each side waits for the other's value");
    const Gate opened = openGate(vk, gate, kernelDone, stream, readDone);
    verdict.check("CUDA waited for Vulkan's signal", opened.cudaHeld && opened.kernelRan);
    if (!opened.kernelRan) return unfinished();
    verdict.check("Vulkan waited for CUDA's signal", opened.vulkanHeld && opened.readBackRan);
    if (!opened.readBackRan) return unfinished();
    std::printf("timeline value at the end: %llu\n",
                static_cast<unsigned long long>(lesson27::timelineValue(vk, timeline)));

    course::printStep(8, "check every element on the host");
    std::vector<uint32_t> cudaSaw(kCount);
    CHECK_DRIVER(cuMemcpyDtoH(cudaSaw.data(), seen, kBytes));
    const auto* back = static_cast<const uint32_t*>(readback.mapped);
    int readByCuda = 0;
    int readByVulkan = 0;
    for (uint32_t i = 0; i < kCount; ++i) {
        readByCuda += cudaSaw[i] == vulkanValue(i) ? 1 : 0;
        readByVulkan += back[i] == 3u * vulkanValue(i) + 7u ? 1 : 0;
    }
    std::printf("elements CUDA read as Vulkan wrote them: %d of %d\n", readByCuda, kCount);
    std::printf("elements Vulkan read back as 3 * value + 7: %d of %d\n", readByVulkan, kCount);
    verdict.check("CUDA read what Vulkan wrote", readByCuda == kCount);
    verdict.check("Vulkan read what CUDA wrote", readByVulkan == kCount);

    // Step 9: CUDA's imports go first, then Vulkan's objects, once its device is idle. cuda.h:16835-16836:
    // a semaphore's waits and signals "must have completed before the semaphore is destroyed" (the
    // stream is done). The mapped buffer is freed with cuMemFree (cuda.h:16405); cuda.h:16483-16486:
    // once the external memory is destroyed, buffers mapped on it "must no longer be used and must be
    // explicitly freed" — it sets no order between the two; the program frees the mapping first.
    course::printStep(9, "release: CUDA's imports, then Vulkan's objects, newest first");
    CHECK_DRIVER(cuEventDestroy(kernelDone));
    CHECK_DRIVER(cuDestroyExternalSemaphore(cuGate));
    CHECK_DRIVER(cuDestroyExternalSemaphore(cuTimeline));
    CHECK_DRIVER(cuMemFree(seen));
    CHECK_DRIVER(cuMemFree(sharedPtr));
    CHECK_DRIVER(cuDestroyExternalMemory(external));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    CHECK_VULKAN(vk.vkDeviceWaitIdle(vk.device));
    vk.vkDestroyFence(vk.device, readDone, nullptr);
    lesson27::freeHostBuffer(vk, readback);
    vk.vkDestroyCommandPool(vk.device, pool, nullptr);  // frees its command buffers
    vk.vkDestroySemaphore(vk.device, gate, nullptr);
    vk.vkDestroySemaphore(vk.device, timeline, nullptr);
    vk.vkDestroyBuffer(vk.device, shared, nullptr);
    vk.vkFreeMemory(vk.device, sharedMemory.memory, nullptr);
    lesson27::closeVulkan(vk);
    std::printf(
        "released: CUDA event, semaphores, mappings, external memory, stream, module, context; "
        "Vulkan fence, buffers, pool, semaphores, memory, device, instance, loader\n");

    course::printStep(10, "check");
    return verdict.finish();
}

#endif  // LESSON27_HAVE_VULKAN
