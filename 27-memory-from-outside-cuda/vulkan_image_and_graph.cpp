// Lesson 27, program 2 — a Vulkan image as a CUDA array; the semaphores as graph nodes.
//
// Part 1 (vulkan_image.cpp): Vulkan makes a 2-D image with optimal tiling (a layout its driver
// chooses; cuda.h says nothing of tiling) in exportable memory. CUDA imports that memory and maps
// it as a mipmapped array (cuExternalMemoryGetMappedMipmappedArray, then cuMipmappedArrayGetLevel
// for level 0), and queues a wait for Vulkan's semaphore value and a copy of the array to the host;
// only then does Vulkan clear the image and copy a rectangle into it. The host checks that CUDA's
// copy waited, and every texel it copied.
// Part 2: the semaphores as graph nodes. A graph waits for a value of one semaphore, runs a kernel
// and signals another. The values are changed on the graph's nodes before it is instantiated and
// on the executable graph before its second launch; each change is checked by what it does: how
// long a launch waits, and which value Vulkan then reads.
//
//   vulkan_image_and_graph               the walkthrough
//   vulkan_image_and_graph --device N    another GPU
#include "vulkan_device.h"

#if !LESSON27_HAVE_VULKAN
int main(int argc, char** argv) {
    return lesson27::skipWithoutVulkanHeaders(argc, argv);
}
#else

#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "vulkan_image.h"

