// vulkan_device.cpp — lesson 27's Vulkan instance and device, and the host's calls on timeline semaphores
//
// Every structure handed to Vulkan starts with its sType, and the extension structures hang off
// pNext chains: the chain is how Vulkan 1.1+ adds fields to a call without a new call.
#include "vulkan_device.h"

#if LESSON27_HAVE_VULKAN
#include <dlfcn.h>

#include <cstring>
#include <vector>

namespace lesson27 {

namespace {

const char* const kDeviceExtensions[] = {VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME,
                                         VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME};

[[noreturn]] void missingFunction(const char* name) {
    std::fflush(stdout);
    std::fprintf(stderr, "Vulkan: the loader gave no %s\n", name);
    std::exit(EXIT_FAILURE);
}

std::string versionText(uint32_t version) {
    return std::to_string(VK_API_VERSION_MAJOR(version)) + "." + std::to_string(VK_API_VERSION_MINOR(version));
}

// How many physical devices share the chosen one's device group (every physical device is in
// exactly one, the Vulkan specification). NVIDIA's CUDA Programming Guide (section 4.21) has the
// Vulkan device used with CUDA be the only one in its group; cuda.h says nothing of device groups.
uint32_t deviceGroupSize(const Vulkan& vk) {
    uint32_t count = 0;
    CHECK_VULKAN(vk.vkEnumeratePhysicalDeviceGroups(vk.instance, &count, nullptr));
    std::vector<VkPhysicalDeviceGroupProperties> groups(count);
    for (VkPhysicalDeviceGroupProperties& group : groups)
        group.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GROUP_PROPERTIES;
    CHECK_VULKAN(vk.vkEnumeratePhysicalDeviceGroups(vk.instance, &count, groups.data()));
    for (const VkPhysicalDeviceGroupProperties& group : groups)
        for (uint32_t i = 0; i < group.physicalDeviceCount; ++i)
            if (group.physicalDevices[i] == vk.physical) return group.physicalDeviceCount;
    return 0;  // not listed in any group
}

}  // namespace

std::string vulkanResultName(VkResult result) {
    switch (result) {
        case VK_SUCCESS: return "VK_SUCCESS";
        case VK_NOT_READY: return "VK_NOT_READY";
        case VK_TIMEOUT: return "VK_TIMEOUT";
        case VK_INCOMPLETE: return "VK_INCOMPLETE";
        case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
        case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
        case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
        case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
        case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
        case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
        case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
        case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
        case VK_ERROR_INVALID_EXTERNAL_HANDLE: return "VK_ERROR_INVALID_EXTERNAL_HANDLE";
        case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
        default: return "VkResult " + std::to_string(static_cast<int>(result));
    }
}

void reportVulkanError(VkResult result, const char* expression, const char* file, int line) {
    std::fflush(stdout);
    std::fprintf(stderr, "Vulkan call failed: %s\n  error: %s\n  at:    %s:%d\n", expression,
                 vulkanResultName(result).c_str(), file, line);
    std::fflush(stderr);
}

std::string openInstance(Vulkan& vk) {
    vk.loader = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (vk.loader == nullptr) return "Vulkan loader libvulkan.so.1 not found: install libvulkan1";
    vk.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(vk.loader, "vkGetInstanceProcAddr"));
    if (vk.vkGetInstanceProcAddr == nullptr) return "libvulkan.so.1 has no vkGetInstanceProcAddr";
    // vkEnumerateInstanceVersion came with Vulkan 1.1: a loader without it offers 1.0 only.
    auto enumerateVersion = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
        vk.vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));
    uint32_t version = VK_API_VERSION_1_0;
    if (enumerateVersion != nullptr) CHECK_VULKAN(enumerateVersion(&version));
    std::printf("Vulkan loader: libvulkan.so.1, instance version %s\n", versionText(version).c_str());
    if (version < VK_API_VERSION_1_2)
        return "the Vulkan loader offers Vulkan " + versionText(version) + "; this lesson needs 1.2";

    auto createInstance =
        reinterpret_cast<PFN_vkCreateInstance>(vk.vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkCreateInstance"));
    if (createInstance == nullptr) missingFunction("vkCreateInstance");
    VkApplicationInfo application{};
    application.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    application.pApplicationName = "CUDA Driver API course, lesson 27";
    application.apiVersion = VK_API_VERSION_1_2;  // timeline semaphores, external memory: core in 1.2
    VkInstanceCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    info.pApplicationInfo = &application;
    const VkResult created = createInstance(&info, nullptr, &vk.instance);
    if (created == VK_ERROR_INCOMPATIBLE_DRIVER) {
        vk.instance = VK_NULL_HANDLE;
        return "no Vulkan driver found: vkCreateInstance returned VK_ERROR_INCOMPATIBLE_DRIVER; NVIDIA's ships "
               "with the NVIDIA driver (nvidia_icd.json), and VK_DRIVER_FILES can point the loader at it";
    }
    CHECK_VULKAN(created);
#define LESSON27_LOAD(name)                                                               \
    vk.name = reinterpret_cast<PFN_##name>(vk.vkGetInstanceProcAddr(vk.instance, #name)); \
    if (vk.name == nullptr) missingFunction(#name);
    LESSON27_VULKAN_INSTANCE_FUNCTIONS(LESSON27_LOAD)
#undef LESSON27_LOAD
    return "";
}

std::string pickDevice(Vulkan& vk, const CUuuid& uuid) {
    uint32_t count = 0;
    CHECK_VULKAN(vk.vkEnumeratePhysicalDevices(vk.instance, &count, nullptr));
    std::vector<VkPhysicalDevice> devices(count);
    CHECK_VULKAN(vk.vkEnumeratePhysicalDevices(vk.instance, &count, devices.data()));
    std::printf("Vulkan devices on this machine: %u\n", count);
    VkPhysicalDeviceProperties properties{};
    for (uint32_t index = 0; index < count; ++index) {
        const VkPhysicalDevice candidate = devices[index];
        VkPhysicalDeviceProperties2 plain{};
        plain.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
        vk.vkGetPhysicalDeviceProperties2(candidate, &plain);
        if (plain.properties.apiVersion < VK_API_VERSION_1_1) continue;  // no deviceUUID before 1.1
        VkPhysicalDeviceIDProperties id{};
        id.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
        VkPhysicalDeviceProperties2 withId{};
        withId.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
        withId.pNext = &id;
        vk.vkGetPhysicalDeviceProperties2(candidate, &withId);
        if (std::memcmp(id.deviceUUID, uuid.bytes, VK_UUID_SIZE) != 0) continue;
        vk.physical = candidate;
        properties = withId.properties;
        // Which of the listed devices matched: with several GPUs, not necessarily the first.
        std::printf("Vulkan device taken: %u of %u (in vkEnumeratePhysicalDevices order, from 0)\n", index, count);
        std::printf("Vulkan device name: %s\n", properties.deviceName);
        std::printf("Vulkan device UUID: %s\n", uuidText(id.deviceUUID).c_str());
        std::printf("Vulkan device API version: %s\n", versionText(properties.apiVersion).c_str());
        break;
    }
    if (vk.physical == VK_NULL_HANDLE) return "no Vulkan device has the CUDA device's UUID";
    if (properties.apiVersion < VK_API_VERSION_1_2) return "the Vulkan device offers Vulkan 1.1; this lesson needs 1.2";
    const uint32_t groupSize = deviceGroupSize(vk);
    std::printf("physical devices in its Vulkan device group: %u\n", groupSize);
    if (groupSize != 1)
        return "the Vulkan device is in a device group of " + std::to_string(groupSize) +
               " physical devices; NVIDIA's CUDA Programming Guide has interop use a group of one";

    uint32_t extensionCount = 0;
    CHECK_VULKAN(vk.vkEnumerateDeviceExtensionProperties(vk.physical, nullptr, &extensionCount, nullptr));
    std::vector<VkExtensionProperties> extensions(extensionCount);
    CHECK_VULKAN(vk.vkEnumerateDeviceExtensionProperties(vk.physical, nullptr, &extensionCount, extensions.data()));
    for (const char* wanted : kDeviceExtensions) {
        bool found = false;
        for (const VkExtensionProperties& extension : extensions)
            found = found || std::strcmp(extension.extensionName, wanted) == 0;
        if (!found) return std::string("the Vulkan device lacks ") + wanted;
    }
    VkPhysicalDeviceVulkan12Features features12{};
    features12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    VkPhysicalDeviceFeatures2 features{};
    features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    features.pNext = &features12;
    vk.vkGetPhysicalDeviceFeatures2(vk.physical, &features);
    if (features12.timelineSemaphore != VK_TRUE) return "the Vulkan device has no timeline semaphores";

    // A timeline semaphore must be exportable as an opaque fd: ask with the semaphore's type chained.
    VkSemaphoreTypeCreateInfo timeline{};
    timeline.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
    timeline.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    VkPhysicalDeviceExternalSemaphoreInfo semaphoreInfo{};
    semaphoreInfo.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_SEMAPHORE_INFO;
    semaphoreInfo.pNext = &timeline;
    semaphoreInfo.handleType = kSemaphoreHandle;
    VkExternalSemaphoreProperties semaphoreProperties{};
    semaphoreProperties.sType = VK_STRUCTURE_TYPE_EXTERNAL_SEMAPHORE_PROPERTIES;
    vk.vkGetPhysicalDeviceExternalSemaphoreProperties(vk.physical, &semaphoreInfo, &semaphoreProperties);
    if ((semaphoreProperties.externalSemaphoreFeatures & VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT) == 0)
        return "the Vulkan device cannot export a timeline semaphore as an opaque fd";

    // One queue that can clear and copy. The Vulkan specification (VkQueueFlagBits): every command
    // allowed on a transfer queue is allowed on a graphics or a compute queue too, and
    // vkCmdClearColorImage needs one of those two; so a graphics or compute family is enough.
    uint32_t familyCount = 0;
    vk.vkGetPhysicalDeviceQueueFamilyProperties(vk.physical, &familyCount, nullptr);
    std::vector<VkQueueFamilyProperties> families(familyCount);
    vk.vkGetPhysicalDeviceQueueFamilyProperties(vk.physical, &familyCount, families.data());
    bool queueFound = false;
    for (uint32_t i = 0; i < familyCount && !queueFound; ++i) {
        if (families[i].queueCount == 0 ||
            (families[i].queueFlags & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT)) == 0)
            continue;
        vk.queueFamily = i;
        queueFound = true;
    }
    if (!queueFound) return "the Vulkan device has no graphics or compute queue";
    std::printf("Vulkan queue family: %u\n", vk.queueFamily);
    vk.vkGetPhysicalDeviceMemoryProperties(vk.physical, &vk.memory);
    return "";
}

