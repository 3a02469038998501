// Lesson 22, program 4 — occupancy: the driver's prediction against blocks counted on the GPU.
//
// cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags returns "the number of the maximum
// active blocks per streaming multiprocessor" (cuda.h:21631-21632). Here the kernels count
// themselves: each block adds itself to a counter of the SM it runs on (%smid), stays 1 ms
// (%globaltimer read as nanoseconds: kernels/occupancy_kernels.cu) and takes itself off. The grid
// has twice as many blocks as the GPU could hold at its block limit, so blocks are still waiting
// to start while the first ones run; the most blocks one SM held at once is the measured
// occupancy: what the GPU's scheduler did, which cuda.h does not promise to equal the prediction.
// Limits by warps, blocks, registers and shared memory; the calls that suggest a block size and a
// shared memory size; clusters (9.0); cache preferences.
//
//   occupancy               the steps, with their checks
//   occupancy --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "cache_preference.h"
#include "kernel_types.h"
#include "lesson22.h"
#include "residency.h"
#include "suggestion.h"

namespace {

using lesson22::Gpu;
using lesson22::measure;
using lesson22::peakOf;
using lesson22::sharedBytesFor;
using lesson22::smsHolding;

int predict(CUfunction function, int blockSize, size_t dynamicBytes) {
    int blocks = 0;
    CHECK_DRIVER(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, function, blockSize, dynamicBytes,
                                                                      CU_OCCUPANCY_DEFAULT));
    return blocks;
}

// One configuration's line and check: the prediction against the measured peak.
void report(course::Verdict& verdict, const std::string& name, int predicted,
            const std::vector<unsigned int>& counters) {
    const unsigned int peak = peakOf(counters);
    std::printf("%s: predicted %d blocks per SM, measured %u (held on %u of %u SMs)\n", name.c_str(), predicted, peak,
                smsHolding(counters, static_cast<unsigned int>(predicted)), smsHolding(counters, 1));
    lesson22::checkMeasured(verdict, ("residency matches the prediction: " + name).c_str(),
                            predicted > 0 && peak == static_cast<unsigned int>(predicted));
}

int attribute(CUdevice device, CUdevice_attribute which) {
    int value = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&value, which, device));
    return value;
}

// Step 3: three launches, each limited by one resource. Each prediction is compared with the
// blocks counted (report) and with the limit that should decide it, worked out from step 1's
// attributes: threads for 1024-thread blocks; the block count for 32-thread blocks, whose threads
// and registers would let more in; registers for residentHeavy's 256-thread blocks, which need
// heavyRegisters x the warp size a warp, in whole warps (residency.h: blocksByRegisters), while
// their threads alone would let more in.
void limitedBy(course::Verdict& verdict, const Gpu& gpu, CUfunction resident, CUfunction heavy, int heavyRegisters,
               int capability) {
    const int warpsPredicted = predict(resident, 1024, 0);
    const auto warps = measure(gpu, resident, 1024, 0);
    report(verdict, "warps (resident, 1024 threads a block)", warpsPredicted, warps);
    std::printf("SM identifiers (%%nsmid): %u; SMs that ran blocks: %u; blocks with %%smid >= %u: %u\n",
                warps[lesson22::kSmIdCount], smsHolding(warps, 1), lesson22::kMaxSmIds, warps[lesson22::kOutOfRange]);
    int withoutOverride = 0;
    CHECK_DRIVER(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&withoutOverride, resident, 1024, 0,
                                                                      CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE));
    std::printf("the same with CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE: %d\n", withoutOverride);
    std::printf("the thread limit for 1024-thread blocks: %d blocks per SM\n", gpu.threadsPerSm / 1024);
    verdict.check("warps: the prediction for 1024-thread blocks is the SM's thread limit",
                  warpsPredicted == gpu.threadsPerSm / 1024);

    const int blocksPredicted = predict(resident, 32, 0);
    report(verdict, "blocks (resident, 32 threads a block)", blocksPredicted, measure(gpu, resident, 32, 0));
    std::printf("the block limit: %d blocks per SM\n", gpu.blocksPerSm);
    verdict.check("blocks: the prediction for 32-thread blocks is the SM's block limit",
                  blocksPredicted == gpu.blocksPerSm);

    const int registersPredicted = predict(heavy, 256, 0);
    report(verdict, "registers (residentHeavy, 256 threads a block)", registersPredicted, measure(gpu, heavy, 256, 0));
    const int byThreads = gpu.threadsPerSm / 256;
    const int byRegisters = lesson22::blocksByRegisters(gpu, capability, heavyRegisters, 256);
    std::printf("residentHeavy, 256 threads a block: %d blocks per SM by threads, %d by registers\n", byThreads,
                byRegisters);
    verdict.check("registers: residentHeavy's prediction is what its registers allow, below the thread limit",
                  byRegisters > 0 && byRegisters < byThreads && registersPredicted == byRegisters);
    // The call without flags: CU_OCCUPANCY_DEFAULT "maintains the default behavior as"
    // cuOccupancyMaxActiveBlocksPerMultiprocessor (cuda.h:21637-21638). Whatever the granularity,
    // resident blocks use no more threads, blocks or registers than the SM has.
    int plain = 0;
    CHECK_DRIVER(cuOccupancyMaxActiveBlocksPerMultiprocessor(&plain, heavy, 256, 0));
    const int totals =
        std::min({byThreads, gpu.blocksPerSm, heavyRegisters > 0 ? gpu.registersPerSm / (heavyRegisters * 256) : 0});
    std::printf("cuOccupancyMaxActiveBlocksPerMultiprocessor (residentHeavy, 256 threads): %d; the SM's totals: %d\n",
                plain, totals);
    verdict.check("the call without flags gives CU_OCCUPANCY_DEFAULT's answer, within the SM's totals",
                  plain == registersPredicted && plain >= 1 && plain <= totals);
}

