// vulkan_objects.cpp — the Vulkan objects lesson 27 shares with CUDA, and the calls that use them
// (vulkan_device.h lists them). Where all their work finished, the programs destroy the objects in
// the reverse order of creation, after vkDeviceWaitIdle.
#include "vulkan_device.h"

#if LESSON27_HAVE_VULKAN
#include <algorithm>

namespace lesson27 {

namespace {

// The lowest memory type that the resource accepts (its memoryTypeBits) and that has `wanted`.
uint32_t memoryTypeIndex(const Vulkan& vk, uint32_t acceptable, VkMemoryPropertyFlags wanted) {
    for (uint32_t i = 0; i < vk.memory.memoryTypeCount; ++i)
        if ((acceptable & (1u << i)) != 0 && (vk.memory.memoryTypes[i].propertyFlags & wanted) == wanted) return i;
    std::fflush(stdout);
    std::fprintf(stderr, "Vulkan: no memory type with properties 0x%x among 0x%x\n", wanted, acceptable);
    std::exit(EXIT_FAILURE);
}

// What the device can do with an opaque-fd export of a buffer of this usage.
VkExternalMemoryFeatureFlags bufferExportFeatures(const Vulkan& vk, VkBufferUsageFlags usage) {
    VkPhysicalDeviceExternalBufferInfo info{};
    info.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO;
    info.usage = usage;
    info.handleType = kMemoryHandle;
    VkExternalBufferProperties properties{};
    properties.sType = VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES;
    vk.vkGetPhysicalDeviceExternalBufferProperties(vk.physical, &info, &properties);
    return properties.externalMemoryProperties.externalMemoryFeatures;
}

// Allocates exportable device-local memory for `buffer` or `image` (the other is null) and binds it
// at offset 0. Dedicated (the memory belongs to that one resource) where the driver prefers or
// requires it, or where the caller asks; then the allocation is the resource's requirement, which
// the Vulkan specification makes its size (VkMemoryDedicatedAllocateInfo). Otherwise it is at least
// `atLeast` bytes: an allocation may hold more than the one resource bound to it.
void allocateExportable(const Vulkan& vk, VkBuffer buffer, VkImage image, bool dedicatedAnyway, VkDeviceSize atLeast,
                        ExportableMemory& out) {
    VkMemoryDedicatedRequirements dedicated{};
    dedicated.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_REQUIREMENTS;
    VkMemoryRequirements2 requirements{};
    requirements.sType = VK_STRUCTURE_TYPE_MEMORY_REQUIREMENTS_2;
    requirements.pNext = &dedicated;
    if (buffer != VK_NULL_HANDLE) {
        VkBufferMemoryRequirementsInfo2 info{};
        info.sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_REQUIREMENTS_INFO_2;
        info.buffer = buffer;
        vk.vkGetBufferMemoryRequirements2(vk.device, &info, &requirements);
    } else {
        VkImageMemoryRequirementsInfo2 info{};
        info.sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_REQUIREMENTS_INFO_2;
        info.image = image;
        vk.vkGetImageMemoryRequirements2(vk.device, &info, &requirements);
    }
    out.required = requirements.memoryRequirements.size;
    out.prefersDedicated = dedicated.prefersDedicatedAllocation == VK_TRUE;
    out.requiresDedicated = dedicated.requiresDedicatedAllocation == VK_TRUE;
    out.dedicated = dedicatedAnyway || out.prefersDedicated || out.requiresDedicated;
    out.size = out.dedicated ? out.required : std::max(out.required, atLeast);

    VkMemoryDedicatedAllocateInfo dedicatedInfo{};
    dedicatedInfo.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO;
    dedicatedInfo.buffer = buffer;
    dedicatedInfo.image = image;
    VkExportMemoryAllocateInfo exportInfo{};  // "this memory may be exported as an opaque fd"
    exportInfo.sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO;
    exportInfo.pNext = out.dedicated ? &dedicatedInfo : nullptr;
    exportInfo.handleTypes = kMemoryHandle;
    VkMemoryAllocateInfo allocate{};
    allocate.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    allocate.pNext = &exportInfo;
    allocate.allocationSize = out.size;
    allocate.memoryTypeIndex =
        memoryTypeIndex(vk, requirements.memoryRequirements.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    CHECK_VULKAN(vk.vkAllocateMemory(vk.device, &allocate, nullptr, &out.memory));
    if (buffer != VK_NULL_HANDLE)
        CHECK_VULKAN(vk.vkBindBufferMemory(vk.device, buffer, out.memory, 0));
    else
        CHECK_VULKAN(vk.vkBindImageMemory(vk.device, image, out.memory, 0));
}

}  // namespace

std::string bufferExportable(const Vulkan& vk, VkBufferUsageFlags usage) {
    if ((bufferExportFeatures(vk, usage) & VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT) == 0)
        return "the Vulkan device cannot export buffer memory as an opaque fd";
    return "";
}

std::string imageExportable(const Vulkan& vk, VkFormat format, VkImageUsageFlags usage) {
    VkPhysicalDeviceExternalImageFormatInfo external{};
    external.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_IMAGE_FORMAT_INFO;
    external.handleType = kMemoryHandle;
    VkPhysicalDeviceImageFormatInfo2 info{};
    info.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_IMAGE_FORMAT_INFO_2;
    info.pNext = &external;
    info.format = format;
    info.type = VK_IMAGE_TYPE_2D;
    info.tiling = VK_IMAGE_TILING_OPTIMAL;
    info.usage = usage;
    VkExternalImageFormatProperties externalProperties{};
    externalProperties.sType = VK_STRUCTURE_TYPE_EXTERNAL_IMAGE_FORMAT_PROPERTIES;
    VkImageFormatProperties2 properties{};
    properties.sType = VK_STRUCTURE_TYPE_IMAGE_FORMAT_PROPERTIES_2;
    properties.pNext = &externalProperties;
    const VkResult result = vk.vkGetPhysicalDeviceImageFormatProperties2(vk.physical, &info, &properties);
    if (result == VK_ERROR_FORMAT_NOT_SUPPORTED) return "the Vulkan device has no exportable image of this format";
    CHECK_VULKAN(result);
    if ((externalProperties.externalMemoryProperties.externalMemoryFeatures &
         VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT) == 0)
        return "the Vulkan device cannot export image memory as an opaque fd";
    return "";
}

VkBuffer createExportableBuffer(const Vulkan& vk, VkDeviceSize bytes, VkBufferUsageFlags usage, VkDeviceSize atLeast,
                                ExportableMemory& memory) {
    VkExternalMemoryBufferCreateInfo external{};  // "this buffer's memory may be exported"
    external.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
    external.handleTypes = kMemoryHandle;
    VkBufferCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    info.pNext = &external;
    info.size = bytes;
    info.usage = usage;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkBuffer buffer = VK_NULL_HANDLE;
    CHECK_VULKAN(vk.vkCreateBuffer(vk.device, &info, nullptr, &buffer));
    const bool dedicatedOnly = (bufferExportFeatures(vk, usage) & VK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT) != 0;
    allocateExportable(vk, buffer, VK_NULL_HANDLE, dedicatedOnly, atLeast, memory);
    return buffer;
}

VkImage createExportableImage(const Vulkan& vk, VkFormat format, uint32_t width, uint32_t height,
                              VkImageUsageFlags usage, ExportableMemory& memory) {
    VkExternalMemoryImageCreateInfo external{};
    external.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMAGE_CREATE_INFO;
    external.handleTypes = kMemoryHandle;
    VkImageCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO;
    info.pNext = &external;
    info.imageType = VK_IMAGE_TYPE_2D;
    info.format = format;
    info.extent = {width, height, 1};
    info.mipLevels = 1;
    info.arrayLayers = 1;
    info.samples = VK_SAMPLE_COUNT_1_BIT;
    // Optimal tiling: a texel layout the Vulkan driver chooses. cuda.h says nothing of tiling: the
    // array mapped on this memory is described by its offset, format, size and levels only
    // (cuda.h:16442-16453). That CUDA then reads the texels as Vulkan wrote them is what the
    // program's checks show, on the GPU they run on.
    info.tiling = VK_IMAGE_TILING_OPTIMAL;
    info.usage = usage;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    info.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
    VkImage image = VK_NULL_HANDLE;
    CHECK_VULKAN(vk.vkCreateImage(vk.device, &info, nullptr, &image));
    allocateExportable(vk, VK_NULL_HANDLE, image, true, 0, memory);
    return image;
}

HostBuffer createHostBuffer(const Vulkan& vk, VkDeviceSize bytes, VkBufferUsageFlags usage) {
    HostBuffer host;
    VkBufferCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    info.size = bytes;
    info.usage = usage;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    CHECK_VULKAN(vk.vkCreateBuffer(vk.device, &info, nullptr, &host.buffer));
    VkMemoryRequirements2 requirements{};
    requirements.sType = VK_STRUCTURE_TYPE_MEMORY_REQUIREMENTS_2;
    VkBufferMemoryRequirementsInfo2 requirementsInfo{};
    requirementsInfo.sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_REQUIREMENTS_INFO_2;
    requirementsInfo.buffer = host.buffer;
    vk.vkGetBufferMemoryRequirements2(vk.device, &requirementsInfo, &requirements);
    VkMemoryAllocateInfo allocate{};
    allocate.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    allocate.allocationSize = requirements.memoryRequirements.size;
    // Coherent: the Vulkan specification (VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) says the host needs
    // neither vkFlushMappedMemoryRanges for its writes nor vkInvalidateMappedMemoryRanges for the device's.
    allocate.memoryTypeIndex =
        memoryTypeIndex(vk, requirements.memoryRequirements.memoryTypeBits,
                        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    CHECK_VULKAN(vk.vkAllocateMemory(vk.device, &allocate, nullptr, &host.memory));
    CHECK_VULKAN(vk.vkBindBufferMemory(vk.device, host.buffer, host.memory, 0));
    CHECK_VULKAN(vk.vkMapMemory(vk.device, host.memory, 0, VK_WHOLE_SIZE, 0, &host.mapped));
    return host;
}

void freeHostBuffer(const Vulkan& vk, HostBuffer& host) {
    vk.vkUnmapMemory(vk.device, host.memory);
    vk.vkDestroyBuffer(vk.device, host.buffer, nullptr);
    vk.vkFreeMemory(vk.device, host.memory, nullptr);
    host = HostBuffer{};
}

VkSemaphore createExportableTimeline(const Vulkan& vk) {
    VkExportSemaphoreCreateInfo exportInfo{};
    exportInfo.sType = VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO;
    exportInfo.handleTypes = kSemaphoreHandle;
    VkSemaphoreTypeCreateInfo type{};
    type.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
    type.pNext = &exportInfo;
    type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    type.initialValue = 0;
    VkSemaphoreCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
    info.pNext = &type;
    VkSemaphore semaphore = VK_NULL_HANDLE;
    CHECK_VULKAN(vk.vkCreateSemaphore(vk.device, &info, nullptr, &semaphore));
    return semaphore;
}

int exportMemoryFd(const Vulkan& vk, VkDeviceMemory memory) {
    VkMemoryGetFdInfoKHR info{};
    info.sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR;
    info.memory = memory;
    info.handleType = kMemoryHandle;
    int fd = -1;
    CHECK_VULKAN(vk.vkGetMemoryFdKHR(vk.device, &info, &fd));
    return fd;
}

int exportSemaphoreFd(const Vulkan& vk, VkSemaphore semaphore) {
    VkSemaphoreGetFdInfoKHR info{};
    info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR;
    info.semaphore = semaphore;
    info.handleType = kSemaphoreHandle;
    int fd = -1;
    CHECK_VULKAN(vk.vkGetSemaphoreFdKHR(vk.device, &info, &fd));
    return fd;
}

void submit(const Vulkan& vk, VkCommandBuffer commands, VkSemaphore wait, uint64_t waitValue, VkSemaphore signal,
            uint64_t signalValue, VkFence fence) {
    // A timeline semaphore's wait and signal values travel in this structure, beside VkSubmitInfo.
    VkTimelineSemaphoreSubmitInfo values{};
    values.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO;
    values.waitSemaphoreValueCount = wait != VK_NULL_HANDLE ? 1 : 0;
    values.pWaitSemaphoreValues = &waitValue;
    values.signalSemaphoreValueCount = signal != VK_NULL_HANDLE ? 1 : 0;
    values.pSignalSemaphoreValues = &signalValue;
    // The wait holds back the transfer stage of this batch's commands (the copies, clears,
    // updates and the barriers that chain to them); the signal comes after all of them.
    const VkPipelineStageFlags waitStage = VK_PIPELINE_STAGE_TRANSFER_BIT;
    VkSubmitInfo info{};
    info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    info.pNext = &values;
    info.waitSemaphoreCount = values.waitSemaphoreValueCount;
    info.pWaitSemaphores = &wait;
    info.pWaitDstStageMask = &waitStage;
    info.commandBufferCount = 1;
    info.pCommandBuffers = &commands;
    info.signalSemaphoreCount = values.signalSemaphoreValueCount;
    info.pSignalSemaphores = &signal;
    CHECK_VULKAN(vk.vkQueueSubmit(vk.queue, 1, &info, fence));
}

VkCommandPool createCommandPool(const Vulkan& vk) {
    VkCommandPoolCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    info.queueFamilyIndex = vk.queueFamily;
    VkCommandPool pool = VK_NULL_HANDLE;
    CHECK_VULKAN(vk.vkCreateCommandPool(vk.device, &info, nullptr, &pool));
    return pool;
}

void allocateCommandBuffers(const Vulkan& vk, VkCommandPool pool, uint32_t count, VkCommandBuffer* out) {
    VkCommandBufferAllocateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    info.commandPool = pool;
    info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    info.commandBufferCount = count;
    CHECK_VULKAN(vk.vkAllocateCommandBuffers(vk.device, &info, out));  // freed with their pool
}

VkFence createFence(const Vulkan& vk) {
    VkFenceCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    VkFence fence = VK_NULL_HANDLE;
    CHECK_VULKAN(vk.vkCreateFence(vk.device, &info, nullptr, &fence));
    return fence;
}

void beginCommands(const Vulkan& vk, VkCommandBuffer commands) {
    VkCommandBufferBeginInfo info{};
    info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    info.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    CHECK_VULKAN(vk.vkBeginCommandBuffer(commands, &info));
}

}  // namespace lesson27

#endif  // LESSON27_HAVE_VULKAN
