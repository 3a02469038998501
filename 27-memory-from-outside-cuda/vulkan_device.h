// vulkan_device.h — lesson 27's Vulkan side, shared by vulkan_buffer and vulkan_image_and_graph:
// the loader opened at run time, a Vulkan 1.2 instance, the physical device that is the CUDA
// device (the same UUID), a logical device with one queue, and the exportable objects (memory
// and timeline semaphores) whose file descriptors the programs hand to CUDA.
//
// Vulkan is optional in this course. Its headers come from libvulkan-dev; the Makefile adds
// -DCOURSE_NO_VULKAN where they are missing (common/tools/setup.sh), and __has_include catches a
// build outside the course. Such a build still makes every program, which then says what to
// install, before any driver call. The loader (libvulkan.so.1, package libvulkan1) is opened
// with dlopen, not linked, so that a machine without it also gets that answer instead of a
// program that cannot start; every Vulkan function comes through vkGetInstanceProcAddr and
// vkGetDeviceProcAddr (VK_NO_PROTOTYPES: no function of vulkan.h is declared, none linked).
#pragma once

#if __has_include(<vulkan/vulkan.h>) && !defined(COURSE_NO_VULKAN)
#define LESSON27_HAVE_VULKAN 1
#else
#define LESSON27_HAVE_VULKAN 0
#endif

#include <cuda.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace lesson27 {

// The whole program in a build without the Vulkan headers: check the command line like the
// real program, then exit 77 ("not applicable here") with what to install.
inline int skipWithoutVulkanHeaders(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    std::printf("Result = SKIP (Vulkan headers were not found at build time: apt-get install libvulkan-dev)\n");
    return course::kExitNotApplicable;
}

// A UUID in nvidia-smi's form, GPU-8-4-4-4-12 hex digits (CUDA's CUuuid and Vulkan's deviceUUID
// are both 16 bytes).
inline std::string uuidText(const unsigned char* b) {
    char text[64];
    std::snprintf(text, sizeof(text), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                  b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return text;
}

// Step 2 of both Vulkan programs, after their cuInit: the device, its name and UUID (which step 3
// looks for among the Vulkan devices), and whether it can import timeline semaphores at all.
struct CudaDevice {
    CUdevice device = 0;
    CUuuid uuid{};
    bool timelineInterop = false;
};
inline CudaDevice openCudaDevice(int ordinal) {
    CudaDevice cuda;
    CHECK_DRIVER(cuDeviceGet(&cuda.device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), cuda.device));
    CHECK_DRIVER(cuDeviceGetUuid(&cuda.uuid, cuda.device));
    int interop = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&interop, CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED, cuda.device));
    cuda.timelineInterop = interop != 0;
    std::printf("CUDA device %d name: %s\n", ordinal, name);
    std::printf("CUDA device %d UUID: %s\n", ordinal,
                uuidText(reinterpret_cast<const unsigned char*>(cuda.uuid.bytes)).c_str());
    std::printf("timeline semaphore interop: %s\n", cuda.timelineInterop ? "yes" : "no");
    return cuda;
}

// Imports an opaque fd of Vulkan memory into CUDA and prints the size it passes. `size` should be
// the size of the whole VkDeviceMemory (CUDA_EXTERNAL_MEMORY_HANDLE_DESC::size, "Size of the
// memory allocation", cuda.h:3839), which may be more than the buffer or image in it;
// CUDA_EXTERNAL_MEMORY_DEDICATED is set where Vulkan made a dedicated allocation (what that is, cuda.h
// leaves to the other API: cuda.h:16339-16340). cuda.h:16239-16245: on success the descriptor belongs
// to the CUDA driver, and the program must not touch it again; of a failure cuda.h says nothing, and
// the program closes the descriptor itself.
// Returns the external memory; a refusal is reported as CHECK_DRIVER reports one, and returned as null.
CUexternalMemory importMemory(int fd, unsigned long long size, bool dedicated);

// Imports a Vulkan timeline semaphore's file descriptor into CUDA. cuda.h (cuda.h:16622-16628):
// for CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD, "Ownership of the file descriptor
// is transferred to the CUDA driver when the handle is imported successfully": after a success
// the program must not close it; after a failure it is still the program's, and is closed here.
inline CUexternalSemaphore importTimelineSemaphore(int fd) {
    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC desc{};
    desc.type = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD;
    desc.handle.fd = fd;
    desc.flags = 0;  // "Flags reserved for the future. Must be zero."
    CUexternalSemaphore semaphore = nullptr;
    if (REPORT_DRIVER(cuImportExternalSemaphore(&semaphore, &desc)) != CUDA_SUCCESS) {
        close(fd);  // not imported: the descriptor is still the program's
        std::exit(EXIT_FAILURE);
    }
    return semaphore;
}

