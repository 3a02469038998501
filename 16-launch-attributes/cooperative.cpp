// Lesson 16, program 2 — a cooperative launch: one barrier across the whole grid.
//
// __syncthreads() waits for the threads of one block. A grid-wide barrier
// (cooperative_groups grid.sync()) is only possible when every block of the grid is
// resident at the same time: a block still waiting for a free SM could never arrive.
// The launch attribute CU_LAUNCH_ATTRIBUTE_COOPERATIVE asks the driver to guarantee
// that, and it refuses a grid larger than the GPU can hold at once. The limit comes from
// occupancy: blocks per SM (cuOccupancyMaxActiveBlocksPerMultiprocessor) x SMs.
//
// cuLaunchCooperativeKernel, the call from before launch attributes, makes the same launch.
//
//   cooperative               the steps, with their checks
//   cooperative --device N    another GPU
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "launch_helpers.h"

#if CUDA_VERSION >= 12000
namespace {

constexpr unsigned int kThreads = 256;

// grid_rotate with `blocks` blocks as a cooperative launch; n = blocks x kThreads.
CUresult launchCooperative(CUfunction kernel, unsigned int blocks, CUdeviceptr data, CUdeviceptr out, CUstream stream) {
    CUlaunchAttribute cooperative{};
    cooperative.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    cooperative.value.cooperative = 1;
    CUlaunchConfig config = lesson16::launchConfig(blocks, kThreads, stream, &cooperative, 1);
    int n = static_cast<int>(blocks * kThreads);
    void* params[] = {&data, &out, &n};
    return cuLaunchKernelEx(&config, kernel, params, nullptr);
}

// How many of the first n values hold what grid_rotate writes after grid.sync(): 3 x the
// value of the thread one block further on (wrapping at n), + 1.
size_t rotatedCorrectly(const std::vector<int>& values, size_t n) {
    size_t correct = 0;
    for (size_t i = 0; i < n; ++i)
        if (values[i] == static_cast<int>(3 * ((i + kThreads) % n) + 1)) ++correct;
    return correct;
}

}  // namespace
#endif

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    course::printStep(1, "initialise, check cooperative launch support");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", ordinal, name);
#if CUDA_VERSION < 12000
    return lesson16::skipForOldHeaders("cooperative launch");
#else
    int cooperativeLaunch = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&cooperativeLaunch, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, device));
    std::printf("cooperative launch supported: %s\n", cooperativeLaunch ? "yes" : "no");
    if (!cooperativeLaunch) {
        std::printf("section cooperative launch: SKIP (CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH is 0)\n");
        std::printf("Result = SKIP (this device cannot run cooperative launches)\n");
        return course::kExitNotApplicable;
    }

    course::printStep(2, "retain the primary context, load the kernel");
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("launch_kernels.fatbin").c_str()));
    CUfunction kernel = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&kernel, module, "grid_rotate"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    // Step 3: the largest grid that is resident all at once. Occupancy depends on the
    // kernel (registers, shared memory) and the block size, so it is asked for this kernel.
    course::printStep(3, "the largest cooperative grid: blocks per SM x SMs");
    int blocksPerSm = 0;
    CHECK_DRIVER(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocksPerSm, kernel, kThreads, 0));
    int smCount = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
    const unsigned int maxBlocks = static_cast<unsigned int>(blocksPerSm * smCount);
    std::printf("blocks of %u threads per SM: %d\n", kThreads, blocksPerSm);
    std::printf("SMs: %d\n", smCount);
    std::printf("largest cooperative grid: %u blocks\n", maxBlocks);

    // Buffers for one block more than that, so that even a launch the driver should refuse
    // would stay inside them.
    const size_t count = static_cast<size_t>(maxBlocks + 1) * kThreads;
    CUdeviceptr data = 0;
    CUdeviceptr out = 0;
    CHECK_DRIVER(cuMemAlloc(&data, count * sizeof(int)));
    CHECK_DRIVER(cuMemAlloc(&out, count * sizeof(int)));

    // Step 4: phase 1 writes, grid.sync(), phase 2 reads what the next block wrote.
    course::printStep(4, "cooperative launch of the largest grid, grid.sync() between two phases");
    CHECK_DRIVER(cuMemsetD32Async(data, 0xffffffffu, count, stream));  // cuMemAlloc does not clear memory
    CHECK_DRIVER(cuMemsetD32Async(out, 0, count, stream));
    CHECK_DRIVER(launchCooperative(kernel, maxBlocks, data, out, stream));
    const std::vector<int> values = lesson16::copyBack(out, count, stream);
    const size_t n = static_cast<size_t>(maxBlocks) * kThreads;
    const size_t correct = rotatedCorrectly(values, n);
    std::printf("values read from the next block after grid.sync(): %zu of %zu correct\n", correct, n);
    verdict.check("after grid sync every thread read what the next block wrote", correct == n);

    // Step 5: one block more cannot be resident at once, and a cooperative launch is
    // refused rather than started (it would hang at the barrier).
    course::printStep(5, "one block more: the driver refuses the cooperative launch");
    const CUresult tooLarge = REPORT_DRIVER(launchCooperative(kernel, maxBlocks + 1, data, out, stream));
    std::printf("cooperative launch of %u blocks: %s\n", maxBlocks + 1, course::driverErrorName(tooLarge));
    verdict.check("a cooperative grid one block too large refused as too large",
                  tooLarge == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    CHECK_DRIVER(cuStreamSynchronize(stream));

    // Step 6: the older call takes the grid as arguments, with the same limit (cuda.h: blocks per
    // SM from cuOccupancyMaxActiveBlocksPerMultiprocessor x the SM count).
    course::printStep(6, "the same launch with cuLaunchCooperativeKernel");
    // data too is cleared (to words no phase writes): phase 2 can then only read what phase 1 of
    // this launch wrote before grid.sync().
    CHECK_DRIVER(cuMemsetD32Async(data, 0xffffffffu, count, stream));
    CHECK_DRIVER(cuMemsetD32Async(out, 0, count, stream));
    int total = static_cast<int>(n);
    void* params[] = {&data, &out, &total};
    CHECK_DRIVER(cuLaunchCooperativeKernel(kernel, maxBlocks, 1, 1, kThreads, 1, 1, 0, stream, params));
    const size_t correctAgain = rotatedCorrectly(lesson16::copyBack(out, count, stream), n);
    std::printf("cuLaunchCooperativeKernel of %u blocks: %zu of %zu values correct\n", maxBlocks, correctAgain, n);
    verdict.check("cuLaunchCooperativeKernel's grid synced too", correctAgain == n);
    const unsigned int oneMore = maxBlocks + 1;
    int totalOneMore = static_cast<int>(oneMore * kThreads);
    void* paramsOneMore[] = {&data, &out, &totalOneMore};
    const CUresult oldTooLarge =
        REPORT_DRIVER(cuLaunchCooperativeKernel(kernel, oneMore, 1, 1, kThreads, 1, 1, 0, stream, paramsOneMore));
    std::printf("cuLaunchCooperativeKernel of %u blocks: %s\n", oneMore, course::driverErrorName(oldTooLarge));
    verdict.check("cuLaunchCooperativeKernel refuses one block more as too large",
                  oldTooLarge == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    CHECK_DRIVER(cuStreamSynchronize(stream));

    course::printStep(7, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(out));
    CHECK_DRIVER(cuMemFree(data));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: buffers, stream, module, primary context\n");

    return verdict.finish();
#endif
}
