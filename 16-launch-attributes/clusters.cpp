// Lesson 16, program 1 — thread-block clusters and distributed shared memory.
//
// From compute capability 9.0 on, blocks can be grouped into clusters: the blocks of a
// cluster run at the same time on one GPU processing cluster (GPC), can wait for each
// other (cluster.sync()), and can read and write each other's shared memory. A launch
// asks for clusters with the attribute CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION of
// cuLaunchKernelEx. This program launches clusters of 2, 4 and 8 blocks, checks that each
// block read its neighbour's shared memory, asks how many clusters fit at once, and
// shows the launches the driver refuses instead of quietly changing them.
//
//   clusters               the steps, with their checks
//   clusters --device N    another GPU
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "launch_helpers.h"

#if CUDA_VERSION >= 12000
namespace {

constexpr unsigned int kBlocks = 64;    // divisible by 1, 2, 4, 8 and 16
constexpr unsigned int kThreads = 128;  // the kernel's shared tile holds 256 ints

CUlaunchAttribute clusterDimension(unsigned int x) {
    CUlaunchAttribute attribute{};
    attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attribute.value.clusterDim.x = x;
    attribute.value.clusterDim.y = 1;
    attribute.value.clusterDim.z = 1;
    return attribute;
}

// Launches cluster_neighbour in clusters of `size` and returns how many of the values
// came from the right block: in a 1-D grid, block b has rank b % size in its cluster,
// and its neighbour is the block of rank (rank + 1) % size of the same cluster.
unsigned int launchAndCount(CUfunction kernel, unsigned int size, CUdeviceptr out, CUstream stream) {
    CUlaunchAttribute attribute = clusterDimension(size);
    CUlaunchConfig config = lesson16::launchConfig(kBlocks, kThreads, stream, &attribute, 1);
    void* params[] = {&out};
    CHECK_DRIVER(cuMemsetD32Async(out, 0xFFFFFFFFu, kBlocks * kThreads, stream));
    CHECK_DRIVER(cuLaunchKernelEx(&config, kernel, params, nullptr));
    const std::vector<int> values = lesson16::copyBack(out, kBlocks * kThreads, stream);
    unsigned int correct = 0;
    for (unsigned int b = 0; b < kBlocks; ++b) {
        const unsigned int first = b - b % size;
        const unsigned int neighbour = first + (b % size + 1) % size;
        for (unsigned int t = 0; t < kThreads; ++t)
            if (values[b * kThreads + t] == static_cast<int>(neighbour * 1000 + t)) ++correct;
    }
    return correct;
}

// How many clusters of `size` blocks can be resident at once (the driver's answer for
// this kernel, block size and shared memory), or the error code's name.
void printMaxActiveClusters(CUfunction kernel, unsigned int size) {
    CUlaunchAttribute attribute = clusterDimension(size);
    CUlaunchConfig config = lesson16::launchConfig(kBlocks, kThreads, nullptr, &attribute, 1);
    int clusters = 0;
    const CUresult result = REPORT_DRIVER(cuOccupancyMaxActiveClusters(&clusters, kernel, &config));
    if (result == CUDA_SUCCESS)
        std::printf("max active clusters of %u: %d\n", size, clusters);
    else
        std::printf("max active clusters of %u: %s\n", size, course::driverErrorName(result));
}

}  // namespace
#endif

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    course::printStep(1, "initialise, check compute capability and cluster support");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", ordinal, name);
#if CUDA_VERSION < 12000
    return lesson16::skipForOldHeaders("clusters");
#else
    const int capability = lesson16::computeCapability(device);
    if (capability < 90) return lesson16::skipForComputeCapability("clusters", capability);
    int clusterLaunch = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&clusterLaunch, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, device));
    std::printf("cluster launch supported: %s\n", clusterLaunch ? "yes" : "no");
    if (!verdict.check("the device supports cluster launch", clusterLaunch != 0)) return verdict.finish();

    course::printStep(2, "retain the primary context, load the kernel, allocate the output");
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("launch_kernels.fatbin").c_str()));
    CUfunction kernel = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&kernel, module, "cluster_neighbour"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr out = 0;
    CHECK_DRIVER(cuMemAlloc(&out, kBlocks * kThreads * sizeof(int)));

    // Step 3: occupancy for clusters. A cluster must fit on one GPC at once, so the answer
    // is not "blocks per SM x SMs / size": it depends on how many SMs each GPC has.
    course::printStep(3, "cuOccupancyMaxActiveClusters: how many clusters fit at once");
    for (unsigned int size : {1u, 2u, 4u, 8u}) printMaxActiveClusters(kernel, size);

    // Step 4: the kernel has no compile-time cluster size (__cluster_dims__), so the
    // launch attribute chooses it. Each block reads its neighbour's shared tile.
    course::printStep(4, "launch in clusters of 2, 4, 8: read the neighbour's shared memory");
    bool allRead = true;
    for (unsigned int size : {2u, 4u, 8u}) {
        const unsigned int correct = launchAndCount(kernel, size, out, stream);
        std::printf("clusters of %u: %u of %u values came from the neighbour block's shared memory\n", size, correct,
                    kBlocks * kThreads);
        allRead = allRead && correct == kBlocks * kThreads;
    }
    verdict.check("every block read its neighbour's shared memory in portable clusters", allRead);

    // Step 5: what the driver refuses. 8 is the portable maximum; a larger size needs the
    // kernel to opt in, and the grid must be a whole number of clusters. Neither is
    // rounded or ignored: the launch fails and nothing runs.
    course::printStep(5, "launches the driver refuses: too large, not dividing the grid");
    CUlaunchAttribute sixteen = clusterDimension(16);
    CUlaunchConfig config16 = lesson16::launchConfig(kBlocks, kThreads, stream, &sixteen, 1);
    void* params[] = {&out};
    const CUresult tooLarge = REPORT_DRIVER(cuLaunchKernelEx(&config16, kernel, params, nullptr));
    std::printf("clusters of 16 without opting in: %s\n", course::driverErrorName(tooLarge));
    CUlaunchAttribute three = clusterDimension(3);
    CUlaunchConfig config3 = lesson16::launchConfig(kBlocks, kThreads, stream, &three, 1);
    const CUresult notDividing = REPORT_DRIVER(cuLaunchKernelEx(&config3, kernel, params, nullptr));
    std::printf("clusters of 3 in a grid of %u blocks: %s\n", kBlocks, course::driverErrorName(notDividing));
    verdict.check("a cluster above the portable size refused without opting in", tooLarge != CUDA_SUCCESS);
    verdict.check("a cluster size not dividing the grid refused", notDividing != CUDA_SUCCESS);

    // Step 6: opting in (CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) lets the
    // kernel use what this GPU can do beyond 8; occupancy answers for it too.
    course::printStep(6, "opt in to non-portable cluster sizes, then clusters of 16");
    CHECK_DRIVER(cuFuncSetAttribute(kernel, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
    printMaxActiveClusters(kernel, 16);
    const unsigned int correct16 = launchAndCount(kernel, 16, out, stream);
    std::printf("clusters of 16: %u of %u values came from the neighbour block's shared memory\n", correct16,
                kBlocks * kThreads);
    verdict.check("every block read its neighbour's shared memory in a non-portable cluster",
                  correct16 == kBlocks * kThreads);

    course::printStep(7, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(out));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: output buffer, stream, module, primary context\n");

    return verdict.finish();
#endif
}
