// Lesson 17, program 1 — how the driver cuts a GPU's SMs into green contexts.
//
// A green context is a context provisioned with a subset of the device's SMs: its kernels
// run on those SMs (cuda.h names exceptions: under MPS, and on 9.x once a module with
// dynamic parallelism is loaded, a workload may use more SMs, never fewer). The driver does
// not cut at any size: partitions come in whole groups of SMs that the hardware schedules
// together. This program asks for the device's SMs, splits them with several requested sizes
// and prints what the driver granted next to the rule the documentation gives, then makes
// two green contexts from one split and shows, from the %smid register, that each one's
// kernels stayed on as many SMs as it was given, that the two shared none, and that a kernel
// of the primary context still used the SMs of green context A.
//
//   partitions               the steps, with their checks
//   partitions --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <set>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "green_helpers.h"

namespace {

#if CUDA_VERSION >= 12040
// The SMs a kernel of `blocks` blocks ran on, launched on `stream` (and so in the stream's
// context, green or not). Each block spins 20 us, long enough for the scheduler to spread
// the blocks over every SM it may use, and writes its %smid to `smOfBlock`.
std::set<unsigned int> smsUsed(CUkernel spin, CUstream stream, CUdeviceptr smOfBlock, unsigned int blocks) {
    unsigned long long nanoseconds = 20000;
    void* params[] = {&nanoseconds, &smOfBlock};
    // A CUkernel from cuLibraryGetKernel is launched as a CUfunction; the context comes from the stream.
    CHECK_DRIVER(
        cuLaunchKernel(reinterpret_cast<CUfunction>(spin), blocks, 1, 1, 128, 1, 1, 0, stream, params, nullptr));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    return lesson17::smSet(smOfBlock, blocks);
}
#endif

#if CUDA_VERSION >= 12090
// Ids (CUDA 12.9): unique for the life of the program; given NULL, the id of the green
// context that is current. Whether a green context and its CUcontext share one id, cuda.h does
// not say: printed only.
void checkGreenContextIds(int driverVersion, CUgreenCtx greenA, CUgreenCtx greenB, CUcontext contextA,
                          course::Verdict& verdict) {
    if (driverVersion < 12090) {
        std::printf("section green context ids: SKIP (cuGreenCtxGetId came with CUDA 12.9; the driver supports %s)\n",
                    course::formatCudaVersion(driverVersion).c_str());
        return;
    }
    unsigned long long idA = 0;
    unsigned long long idB = 0;
    unsigned long long idCurrent = 0;
    unsigned long long idOfContextA = 0;
    CHECK_DRIVER(cuGreenCtxGetId(greenA, &idA));
    CHECK_DRIVER(cuGreenCtxGetId(greenB, &idB));
    CHECK_DRIVER(cuCtxPushCurrent(contextA));
    CHECK_DRIVER(cuGreenCtxGetId(nullptr, &idCurrent));
    CHECK_DRIVER(cuCtxGetId(contextA, &idOfContextA));
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    verdict.check("popping gives back A's CUcontext", popped == contextA);
    std::printf("green context ids (cuGreenCtxGetId): A and B differ: %s; NULL with A current gives A's: %s\n",
                idA != idB ? "yes" : "no", idCurrent == idA ? "yes" : "no");
    std::printf("cuCtxGetId of A as a CUcontext equals A's green id: %s (observed)\n", idOfContextA == idA ? "yes" : "no");
    verdict.check("green contexts A and B have different ids", idA != idB);
    verdict.check("cuGreenCtxGetId(NULL) names the current green context", idCurrent == idA);
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    // Step 1: green contexts need CUDA 12.4 on both sides: the headers (the types and calls
    // below) and the driver (which implements them).
    course::printStep(1, "initialise the driver, check the versions");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    int major = 0;
    int minor = 0;
    int smCount = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("device %d name: %s\n", ordinal, name);
    std::printf("compute capability: %d.%d\n", major, minor);
    std::printf("SMs (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT): %d\n", smCount);
    if (!lesson17::greenContextsAvailable(driverVersion)) return course::kExitNotApplicable;
#if CUDA_VERSION >= 12040
    // Step 2: the device's SMs as a resource, the input of every split. Newer headers also
    // carry the driver's own partition rule: the smallest partition, and the number of SMs
    // that are scheduled together (a partition is a multiple of it).
    course::printStep(2, "the device's SMs as a resource (cuDeviceGetDevResource)");
    CUdevResource all{};
    CHECK_DRIVER(cuDeviceGetDevResource(device, &all, CU_DEV_RESOURCE_TYPE_SM));
    std::printf("SM resource of the device: %u SMs\n", all.sm.smCount);
    // Every split below starts from this resource: without it there is nothing to go on with.
    if (!verdict.check("the SM resource matches the SM count", all.sm.smCount == static_cast<unsigned int>(smCount)))
        return verdict.finish();
    const lesson17::SmRule rule = lesson17::printPartitionRule(all, major, minor);

    // Step 3: split the whole device with several requested sizes. The driver rounds each
    // request up to a size it can schedule, and makes as many equal groups as the GPU's
    // layout allows; what fits in no group is the remainder.
    course::printStep(3, "requested vs granted partition sizes (cuDevSmResourceSplitByCount)");
    bool sizesFollowRule = true;
    unsigned int smallest = 0;
    for (const unsigned int request : {1u, 8u, 12u, 20u, all.sm.smCount / 2}) {
        const lesson17::Split split = lesson17::splitSms(all, request, 0);
        const unsigned int size = split.groups.empty() ? 0 : split.groups.front().sm.smCount;
        const auto groups = static_cast<unsigned int>(split.groups.size());
        if (request == 1) smallest = size;
        std::printf("split, minCount %u: %u groups of %u SMs, remainder %u SMs (%u / %u = %u groups)\n", request,
                    groups, size, split.remainder.sm.smCount, all.sm.smCount, size, size ? all.sm.smCount / size : 0);
        bool ok = groups > 0 && size >= request && size >= rule.minimum && size % rule.multiple == 0 &&
                  groups * size + split.remainder.sm.smCount == all.sm.smCount;
        for (const CUdevResource& group : split.groups) ok = ok && group.sm.smCount == size;
        sizesFollowRule = sizesFollowRule && ok;
    }
    std::printf("smallest partition granted (minCount 1): %u SMs\n", smallest);
    if (!verdict.check("every split follows the rule and adds up", sizesFollowRule)) return verdict.finish();
#if CUDA_VERSION >= 13000
    // cuda.h: the flag will "lower the minimum SM count and alignment".
    const lesson17::Split loose = lesson17::splitSms(all, 1, CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING);
    const unsigned int looseSize = loose.groups.empty() ? 0 : loose.groups.front().sm.smCount;
    std::printf("split, minCount 1, IGNORE_SM_COSCHEDULING: %zu groups of %u SMs, remainder %u SMs\n",
                loose.groups.size(), looseSize, loose.remainder.sm.smCount);
    verdict.check("ignoring co-scheduling grants smaller groups", looseSize > 0 && looseSize < smallest);
#endif

    // Step 4: one split into one group of at least 12 SMs and the rest; each becomes a
    // descriptor and a green context. The primary context is retained first: every green
    // context is built on it, and shares its memory.
    course::printStep(4, "two green contexts from one split (cuDevResourceGenerateDesc, cuGreenCtxCreate)");
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    CHECK_DRIVER(cuCtxSetCurrent(primary));
    constexpr unsigned int kRequest = 12;
    lesson17::Split split = lesson17::splitSms(all, kRequest, 0, 1);
    CUdevResourceDesc descA = nullptr;
    CUdevResourceDesc descB = nullptr;
    CHECK_DRIVER(cuDevResourceGenerateDesc(&descA, split.groups.data(), 1));
    CHECK_DRIVER(cuDevResourceGenerateDesc(&descB, &split.remainder, 1));
    CUgreenCtx greenA = nullptr;
    CUgreenCtx greenB = nullptr;
    CHECK_DRIVER(cuGreenCtxCreate(&greenA, descA, device, CU_GREEN_CTX_DEFAULT_STREAM));
    CHECK_DRIVER(cuGreenCtxCreate(&greenB, descB, device, CU_GREEN_CTX_DEFAULT_STREAM));
    const unsigned int smsA = lesson17::greenContextSms(greenA);
    const unsigned int smsB = lesson17::greenContextSms(greenB);
    std::printf("green context A: requested %u SMs, granted %u SMs\n", kRequest, smsA);
    std::printf("green context B (the remainder): %u SMs\n", smsB);
    // Calls that take a CUcontext take a green context converted by cuCtxFromGreenCtx.
    CUcontext contextA = nullptr;
    CHECK_DRIVER(cuCtxFromGreenCtx(&contextA, greenA));
    CUdevResource ofContextA{};
    CHECK_DRIVER(cuCtxGetDevResource(contextA, &ofContextA, CU_DEV_RESOURCE_TYPE_SM));
    std::printf("A as a CUcontext (cuCtxFromGreenCtx, cuCtxGetDevResource): %u SMs\n", ofContextA.sm.smCount);
#if CUDA_VERSION >= 12090
    checkGreenContextIds(driverVersion, greenA, greenB, contextA, verdict);
#endif
    verdict.check("green context A got at least the SMs requested", smsA >= kRequest);
    verdict.check("green contexts A and B together hold every SM", smsA + smsB == all.sm.smCount);
    verdict.check("A as a CUcontext has A's SMs", ofContextA.sm.smCount == smsA);

    // Step 5: a stream on each green context and one in the primary context, one library
    // for all three (cuLibrary is context-independent), and a kernel with four blocks per
    // SM of the GPU on each stream: which SMs did it run on?
    course::printStep(5, "a stream on each, and the SMs their kernels ran on");
    CUstream streamA = lesson17::createGreenStream(greenA, driverVersion);
    CUstream streamB = lesson17::createGreenStream(greenB, driverVersion);
    CUstream streamPrimary = nullptr;
    CHECK_DRIVER(cuStreamCreate(&streamPrimary, CU_STREAM_NON_BLOCKING));
    CUgreenCtx ownerOfA = nullptr;
    CHECK_DRIVER(cuStreamGetGreenCtx(streamA, &ownerOfA));
    std::printf("stream A belongs to green context A (cuStreamGetGreenCtx): %s\n", ownerOfA == greenA ? "yes" : "no");
    verdict.check("stream A belongs to green context A", ownerOfA == greenA);
    CUlibrary library = nullptr;
    CHECK_DRIVER(cuLibraryLoadFromFile(&library, course::kernelPath("green_kernels.fatbin").c_str(), nullptr, nullptr,
                                       0, nullptr, nullptr, 0));
    CUkernel spin = nullptr;
    CHECK_DRIVER(cuLibraryGetKernel(&spin, library, "spin"));
    const unsigned int blocks = 4 * all.sm.smCount;
    CUdeviceptr smOfBlock = 0;
    CHECK_DRIVER(cuMemAlloc(&smOfBlock, blocks * sizeof(unsigned int)));
    const std::set<unsigned int> usedA = smsUsed(spin, streamA, smOfBlock, blocks);
    const std::set<unsigned int> usedB = smsUsed(spin, streamB, smOfBlock, blocks);
    const std::set<unsigned int> usedPrimary = smsUsed(spin, streamPrimary, smOfBlock, blocks);
    std::vector<unsigned int> shared;
    std::set_intersection(usedA.begin(), usedA.end(), usedB.begin(), usedB.end(), std::back_inserter(shared));
    std::vector<unsigned int> primaryOnA;
    std::set_intersection(usedPrimary.begin(), usedPrimary.end(), usedA.begin(), usedA.end(),
                          std::back_inserter(primaryOnA));
    std::printf("kernel of %u blocks on green context A ran on: %zu SMs (granted %u)\n", blocks, usedA.size(), smsA);
    std::printf("kernel of %u blocks on green context B ran on: %zu SMs (granted %u)\n", blocks, usedB.size(), smsB);
    std::printf("kernel of %u blocks in the primary context ran on: %zu SMs\n", blocks, usedPrimary.size());
    std::printf("SMs used by both A and B: %zu\n", shared.size());
    std::printf("SMs of A that the primary context's kernel used: %zu\n", primaryOnA.size());
    verdict.check("A's kernel ran on no more SMs than A was granted", usedA.size() <= smsA);
    verdict.check("B's kernel ran on no more SMs than B was granted", usedB.size() <= smsB);
    verdict.check("A's and B's kernels shared no SM", shared.empty());
    // A green context keeps its SMs from other green contexts, not from ordinary contexts.
    verdict.check("the primary context's kernel also ran on A's SMs", !primaryOnA.empty());

    // Step 6: reverse order. cuGreenCtxDestroy does not destroy the green context's
    // streams, and after it every call on them, cuStreamDestroy included, returns
    // CUDA_ERROR_CONTEXT_IS_DESTROYED: they go first, or they leak. Descriptors have no
    // destroy call.
    course::printStep(6, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(smOfBlock));
    CHECK_DRIVER(cuLibraryUnload(library));
    CHECK_DRIVER(cuStreamDestroy(streamPrimary));
    CHECK_DRIVER(cuStreamDestroy(streamB));
    CHECK_DRIVER(cuStreamDestroy(streamA));
    CHECK_DRIVER(cuGreenCtxDestroy(greenB));
    CHECK_DRIVER(cuGreenCtxDestroy(greenA));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("green contexts and primary context: released\n");

    return verdict.finish();
#else
    return course::kExitNotApplicable;
#endif
}