// How long the host watches a side it expects to be held, and how long it waits for work that
// should finish before it gives up on it.
constexpr auto kHold = std::chrono::milliseconds(200);
constexpr auto kWaitLimit = std::chrono::seconds(10);

// Whether the work that `query` asks about (a call of cuEventQuery or cuStreamQuery) is still
// unfinished after the host has watched it for kHold.
template <typename Query>
bool stillRunningAfterHold(Query query) {
    std::this_thread::sleep_for(kHold);
    const CUresult state = query();
    if (state == CUDA_ERROR_NOT_READY) return true;
    CHECK_DRIVER(state);
    return false;
}

// Waits, at most kWaitLimit, until the work that `query` asks about has finished; false if it has
// not by then. cuWaitExternalSemaphoresAsync waits "until the value of the semaphore is greater
// than or equal to" the given one (cuda.h:16774-16781); for a timeline semaphore cuda.h names no
// time limit (only keyed mutexes have one, 16805-16810): work queued behind a value that never comes
// does not run, and cuEventSynchronize or cuStreamSynchronize on it would not return. So the host polls instead, and stops at the limit.
template <typename Query>
bool finishedInTime(Query query) {
    const auto deadline = std::chrono::steady_clock::now() + kWaitLimit;
    for (;;) {
        const CUresult state = query();
        if (state == CUDA_SUCCESS) return true;
        if (state != CUDA_ERROR_NOT_READY) CHECK_DRIVER(state);
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

// The end of a run in which work did not finish within kWaitLimit (its check has failed). That work
// still waits, and cannot be called back. cuda.h lets a stream, an event and an executable graph
// be destroyed while work in them is unfinished: the call returns at once, and they are freed when
// the work completes (cuda.h:15802-15805, 16109-16112, 21080-21083); the caller has destroyed
// those. But "Any outstanding signals or waits must have completed before the semaphore is
// destroyed" (cuda.h:16835-16836), the memory and the module are used by the waiting work, and
// Vulkan's objects must not be destroyed while pending work uses them (the Vulkan specification),
// while vkDeviceWaitIdle, the programs' way to know none does, would wait for ever. Those are left
// to the end of the process. Returning from main would run the exit handlers, and a run whose CUDA
// wait could never be met then did not end (observed on the course's H200); std::_Exit ends the
// process without them, and the operating system takes back its memory, descriptors and GPU work.
inline int endUnfinished(const course::Verdict& verdict, const char* left) {
    std::printf("left to the end of the process, in use by work that still waits: %s\n", left);
    const int code = verdict.finish();
    std::fflush(nullptr);
    std::_Exit(code);
}

}  // namespace lesson27

#if LESSON27_HAVE_VULKAN
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

// The functions the lesson uses. Instance-level ones come from vkGetInstanceProcAddr(instance),
// device-level ones from vkGetDeviceProcAddr(device): the loader's device-level pointers go
// straight to the driver. Functions of Vulkan 1.1 and 1.2 are core in a 1.2 instance and device;
// vkGetMemoryFdKHR and vkGetSemaphoreFdKHR belong to the two device extensions the lesson enables.
// clang-format off
#define LESSON27_VULKAN_INSTANCE_FUNCTIONS(X)                                                     \
    X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties2)            \
    X(vkGetPhysicalDeviceFeatures2) X(vkGetPhysicalDeviceQueueFamilyProperties)                     \
    X(vkGetPhysicalDeviceMemoryProperties) X(vkEnumerateDeviceExtensionProperties)                  \
    X(vkGetPhysicalDeviceExternalBufferProperties) X(vkGetPhysicalDeviceExternalSemaphoreProperties) \
    X(vkGetPhysicalDeviceImageFormatProperties2) X(vkEnumeratePhysicalDeviceGroups)                 \
    X(vkCreateDevice) X(vkGetDeviceProcAddr)