#if CUDA_VERSION >= 12000
// Step 7: clusters of the largest size the driver suggests for 128-thread blocks, launched with
// cuLaunchKernelEx; rank 0 of each cluster counts it in and out. cuda.h says the number of
// clusters cuOccupancyMaxActiveClusters returns "is not guaranteed to be achievable"
// (cuda.h:21863): the check is that it is never exceeded, that every cluster ran, and that at
// least half of it was resident at once (a margin: the README's captured run reached all of it),
// so that clusters that ran one after another, not side by side, would show.
void clusters(course::Verdict& verdict, const Gpu& gpu, CUfunction function) {
    CUlaunchAttribute dimension{};
    dimension.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    dimension.value.clusterDim.x = 1;
    dimension.value.clusterDim.y = 1;
    dimension.value.clusterDim.z = 1;
    CUlaunchConfig config{};
    config.gridDimX = gpu.blocks;
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 128;
    config.blockDimY = config.blockDimZ = 1;
    config.attrs = &dimension;
    config.numAttrs = 1;
    const char* name = "clusters resident at once: at least half of cuOccupancyMaxActiveClusters, never more";
    int size = 0;  // "The cluster dimensions in config are ignored" (cuda.h:21813)
    CHECK_DRIVER(cuOccupancyMaxPotentialClusterSize(&size, function, &config));
    std::printf("cuOccupancyMaxPotentialClusterSize (128 threads a block): %d blocks\n", size);
    if (size < 1) {  // cuda.h does not rule out 0: then there is no cluster to launch, nor a size to divide by
        std::printf("clusters: none launched\n");
        verdict.check(name, false);
        return;
    }
    dimension.value.clusterDim.x = static_cast<unsigned int>(size);
    const unsigned int launched = (gpu.blocks + size - 1) / size;
    config.gridDimX = launched * size;
    int predicted = 0;
    CHECK_DRIVER(cuOccupancyMaxActiveClusters(&predicted, function, &config));
    const auto host =
        lesson22::counted(gpu, [&](void** params) { CHECK_DRIVER(cuLaunchKernelEx(&config, function, params, nullptr)); });
    const unsigned int peak = host[lesson22::kClustersPeak];
    const unsigned int done = host[lesson22::kClustersDone];
    std::printf("cuOccupancyMaxActiveClusters (clusters of %d): %d\n", size, predicted);
    std::printf("clusters of %d: at most %u resident at once, %u of %u clusters ran\n", size, peak, done, launched);
    std::printf("the predicted number reached: %s\n", peak == static_cast<unsigned int>(predicted) ? "yes" : "no");
    lesson22::checkMeasured(verdict, name,
                            predicted > 0 && 2 * peak >= static_cast<unsigned int>(predicted) &&
                                peak <= static_cast<unsigned int>(predicted) && done == launched);
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    course::printStep(1, "initialise, load the kernels, read the limits of one SM");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    const int capability = lesson22::printDevice(device, ordinal);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("occupancy_kernels.fatbin").c_str()));
    CUfunction resident = nullptr;
    CUfunction heavy = nullptr;
    CUfunction cluster = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&resident, module, "resident"));
    CHECK_DRIVER(cuModuleGetFunction(&heavy, module, "residentHeavy"));
    CHECK_DRIVER(cuModuleGetFunction(&cluster, module, "residentCluster"));
    Gpu gpu;
    gpu.sms = attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    gpu.threadsPerSm = attribute(device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    gpu.blocksPerSm = attribute(device, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
    gpu.registersPerSm = attribute(device, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
    gpu.warpSize = attribute(device, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    const int optIn = attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    gpu.blocks = 2u * static_cast<unsigned int>(gpu.sms * gpu.blocksPerSm);
    std::printf("SMs: %d\n", gpu.sms);
    std::printf("one SM holds at most: %d threads, %d blocks, %d registers, %d bytes of shared memory\n",
                gpu.threadsPerSm, gpu.blocksPerSm, gpu.registersPerSm,
                attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
    std::printf("shared memory the driver reserves per block: %d bytes\n",
                attribute(device, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK));
    int lightRegisters = 0;
    int heavyRegisters = 0;
    CHECK_DRIVER(cuFuncGetAttribute(&lightRegisters, CU_FUNC_ATTRIBUTE_NUM_REGS, resident));
    CHECK_DRIVER(cuFuncGetAttribute(&heavyRegisters, CU_FUNC_ATTRIBUTE_NUM_REGS, heavy));
    std::printf("registers per thread: resident %d, residentHeavy %d\n", lightRegisters, heavyRegisters);
    CHECK_DRIVER(cuMemAlloc(&gpu.counters, lesson22::kCounterWords * sizeof(unsigned int)));
    CHECK_DRIVER(cuMemAlloc(&gpu.in, lesson22::kHeavyValues * 1024 * sizeof(float)));
    CHECK_DRIVER(cuMemsetD32(gpu.in, 0, lesson22::kHeavyValues * 1024));
    CHECK_DRIVER(cuMemAlloc(&gpu.out, sizeof(float)));

    // Step 2: a cache preference is only a preference (cuda.h:6845-6847).
    course::printStep(2, "cache preferences: the context's, then each kernel's");
    lesson22::contextCachePreference(verdict);
    // The measured kernels prefer shared memory. A function's own PREFER_NONE (its default) means
    // "the current context-wide setting will be used" (cuda.h:17267-17269); PREFER_SHARED
    // overrides the context's. A hint only (17264-17266): whether it changes a count here is not
    // measured, and no call reads a function's preference back (only the context's): no check
    // depends on it.
    CHECK_DRIVER(cuFuncSetCacheConfig(resident, CU_FUNC_CACHE_PREFER_SHARED));
    CHECK_DRIVER(cuFuncSetCacheConfig(heavy, CU_FUNC_CACHE_PREFER_SHARED));
    // The dynamic limit "can be increased to" the opt-in limit less the function's static shared
    // memory (cuda.h:990-991), not to the opt-in limit itself.
    int residentStatic = 0;
    CHECK_DRIVER(cuFuncGetAttribute(&residentStatic, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, resident));
    const int dynamicLimit = optIn - residentStatic;
    CHECK_DRIVER(cuFuncSetAttribute(resident, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamicLimit));
    std::printf("resident: CU_FUNC_CACHE_PREFER_SHARED, up to %d bytes of dynamic shared memory\n", dynamicLimit);

    course::printStep(3, "limited by warps, by the block count, by registers");
    limitedBy(verdict, gpu, resident, heavy, heavyRegisters, capability);

    // Step 4: a block size chosen by the driver when the dynamic shared memory grows with it.
    course::printStep(4, "cuOccupancyMaxPotentialBlockSizeWithFlags with a dynamic shared memory function");
    int minGrid = 0;
    int suggested = 0;
    CHECK_DRIVER(cuOccupancyMaxPotentialBlockSizeWithFlags(&minGrid, &suggested, resident, sharedBytesFor, 0, 0,
                                                           CU_OCCUPANCY_DEFAULT));
    std::printf("suggested block size: %d threads (%zu bytes of dynamic shared memory), minimum grid %d blocks\n",
                suggested, sharedBytesFor(suggested), minGrid);
    const int sharedPredicted = predict(resident, suggested, sharedBytesFor(suggested));
    report(verdict, "shared memory (resident, the suggested block size)", sharedPredicted,
           measure(gpu, resident, suggested, sharedBytesFor(suggested)));
    lesson22::checkSuggestion(verdict, gpu, resident, suggested, minGrid, dynamicLimit);

    // Step 5: "the maximum size of dynamic shared memory to allow numBlocks blocks per SM"
    // (cuda.h:21786), for 3 blocks of 256 threads. cuda_occupancy.h's own version of this
    // calculation divides the SM's shared memory by the number of blocks (line 1945) without
    // taking off the shared memory the driver reserves for each block, which its occupancy
    // calculation adds to every block (line 1414). In the README's captured run the size returned
    // held 2 blocks, predicted and measured; that size less the reserve held 3. Both launches are
    // measured; the second must hold the 3 blocks asked for.
    course::printStep(5, "cuOccupancyAvailableDynamicSMemPerBlock for 3 blocks, and that less the reserve");
    const int asked = 3;
    size_t available = 0;
    CHECK_DRIVER(cuOccupancyAvailableDynamicSMemPerBlock(&available, resident, asked, 256));
    const size_t reserve = static_cast<size_t>(attribute(device, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK));
    const size_t lessReserve = available > reserve ? available - reserve : 0;
    std::printf("dynamic shared memory available to each of %d blocks of 256 threads: %zu bytes\n", asked, available);
    report(verdict, "the size returned for 3 blocks (resident, 256 threads a block)", predict(resident, 256, available),
           measure(gpu, resident, 256, available));
    const int lessPredicted = predict(resident, 256, lessReserve);
    const unsigned int lessMeasured = peakOf(measure(gpu, resident, 256, lessReserve));
    std::printf("the size less the reserve: %zu bytes, predicted %d blocks per SM, measured %u, asked for %d\n",
                lessReserve, lessPredicted, lessMeasured, asked);
    lesson22::checkMeasured(verdict, "the size less the reserve holds the 3 blocks asked for, predicted and measured",
                            lessPredicted == asked && lessMeasured == static_cast<unsigned int>(asked));

    // Step 6: the same kernel preferring L1. The driver may choose another split "if required to
    // execute" the kernel (cuda.h:17264-17266): what it did is printed, not checked.
    course::printStep(6, "the same launch preferring L1: printed, not checked");
    CHECK_DRIVER(cuFuncSetCacheConfig(resident, CU_FUNC_CACHE_PREFER_L1));
    const unsigned int preferL1 = peakOf(measure(gpu, resident, 256, available));
    std::printf("CU_FUNC_CACHE_PREFER_L1, 256 threads: %zu bytes, predicted %d, measured %u\n", available,
                predict(resident, 256, available), preferL1);

    course::printStep(7, "clusters: cuOccupancyMaxPotentialClusterSize, cuOccupancyMaxActiveClusters");
#if CUDA_VERSION >= 12000
    if (capability >= 90 && attribute(device, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) != 0)
        clusters(verdict, gpu, cluster);
    else
        std::printf("section clusters: SKIP (needs compute capability 9.0 and cluster launch)\n");
#else
    (void)capability;
    (void)cluster;
    std::printf("section clusters: SKIP (built with CUDA %s headers; cuLaunchKernelEx is used from 12.0 on)\n",
                course::formatCudaVersion(CUDA_VERSION).c_str());
#endif

    course::printStep(8, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(gpu.out));
    CHECK_DRIVER(cuMemFree(gpu.in));
    CHECK_DRIVER(cuMemFree(gpu.counters));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: 3 buffers, 1 module, the primary context\n");
    return verdict.finish();
}