void createDevice(Vulkan& vk) {
    const float priority = 1.0f;
    VkDeviceQueueCreateInfo queueInfo{};
    queueInfo.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    queueInfo.queueFamilyIndex = vk.queueFamily;
    queueInfo.queueCount = 1;
    queueInfo.pQueuePriorities = &priority;
    VkPhysicalDeviceVulkan12Features features12{};  // timeline semaphores are a feature to enable
    features12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    features12.timelineSemaphore = VK_TRUE;
    VkDeviceCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    info.pNext = &features12;
    info.queueCreateInfoCount = 1;
    info.pQueueCreateInfos = &queueInfo;
    info.enabledExtensionCount = sizeof(kDeviceExtensions) / sizeof(kDeviceExtensions[0]);
    info.ppEnabledExtensionNames = kDeviceExtensions;
    CHECK_VULKAN(vk.vkCreateDevice(vk.physical, &info, nullptr, &vk.device));
#define LESSON27_LOAD(name)                                                           \
    vk.name = reinterpret_cast<PFN_##name>(vk.vkGetDeviceProcAddr(vk.device, #name)); \
    if (vk.name == nullptr) missingFunction(#name);
    LESSON27_VULKAN_DEVICE_FUNCTIONS(LESSON27_LOAD)
#undef LESSON27_LOAD
    vk.vkGetDeviceQueue(vk.device, vk.queueFamily, 0, &vk.queue);
}

void closeVulkan(Vulkan& vk) {
    if (vk.device != VK_NULL_HANDLE) {
        CHECK_VULKAN(vk.vkDeviceWaitIdle(vk.device));
        vk.vkDestroyDevice(vk.device, nullptr);
        vk.device = VK_NULL_HANDLE;
    }
    if (vk.instance != VK_NULL_HANDLE) {
        vk.vkDestroyInstance(vk.instance, nullptr);
        vk.instance = VK_NULL_HANDLE;
    }
    if (vk.loader != nullptr) {
        dlclose(vk.loader);
        vk.loader = nullptr;
    }
}

CUexternalMemory importMemory(int fd, unsigned long long size, bool dedicated) {
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC desc{};
    desc.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
    desc.handle.fd = fd;
    desc.size = size;
    desc.flags = dedicated ? CUDA_EXTERNAL_MEMORY_DEDICATED : 0;
    std::printf("import size (CUDA_EXTERNAL_MEMORY_HANDLE_DESC::size): %llu bytes\n", desc.size);
    CUexternalMemory imported = nullptr;
    if (REPORT_DRIVER(cuImportExternalMemory(&imported, &desc)) != CUDA_SUCCESS) {
        close(fd);  // not imported: the descriptor is still the program's
        return nullptr;
    }
    return imported;
}

void releaseAfterRefusal(Vulkan& vk, CUexternalMemory external, CUstream stream, CUmodule module, CUdevice device,
                         VkBuffer buffer, VkImage image, VkDeviceMemory memory) {
    if (external != nullptr) CHECK_DRIVER(cuDestroyExternalMemory(external));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    if (buffer != VK_NULL_HANDLE) vk.vkDestroyBuffer(vk.device, buffer, nullptr);
    if (image != VK_NULL_HANDLE) vk.vkDestroyImage(vk.device, image, nullptr);
    vk.vkFreeMemory(vk.device, memory, nullptr);
    closeVulkan(vk);
}

void signalFromHost(const Vulkan& vk, VkSemaphore semaphore, uint64_t value) {
    VkSemaphoreSignalInfo info{};
    info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO;
    info.semaphore = semaphore;
    info.value = value;
    CHECK_VULKAN(vk.vkSignalSemaphore(vk.device, &info));
}

uint64_t timelineValue(const Vulkan& vk, VkSemaphore semaphore) {
    uint64_t value = 0;
    CHECK_VULKAN(vk.vkGetSemaphoreCounterValue(vk.device, semaphore, &value));
    return value;
}

bool fenceUnsignalledAfterHold(const Vulkan& vk, VkFence fence) {
    std::this_thread::sleep_for(kHold);
    const VkResult state = vk.vkGetFenceStatus(vk.device, fence);
    if (state == VK_NOT_READY) return true;
    CHECK_VULKAN(state);
    return false;
}

bool fenceSignalledInTime(const Vulkan& vk, VkFence fence) {
    const uint64_t limitNs = std::chrono::duration_cast<std::chrono::nanoseconds>(kWaitLimit).count();
    const VkResult result = vk.vkWaitForFences(vk.device, 1, &fence, VK_TRUE, limitNs);
    if (result == VK_TIMEOUT) return false;
    CHECK_VULKAN(result);
    return true;
}

}  // namespace lesson27

#endif  // LESSON27_HAVE_VULKAN