#define LESSON27_VULKAN_DEVICE_FUNCTIONS(X)                                                       \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkDeviceWaitIdle) X(vkQueueSubmit)                     \
    X(vkCreateBuffer) X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements2) X(vkBindBufferMemory)    \
    X(vkCreateImage) X(vkDestroyImage) X(vkGetImageMemoryRequirements2) X(vkBindImageMemory)        \
    X(vkAllocateMemory) X(vkFreeMemory) X(vkMapMemory) X(vkUnmapMemory) X(vkGetMemoryFdKHR)         \
    X(vkCreateSemaphore) X(vkDestroySemaphore) X(vkGetSemaphoreFdKHR) X(vkSignalSemaphore)          \
    X(vkGetSemaphoreCounterValue)                                                                   \
    X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences) X(vkGetFenceStatus)                       \
    X(vkCreateCommandPool) X(vkDestroyCommandPool) X(vkAllocateCommandBuffers)                      \
    X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkCmdPipelineBarrier) X(vkCmdUpdateBuffer)      \
    X(vkCmdCopyBuffer) X(vkCmdClearColorImage) X(vkCmdCopyBufferToImage)
// clang-format on

namespace lesson27 {

// Memory and semaphores travel to CUDA as opaque file descriptors.
constexpr VkExternalMemoryHandleTypeFlagBits kMemoryHandle = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
constexpr VkExternalSemaphoreHandleTypeFlagBits kSemaphoreHandle = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT;

// Everything the programs need of Vulkan, and the function pointers to reach it.
struct Vulkan {
    void* loader = nullptr;  // dlopen("libvulkan.so.1")
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
    VkInstance instance = VK_NULL_HANDLE;
    VkPhysicalDevice physical = VK_NULL_HANDLE;
    VkDevice device = VK_NULL_HANDLE;
    uint32_t queueFamily = 0;
    VkQueue queue = VK_NULL_HANDLE;
    VkPhysicalDeviceMemoryProperties memory{};
#define LESSON27_MEMBER(name) PFN_##name name = nullptr;
    LESSON27_VULKAN_INSTANCE_FUNCTIONS(LESSON27_MEMBER)
    LESSON27_VULKAN_DEVICE_FUNCTIONS(LESSON27_MEMBER)
#undef LESSON27_MEMBER
};

// "VK_ERROR_OUT_OF_DEVICE_MEMORY", or the number for a code this table does not name.
std::string vulkanResultName(VkResult result);
// Prints a failed Vulkan call the way CHECK_DRIVER prints a failed CUDA one.
void reportVulkanError(VkResult result, const char* expression, const char* file, int line);

// Step 1: the loader and a Vulkan 1.2 instance. Empty: done; otherwise the reason to SKIP.
std::string openInstance(Vulkan& vk);
// Step 3: the physical device whose UUID is the CUDA device's, and what both programs need of
// it (alone in its device group, Vulkan 1.2, the two fd extensions, timeline semaphores that
// export as an opaque fd, a queue that can clear and copy). Empty: chosen; otherwise the reason to SKIP.
std::string pickDevice(Vulkan& vk, const CUuuid& uuid);
// Whether memory of a buffer (image) with this usage (and format) can be exported as an opaque fd.
std::string bufferExportable(const Vulkan& vk, VkBufferUsageFlags usage);
std::string imageExportable(const Vulkan& vk, VkFormat format, VkImageUsageFlags usage);
// The logical device with one queue of the chosen family, the extensions and timeline semaphores.
void createDevice(Vulkan& vk);
// Waits for the device to be idle, destroys the device and the instance, closes the loader:
// whatever of that exists (also on the SKIP paths, where only some of it does).
void closeVulkan(Vulkan& vk);
// "Result = SKIP (reason)", then closeVulkan: the exit code for a step that cannot run here.
inline int skipAndClose(Vulkan& vk, const std::string& reason) {
    std::printf("Result = SKIP (%s)\n", reason.c_str());
    closeVulkan(vk);
    return course::kExitNotApplicable;
}

// Memory the program exports. `size` is the allocationSize given to vkAllocateMemory, the size of
// the whole VkDeviceMemory, which is what CUDA's import wants (CUDA_EXTERNAL_MEMORY_HANDLE_DESC::
// size, "Size of the memory allocation", cuda.h:3839); `required` is what vkGet*MemoryRequirements2
// asked for the one resource bound to it.
struct ExportableMemory {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkDeviceSize size = 0;
    VkDeviceSize required = 0;
    bool prefersDedicated = false;
    bool requiresDedicated = false;
    bool dedicated = false;  // allocated for this one buffer or image (VkMemoryDedicatedAllocateInfo)
};
// A device buffer whose memory can be exported as an opaque fd, bound to it at offset 0. The
// allocation is at least `atLeast` bytes, unless it is dedicated (then exactly the requirement).
VkBuffer createExportableBuffer(const Vulkan& vk, VkDeviceSize bytes, VkBufferUsageFlags usage, VkDeviceSize atLeast,
                                ExportableMemory& memory);
// A 2-D image (one level, optimal tiling) whose memory can be exported, in a dedicated allocation.
VkImage createExportableImage(const Vulkan& vk, VkFormat format, uint32_t width, uint32_t height,
                              VkImageUsageFlags usage, ExportableMemory& memory);
// The end of a program whose import (or its mapping) CUDA refused, reported already: no CUDA work
// has used Vulkan's objects, so all goes, newest first. The external memory where the import went
// through (null: none), CUDA's stream, module and primary context, then the buffer or the image
// (the other is null), its memory, the device and the instance.
void releaseAfterRefusal(Vulkan& vk, CUexternalMemory external, CUstream stream, CUmodule module, CUdevice device,
                         VkBuffer buffer, VkImage image, VkDeviceMemory memory);
// A buffer in host-visible, host-coherent memory, mapped at `mapped` until freeHostBuffer.
struct HostBuffer {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    void* mapped = nullptr;
};
HostBuffer createHostBuffer(const Vulkan& vk, VkDeviceSize bytes, VkBufferUsageFlags usage);
void freeHostBuffer(const Vulkan& vk, HostBuffer& host);
// A timeline semaphore (initial value 0) that can be exported as an opaque fd.
VkSemaphore createExportableTimeline(const Vulkan& vk);
// New file descriptors for the memory's and the semaphore's payloads: each call makes a new one,
// owned by the caller (vkGetMemoryFdKHR, vkGetSemaphoreFdKHR).
int exportMemoryFd(const Vulkan& vk, VkDeviceMemory memory);
int exportSemaphoreFd(const Vulkan& vk, VkSemaphore semaphore);

// One command buffer submitted to the queue: waits for `wait` to reach `waitValue` before its
// transfer commands (skipped when wait is VK_NULL_HANDLE), then sets `signal` to `signalValue`
// (skipped when signal is VK_NULL_HANDLE) and signals `fence` (may be VK_NULL_HANDLE).
void submit(const Vulkan& vk, VkCommandBuffer commands, VkSemaphore wait, uint64_t waitValue, VkSemaphore signal,
            uint64_t signalValue, VkFence fence);
// Sets a timeline semaphore's value from the host (vkSignalSemaphore).
void signalFromHost(const Vulkan& vk, VkSemaphore semaphore, uint64_t value);
// The timeline semaphore's current value, as Vulkan sees it.
uint64_t timelineValue(const Vulkan& vk, VkSemaphore semaphore);
// Whether `fence` is still unsignalled after the host has watched it for kHold.
bool fenceUnsignalledAfterHold(const Vulkan& vk, VkFence fence);
// Waits, at most kWaitLimit, until `fence` is signalled; false if it is not by then.
bool fenceSignalledInTime(const Vulkan& vk, VkFence fence);
// A command pool on the chosen queue family, `count` primary command buffers from it, a fence;
// and the start of recording a command buffer that is submitted once.
VkCommandPool createCommandPool(const Vulkan& vk);
void allocateCommandBuffers(const Vulkan& vk, VkCommandPool pool, uint32_t count, VkCommandBuffer* out);
VkFence createFence(const Vulkan& vk);
void beginCommands(const Vulkan& vk, VkCommandBuffer commands);

}  // namespace lesson27

// Fail fast, as CHECK_DRIVER does: a Vulkan call that fails prints its text, its VkResult and
// where it was, and ends the program with exit code 1.
#define CHECK_VULKAN(call)                                                                \
    do {                                                                                  \
        const VkResult checkVulkanResult_ = (call);                                       \
        if (checkVulkanResult_ != VK_SUCCESS) {                                           \
            ::lesson27::reportVulkanError(checkVulkanResult_, #call, __FILE__, __LINE__); \
            std::exit(EXIT_FAILURE);                                                      \
        }                                                                                 \
    } while (0)

#endif  // LESSON27_HAVE_VULKAN