namespace {

using lesson27::Vulkan;

constexpr int kCounterCount = 4096;  // elements the graph's kernel counts in

// The graph's kernel node, after `after`: countLaunch adds 1 to each of the counter's elements.
// The node copies the argument values when it is added (the locals may go).
CUgraphNode addCountNode(CUgraph graph, CUgraphNode after, CUfunction countLaunch, CUdeviceptr counter) {
    int count = kCounterCount;
    void* arguments[] = {&counter, &count};
    CUDA_KERNEL_NODE_PARAMS kernel{};
    kernel.func = countLaunch;
    kernel.gridDimX = (kCounterCount + 255) / 256;
    kernel.gridDimY = kernel.gridDimZ = 1;
    kernel.blockDimX = 256;
    kernel.blockDimY = kernel.blockDimZ = 1;
    kernel.kernelParams = arguments;
    CUgraphNode node = nullptr;
    CHECK_DRIVER(cuGraphAddKernelNode(&node, graph, &after, 1, &kernel));
    return node;
}

// What the host saw of CUDA's work queued behind a wait: whether it was still unfinished after
// kHold, while the value it waits for was missing, and whether it finished (within kWaitLimit)
// once the value came. "Waited for the value" takes both.
struct Waited {
    bool held = false;
    bool ran = false;
    uint64_t doneWhileHeld = 0;  // a graph launch's: `done` as Vulkan read it while the launch was held
};

// Step 4: the image's memory mapped as a mipmapped array of one level, and that level. The
// description must match the image: its size, its format, its one level.
CUarray mapImage(CUexternalMemory external, CUmipmappedArray& mipmap) {
    CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC arrayDesc{};  // offset 0: the image starts the allocation
    // Width, Height, Depth (0: a 2-D array), Format, NumChannels, Flags (0: vulkan_image.h says why)
    arrayDesc.arrayDesc = {lesson27::kImageWidth, lesson27::kImageHeight, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
    arrayDesc.numLevels = 1;
    CHECK_DRIVER(cuExternalMemoryGetMappedMipmappedArray(&mipmap, external, &arrayDesc));
    CUarray level0 = nullptr;  // level 0 of the mipmapped array (cuda.h:12500-12501); not destroyed apart
    CHECK_DRIVER(cuMipmappedArrayGetLevel(&level0, mipmap, 0));
    return level0;
}

// Step 5: CUDA's wait for go = 1 and its copy of the array are queued before Vulkan's work is even
// submitted; the host watches the copy, then submits Vulkan's commands, whose batch ends by setting
// go = 1. A wait queued before its signal: the CUDA Programming Guide (4.21.2) makes that illegal for
// binary semaphores; go is a timeline semaphore, for which the Vulkan specification allows it, and
// cuda.h states no order (the wait lasts until the value is reached, cuda.h:16774-16781).
Waited copyAfterVulkan(const Vulkan& vk, VkCommandBuffer commands, VkSemaphore go, CUstream stream,
                       CUexternalSemaphore cuGo, CUarray level0, void* host) {
    lesson27::queueArrayCopy(stream, cuGo, level0, host);
    Waited copy;
    copy.held = lesson27::stillRunningAfterHold([&] { return cuStreamQuery(stream); });
    lesson27::submit(vk, commands, VK_NULL_HANDLE, 0, go, 1, VK_NULL_HANDLE);
    copy.ran = lesson27::finishedInTime([&] { return cuStreamQuery(stream); });
    std::printf("CUDA's copy %lld ms after queuing, Vulkan's work not submitted: %s\n",
                static_cast<long long>(lesson27::kHold.count()), copy.held ? "not run" : "ran");
    std::printf("CUDA's copy once Vulkan's work is submitted, within %lld s: %s\n",
                static_cast<long long>(lesson27::kWaitLimit.count()), copy.ran ? "ran" : "not run");
    return copy;
}

// One launch of the graph, watched while `go` is below the value its wait node waits for (`done` is
// read then: its signal node comes after the kernel, so it must not have been set yet), then with
// `go` set to `goValue` from the host.
Waited launchOnce(CUgraphExec exec, CUstream stream, const Vulkan& vk, VkSemaphore go, VkSemaphore done,
                  uint64_t goValue) {
    CHECK_DRIVER(cuGraphLaunch(exec, stream));
    Waited launch;
    launch.held = lesson27::stillRunningAfterHold([&] { return cuStreamQuery(stream); });
    launch.doneWhileHeld = lesson27::timelineValue(vk, done);
    std::printf("done while the launch waits, as Vulkan reads it: %llu\n",
                static_cast<unsigned long long>(launch.doneWhileHeld));
    lesson27::signalFromHost(vk, go, goValue);
    launch.ran = lesson27::finishedInTime([&] { return cuStreamQuery(stream); });
    std::printf("launch, %lld ms with go at %llu: %s\n", static_cast<long long>(lesson27::kHold.count()),
                static_cast<unsigned long long>(goValue - 1), launch.held ? "still waiting" : "finished");
    std::printf("launch, once go is %llu, within %lld s: %s\n", static_cast<unsigned long long>(goValue),
                static_cast<long long>(lesson27::kWaitLimit.count()), launch.ran ? "finished" : "still waiting");
    return launch;
}

// How many counter elements hold `expected`.
int countEqual(CUdeviceptr counter, unsigned int expected) {
    std::vector<unsigned int> values(kCounterCount);
    CHECK_DRIVER(cuMemcpyDtoH(values.data(), counter, values.size() * sizeof(unsigned int)));
    int equal = 0;
    for (unsigned int value : values) equal += value == expected ? 1 : 0;
    return equal;
}

// What the graph's two semaphore nodes hold now (cuGraph*NodeGetParams), against what was set on
// them before instantiation. The arrays returned belong to the node (cuda.h:19422-19424).
bool nodesHold(CUgraphNode waitNode, CUgraphNode signalNode, CUexternalSemaphore go, CUexternalSemaphore done,
               unsigned long long value) {
    CUDA_EXT_SEM_WAIT_NODE_PARAMS waitNow{};
    CHECK_DRIVER(cuGraphExternalSemaphoresWaitNodeGetParams(waitNode, &waitNow));
    CUDA_EXT_SEM_SIGNAL_NODE_PARAMS signalNow{};
    CHECK_DRIVER(cuGraphExternalSemaphoresSignalNodeGetParams(signalNode, &signalNow));
    if (waitNow.numExtSems != 1 || signalNow.numExtSems != 1) {  // the arrays hold numExtSems entries
        std::printf("graph's nodes now: %u and %u semaphores (1 each expected)\n", waitNow.numExtSems,
                    signalNow.numExtSems);
        return false;
    }
    std::printf("graph's wait node now: %u semaphore, go >= %llu\n", waitNow.numExtSems,
                waitNow.paramsArray[0].params.fence.value);
    std::printf("graph's signal node now: %u semaphore, done = %llu\n", signalNow.numExtSems,
                signalNow.paramsArray[0].params.fence.value);
    return waitNow.extSemArray[0] == go && waitNow.paramsArray[0].params.fence.value == value &&
           signalNow.extSemArray[0] == done && signalNow.paramsArray[0].params.fence.value == value;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "Vulkan: the loader and a Vulkan 1.2 instance");
    Vulkan vk;
    std::string skip = lesson27::openInstance(vk);
    if (!skip.empty()) return lesson27::skipAndClose(vk, skip);

    course::printStep(2, "CUDA: the device, its UUID, timeline semaphore interop");
    CHECK_DRIVER(cuInit(0));
    const lesson27::CudaDevice cuda = lesson27::openCudaDevice(ordinal);
    const CUdevice device = cuda.device;
    if (!cuda.timelineInterop) return lesson27::skipAndClose(vk, "this CUDA device cannot import timeline semaphores");

    course::printStep(3, "Vulkan: the device with the same UUID, and one queue");
    skip = lesson27::pickDevice(vk, cuda.uuid);
    if (skip.empty()) skip = lesson27::imageExportable(vk, lesson27::kImageFormat, lesson27::kImageUsage);
    if (!skip.empty()) return lesson27::skipAndClose(vk, skip);
    lesson27::createDevice(vk);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("vulkan_kernels.fatbin").c_str()));
    CUfunction countLaunch = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&countLaunch, module, "countLaunch"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    // Step 4: the image has a dedicated allocation, and the import says so.
    course::printStep(4, "a Vulkan image, imported into CUDA as a mipmapped array");
    lesson27::ExportableMemory imageMemory;
    const VkImage image = lesson27::createExportableImage(vk, lesson27::kImageFormat, lesson27::kImageWidth,
                                                          lesson27::kImageHeight, lesson27::kImageUsage, imageMemory);
    std::printf("image: %u x %u, VK_FORMAT_R8G8B8A8_UINT, optimal tiling; allocation size: %llu bytes, dedicated\n",
                lesson27::kImageWidth, lesson27::kImageHeight, static_cast<unsigned long long>(imageMemory.size));
    const CUexternalMemory external =
        lesson27::importMemory(lesson27::exportMemoryFd(vk, imageMemory.memory), imageMemory.size, true);
    if (external == nullptr) {  // refused and reported: the end, as CHECK_DRIVER's, all released
        lesson27::releaseAfterRefusal(vk, nullptr, stream, module, device, VK_NULL_HANDLE, image, imageMemory.memory);
        return EXIT_FAILURE;
    }
    CUmipmappedArray mipmap = nullptr;
    const CUarray level0 = mapImage(external, mipmap);
    course::Verdict verdict;
    verdict.check("CUDA's array has the image's size and format", lesson27::arrayMatchesImage(level0));
    const VkSemaphore go = lesson27::createExportableTimeline(vk);    // Vulkan (device, then host) -> CUDA
    const VkSemaphore done = lesson27::createExportableTimeline(vk);  // CUDA -> Vulkan
    CUexternalSemaphore cuGo = lesson27::importTimelineSemaphore(lesson27::exportSemaphoreFd(vk, go));
    CUexternalSemaphore cuDone = lesson27::importTimelineSemaphore(lesson27::exportSemaphoreFd(vk, done));
    std::printf("mapped: 1 level, level 0 as a CUarray; semaphores imported: go, done\n");
    // Work that did not run in time still waits: lesson27::endUnfinished says what can be released.
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    const auto unfinished = [&] {
        if (exec != nullptr) CHECK_DRIVER(cuGraphExecDestroy(exec));
        if (graph != nullptr) CHECK_DRIVER(cuGraphDestroy(graph));
        CHECK_DRIVER(cuStreamDestroy(stream));
        return lesson27::endUnfinished(verdict, "CUDA's memory, semaphores, external memory, module; Vulkan's objects");
    };

    course::printStep(5, "CUDA queues a wait for go = 1 and a copy; then Vulkan clears, copies, sets go = 1");
    lesson27::ImageWrite write = lesson27::prepareImageWrite(vk, image);
    void* hostImage = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&hostImage, lesson27::kImageWidth * lesson27::kImageHeight * 4));
    const Waited copy = copyAfterVulkan(vk, write.commands, go, stream, cuGo, level0, hostImage);
    verdict.check("CUDA's copy waited for Vulkan's signal", copy.held && copy.ran);
    if (!copy.ran) return unfinished();
    lesson27::checkTexels(hostImage, verdict);

    // Step 6: wait node -> kernel node -> signal node. A node copies the semaphore handles and
    // values it is given; cuGraphExternalSemaphores*NodeSetParams replaces them in the graph.
    course::printStep(6, "a graph: wait for go, count, signal done; its nodes get new values");
    CUdeviceptr counter = 0;
    CHECK_DRIVER(cuMemAlloc(&counter, kCounterCount * sizeof(unsigned int)));
    // Zeroed in the graph's stream: a non-blocking stream "should perform no implicit synchronization
    // with stream 0" (cuda.h:14921-14922), so a cuMemsetD32 there would not be ordered before the launches.
    CHECK_DRIVER(cuMemsetD32Async(counter, 0, kCounterCount, stream));
    CHECK_DRIVER(cuGraphCreate(&graph, 0));
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS waitValue{};
    waitValue.params.fence.value = 1;  // go reached 1 in step 5: as added, the node would not wait
    CUDA_EXT_SEM_WAIT_NODE_PARAMS waitNodeParams{&cuGo, &waitValue, 1};
    CUgraphNode waitNode = nullptr;
    CHECK_DRIVER(cuGraphAddExternalSemaphoresWaitNode(&waitNode, graph, nullptr, 0, &waitNodeParams));
    const CUgraphNode kernelNode = addCountNode(graph, waitNode, countLaunch, counter);
    CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS signalValue{};
    signalValue.params.fence.value = 1;
    CUDA_EXT_SEM_SIGNAL_NODE_PARAMS signalNodeParams{&cuDone, &signalValue, 1};
    CUgraphNode signalNode = nullptr;
    CHECK_DRIVER(cuGraphAddExternalSemaphoresSignalNode(&signalNode, graph, &kernelNode, 1, &signalNodeParams));
    waitValue.params.fence.value = 2;
    CHECK_DRIVER(cuGraphExternalSemaphoresWaitNodeSetParams(waitNode, &waitNodeParams));
    signalValue.params.fence.value = 2;
    CHECK_DRIVER(cuGraphExternalSemaphoresSignalNodeSetParams(signalNode, &signalNodeParams));
    std::printf("nodes as added: wait go >= 1, kernel, signal done = 1; as set: wait go >= 2, signal done = 2\n");

    course::printStep(7, "instantiate and launch: the graph waits for go = 2, then signals done = 2");
    CHECK_DRIVER(course::graphInstantiate(&exec, graph, 0));
    const Waited first = launchOnce(exec, stream, vk, go, done, 2);
    verdict.check("first launch waited for the value set on the graph node", first.held && first.ran);
    verdict.check("the signal node did not signal while the launch was held", first.doneWhileHeld == 0);
    if (!first.ran) return unfinished();
    const uint64_t firstDone = lesson27::timelineValue(vk, done);
    std::printf("done, as Vulkan reads it: %llu\n", static_cast<unsigned long long>(firstDone));
    verdict.check("first launch signalled the value set on the graph node", firstDone == 2);

    // Step 8: new values on the executable graph only. cuda.h:20870-20872, 20914-20916: they
    // affect later launches of the exec, and the graph's node is not modified.
    course::printStep(8, "new values on the executable graph: wait for go = 3, signal done = 3");
    waitValue.params.fence.value = 3;
    CHECK_DRIVER(cuGraphExecExternalSemaphoresWaitNodeSetParams(exec, waitNode, &waitNodeParams));
    signalValue.params.fence.value = 3;
    CHECK_DRIVER(cuGraphExecExternalSemaphoresSignalNodeSetParams(exec, signalNode, &signalNodeParams));
    const Waited second = launchOnce(exec, stream, vk, go, done, 3);
    verdict.check("second launch waited for the value set on the exec", second.held && second.ran);
    if (!second.ran) return unfinished();
    const uint64_t secondDone = lesson27::timelineValue(vk, done);
    std::printf("done, as Vulkan reads it: %llu\n", static_cast<unsigned long long>(secondDone));
    verdict.check("second launch signalled the value set on the exec", secondDone == 3);
    const int counted = countEqual(counter, 2);
    std::printf("counter elements at 2 after two launches: %d of %d\n", counted, kCounterCount);
    verdict.check("the kernel node ran once per launch", counted == kCounterCount);
    verdict.check("the graph's nodes kept their own values, not the exec's",
                  nodesHold(waitNode, signalNode, cuGo, cuDone, 2));

    course::printStep(9, "release: CUDA first, then Vulkan, newest first");
    CHECK_DRIVER(cuGraphExecDestroy(exec));
    CHECK_DRIVER(cuGraphDestroy(graph));
    CHECK_DRIVER(cuMemFree(counter));
    CHECK_DRIVER(cuMemFreeHost(hostImage));
    CHECK_DRIVER(cuDestroyExternalSemaphore(cuDone));
    CHECK_DRIVER(cuDestroyExternalSemaphore(cuGo));
    CHECK_DRIVER(cuMipmappedArrayDestroy(mipmap));  // cuda.h:16461
    CHECK_DRIVER(cuDestroyExternalMemory(external));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    CHECK_VULKAN(vk.vkDeviceWaitIdle(vk.device));
    vk.vkDestroyCommandPool(vk.device, write.pool, nullptr);  // frees its command buffer
    lesson27::freeHostBuffer(vk, write.staging);
    vk.vkDestroySemaphore(vk.device, done, nullptr);
    vk.vkDestroySemaphore(vk.device, go, nullptr);
    vk.vkDestroyImage(vk.device, image, nullptr);
    vk.vkFreeMemory(vk.device, imageMemory.memory, nullptr);
    lesson27::closeVulkan(vk);
    std::printf(
        "released: graph exec, graph, counter, host buffer, semaphores, mipmapped array, external memory, "
        "stream, module, context; Vulkan pool, staging buffer, semaphores, image, memory, device, instance\n");

    course::printStep(10, "check");
    return verdict.finish();
}

#endif  // LESSON27_HAVE_VULKAN
