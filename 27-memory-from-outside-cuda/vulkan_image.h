// vulkan_image.h — part 1 of vulkan_image_and_graph: the image Vulkan writes and CUDA reads as an
// array. What Vulkan records (vulkan_image.cpp), what CUDA queues, and how the host counts texels.
#pragma once

#include "vulkan_device.h"

#if LESSON27_HAVE_VULKAN
#include <cuda.h>

#include <cstdint>

namespace lesson27 {

constexpr uint32_t kImageWidth = 256, kImageHeight = 128;  // 4 bytes a texel
// The rectangle Vulkan copies into the cleared image.
constexpr uint32_t kRectX = 64, kRectY = 32, kRectWidth = 128, kRectHeight = 64;
// 8-bit unsigned RGBA: in CUDA, 4 channels of CU_AD_FORMAT_UNSIGNED_INT8. The array mapped on the
// image must say so (cuda.h:16445-16447: arrayDesc "describes the format, dimensions and type of
// the base level"); the program checks the array CUDA made against these.
constexpr VkFormat kImageFormat = VK_FORMAT_R8G8B8A8_UINT;
constexpr CUarray_format kArrayFormat = CU_AD_FORMAT_UNSIGNED_INT8;
constexpr unsigned int kArrayChannels = 4;
// Usage flags say what Vulkan may do with the image (the Vulkan specification): the transfer bits
// are for Vulkan's clear and copy here; sampled and storage would let a Vulkan shader sample it or
// load and store it, which no Vulkan command of this program does. Of the graphics side's use of
// the image, cuda.h names one case: "if the mipmapped array is bound as a color target in the
// graphics API, then the flag CUDA_ARRAY3D_COLOR_ATTACHMENT must be specified" in the mapping's
// arrayDesc.Flags (cuda.h:16448-16451). This image has no colour-attachment usage, so Vulkan never
// binds it as one. What CUDA needs to use the array as a surface (lesson 19) is
// CUDA_ARRAY3D_SURFACE_LDST in the same Flags (cuda.h:4812-4816, and for a mipmapped array's levels
// cuda.h:12421-12423); vulkan_image_and_graph maps it with Flags 0, so its array is not surface-capable.
constexpr VkImageUsageFlags kImageUsage = VK_IMAGE_USAGE_TRANSFER_SRC_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT |
                                          VK_IMAGE_USAGE_SAMPLED_BIT | VK_IMAGE_USAGE_STORAGE_BIT;

// The texel Vulkan copies to (x, y): a hash of its position; its bytes are R, G, B, A in memory.
inline uint32_t rectTexel(uint32_t x, uint32_t y) {
    return 2654435761u * (y * kImageWidth + x + 1u);
}

// Vulkan's work on the image, recorded but not submitted: a host-visible staging buffer holding the
// rectangle's texels row after row, a command pool, and its one command buffer (clear, copy the
// rectangle, release the image to CUDA). The program destroys the pool and frees the buffer.
struct ImageWrite {
    HostBuffer staging;
    VkCommandPool pool = VK_NULL_HANDLE;
    VkCommandBuffer commands = VK_NULL_HANDLE;
};
ImageWrite prepareImageWrite(const Vulkan& vk, VkImage image);
// Queues CUDA's wait for `ready` to reach 1, then the copy of `level0` to `host` (pinned); the host
// does not wait for them here.
void queueArrayCopy(CUstream stream, CUexternalSemaphore ready, CUarray level0, void* host);

// The texels the host found as Vulkan wrote them, outside and inside the rectangle.
struct TexelCounts {
    uint32_t clear = 0, outside = 0;  // texels with the clear colour, of those outside
    uint32_t copied = 0, inside = 0;  // texels as copied, of those inside
};
TexelCounts countTexels(const void* host);
// Counts the texels the host holds, prints the counts and checks them: every texel outside the
// rectangle has the clear colour, every texel inside it is as Vulkan copied it.
void checkTexels(const void* host, course::Verdict& verdict);
// Prints the description CUDA gives of `level0` (cuArray3DGetDescriptor) beside the image's, and
// whether they agree: width, height, no depth, kArrayChannels channels of kArrayFormat.
bool arrayMatchesImage(CUarray level0);

}  // namespace lesson27

#endif  // LESSON27_HAVE_VULKAN
