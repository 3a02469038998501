// vulkan_image.cpp — part 1 of vulkan_image_and_graph (vulkan_image.h says what it is).
#include "vulkan_image.h"

#if LESSON27_HAVE_VULKAN
#include <string>

namespace lesson27 {

namespace {

constexpr uint32_t kClearTexel = 0x04030201u;  // the clear colour {1, 2, 3, 4}, as bytes in memory

VkImageMemoryBarrier imageBarrier(VkImage image, VkImageLayout from, VkImageLayout to, VkAccessFlags src,
                                  VkAccessFlags dst, uint32_t fromFamily, uint32_t toFamily) {
    VkImageMemoryBarrier barrier{};
    barrier.sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER;
    barrier.srcAccessMask = src;
    barrier.dstAccessMask = dst;
    barrier.oldLayout = from;
    barrier.newLayout = to;
    barrier.srcQueueFamilyIndex = fromFamily;
    barrier.dstQueueFamilyIndex = toFamily;
    barrier.image = image;
    barrier.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    return barrier;
}

bool insideRect(uint32_t x, uint32_t y) {
    return x >= kRectX && x < kRectX + kRectWidth && y >= kRectY && y < kRectY + kRectHeight;
}

// Into TRANSFER_DST layout (from UNDEFINED: the old contents need not be kept), clear, copy the
// rectangle over the clear (the barrier between keeps the two writes in order), then release the
// image to VK_QUEUE_FAMILY_EXTERNAL in GENERAL layout, which allows any kind of access. The
// batch's semaphore signal comes after all of it.
void recordImageWrite(const Vulkan& vk, VkCommandBuffer commands, VkImage image, VkBuffer staging) {
    const uint32_t ignored = VK_QUEUE_FAMILY_IGNORED;
    beginCommands(vk, commands);
    VkImageMemoryBarrier barrier = imageBarrier(image, VK_IMAGE_LAYOUT_UNDEFINED, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                                                0, VK_ACCESS_TRANSFER_WRITE_BIT, ignored, ignored);
    vk.vkCmdPipelineBarrier(commands, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, nullptr,
                            0, nullptr, 1, &barrier);
    VkClearColorValue clear{};
    clear.uint32[0] = 1;
    clear.uint32[1] = 2;
    clear.uint32[2] = 3;
    clear.uint32[3] = 4;
    const VkImageSubresourceRange whole{VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    vk.vkCmdClearColorImage(commands, image, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, &clear, 1, &whole);
    barrier = imageBarrier(image, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                           VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, ignored, ignored);
    vk.vkCmdPipelineBarrier(commands, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, nullptr, 0,
                            nullptr, 1, &barrier);
    VkBufferImageCopy region{};  // bufferRowLength 0: the staging rows are packed, kRectWidth texels each
    region.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
    region.imageOffset = {static_cast<int32_t>(kRectX), static_cast<int32_t>(kRectY), 0};
    region.imageExtent = {kRectWidth, kRectHeight, 1};
    vk.vkCmdCopyBufferToImage(commands, staging, image, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1, &region);
    barrier = imageBarrier(image, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, VK_IMAGE_LAYOUT_GENERAL,
                           VK_ACCESS_TRANSFER_WRITE_BIT, 0, vk.queueFamily, VK_QUEUE_FAMILY_EXTERNAL);
    vk.vkCmdPipelineBarrier(commands, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, 0, 0,
                            nullptr, 0, nullptr, 1, &barrier);
    CHECK_VULKAN(vk.vkEndCommandBuffer(commands));
}

}  // namespace

ImageWrite prepareImageWrite(const Vulkan& vk, VkImage image) {
    ImageWrite write;
    write.staging = createHostBuffer(vk, kRectWidth * kRectHeight * 4, VK_BUFFER_USAGE_TRANSFER_SRC_BIT);
    auto* rect = static_cast<uint32_t*>(write.staging.mapped);
    for (uint32_t y = 0; y < kRectHeight; ++y)
        for (uint32_t x = 0; x < kRectWidth; ++x) rect[y * kRectWidth + x] = rectTexel(kRectX + x, kRectY + y);
    write.pool = createCommandPool(vk);
    allocateCommandBuffers(vk, write.pool, 1, &write.commands);
    recordImageWrite(vk, write.commands, image, write.staging.buffer);
    return write;
}

void queueArrayCopy(CUstream stream, CUexternalSemaphore ready, CUarray level0, void* host) {
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wait{};
    wait.params.fence.value = 1;
    CHECK_DRIVER(cuWaitExternalSemaphoresAsync(&ready, &wait, 1, stream));
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    copy.srcArray = level0;
    copy.dstMemoryType = CU_MEMORYTYPE_HOST;
    copy.dstHost = host;
    copy.dstPitch = kImageWidth * 4;
    copy.WidthInBytes = kImageWidth * 4;
    copy.Height = kImageHeight;
    CHECK_DRIVER(cuMemcpy2DAsync(&copy, stream));
}

TexelCounts countTexels(const void* host) {
    const auto* texels = static_cast<const uint32_t*>(host);
    TexelCounts counts;
    for (uint32_t y = 0; y < kImageHeight; ++y)
        for (uint32_t x = 0; x < kImageWidth; ++x) {
            const uint32_t value = texels[y * kImageWidth + x];
            if (insideRect(x, y)) {
                ++counts.inside;
                counts.copied += value == rectTexel(x, y) ? 1 : 0;
            } else {
                ++counts.outside;
                counts.clear += value == kClearTexel ? 1 : 0;
            }
        }
    return counts;
}

void checkTexels(const void* host, course::Verdict& verdict) {
    const TexelCounts texels = countTexels(host);
    std::printf("texels outside the rectangle with the clear colour: %u of %u\n", texels.clear, texels.outside);
    std::printf("texels inside the rectangle as Vulkan copied them: %u of %u\n", texels.copied, texels.inside);
    verdict.check("CUDA's array shows Vulkan's clear", texels.clear == texels.outside);
    verdict.check("CUDA's array shows Vulkan's copy", texels.copied == texels.inside);
}

bool arrayMatchesImage(CUarray level0) {
    CUDA_ARRAY3D_DESCRIPTOR array{};
    CHECK_DRIVER(cuArray3DGetDescriptor(&array, level0));
    const std::string format = array.Format == CU_AD_FORMAT_UNSIGNED_INT8
                                   ? "CU_AD_FORMAT_UNSIGNED_INT8"
                                   : "CUarray_format " + std::to_string(static_cast<int>(array.Format));
    std::printf("CUDA's array, level 0: %zu x %zu, depth %zu, %u channels of %s\n", array.Width, array.Height,
                array.Depth, array.NumChannels, format.c_str());
    return array.Width == kImageWidth && array.Height == kImageHeight && array.Depth == 0 &&
           array.Format == kArrayFormat && array.NumChannels == kArrayChannels;
}

}  // namespace lesson27

#endif  // LESSON27_HAVE_VULKAN
