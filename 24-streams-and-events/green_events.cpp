// Lesson 24, program 6 — ordering between green contexts: cuGreenCtxRecordEvent and
// cuGreenCtxWaitEvent (CUDA 12.4).
//
// Two green contexts on disjoint SMs (lesson 17 shows how they are made) each get a stream.
// cuGreenCtxRecordEvent captures "all the activities of the green context" in an event, and
// cuGreenCtxWaitEvent "makes all future work submitted to green context hCtx wait" for it
// (cuda.h:25081-25082, 25114-25115). Green context A's kernel holds until the host opens its gate,
// then stores 1; green context B's kernel, queued after the wait, reads that word: 1 when it
// waited, 0 when it ran beside A's. The control is a read on B queued before the wait (which holds
// only "future work"): the host opens A's gate only once the control has read, so it reads 0.
// Where the control did not run while A's kernel was held (cuda.h does not promise that kernels of
// green contexts run concurrently, cuda.h:24719-24721), the order could not be shown here and the
// check prints SKIP. The words are the primary context's mapped host memory, used from both green
// contexts: the program needs unified addressing (cuda.h:8871-8873).
//
//   green_events [--device N]
#include <cuda.h>

#include <cstdio>
#include <set>
#include <string>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "streams.h"

namespace {

constexpr int kGreenVersion = 12040;
constexpr unsigned int kBlocksPerSm = 4;  // step 2's kernel that records where its blocks ran
enum Word { kWritten, kSawWithWait, kSawWithoutWait, kGate, kStarted, kWords };

#if CUDA_VERSION >= 12040
// A stream of the green context: cuGreenCtxStreamCreate from 12.5 (flags must include
// CU_STREAM_NON_BLOCKING); with 12.4 the way 12.4 documented it, cuStreamCreate while the green
// context, as a CUcontext from cuCtxFromGreenCtx, is current.
CUstream greenStream(CUgreenCtx green, [[maybe_unused]] int driverVersion) {
    CUstream stream = nullptr;
#if CUDA_VERSION >= 12050
    if (driverVersion >= 12050) {
        CHECK_DRIVER(cuGreenCtxStreamCreate(&stream, green, CU_STREAM_NON_BLOCKING, 0));
        return stream;
    }
#endif
    CUcontext asContext = nullptr;
    CHECK_DRIVER(cuCtxFromGreenCtx(&asContext, green));
    CHECK_DRIVER(cuCtxPushCurrent(asContext));
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECK_DRIVER(cuCtxPopCurrent(&asContext));
    return stream;
}

// The SMs a kernel of kBlocksPerSm blocks per SM of the green context ran on (sm_of_block, each
// block spinning 20 us so that the scheduler spreads them over every SM it may use).
std::set<unsigned int> smsUsed(CUkernel smOfBlock, CUstream stream, unsigned int smCount) {
    const unsigned int blocks = kBlocksPerSm * smCount;
    lesson24::HostWords sms = lesson24::allocHostWords(static_cast<int>(blocks));
    unsigned long long nanoseconds = 20000;
    CUdeviceptr out = sms.device;
    void* params[] = {&nanoseconds, &out};
    CHECK_DRIVER(cuLaunchKernel(reinterpret_cast<CUfunction>(smOfBlock), blocks, 1, 1, lesson24::kSpinThreads, 1, 1, 0,
                                stream, params, nullptr));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    std::set<unsigned int> used;
    for (unsigned int b = 0; b < blocks; ++b) used.insert(sms.read(static_cast<int>(b)));
    CHECK_DRIVER(cuMemFreeHost(sms.host));
    return used;
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "initialise, check the versions");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    const int driverVersion = lesson24::printDeviceAndVersions(device, ordinal);
    const std::string missing = lesson24::missingVersion(driverVersion, kGreenVersion, "green contexts");
    if (!missing.empty()) {
        std::printf("section green contexts: SKIP (%s)\n", missing.c_str());
        std::printf("Result = SKIP (%s)\n", missing.c_str());
        return course::kExitNotApplicable;
    }
#if CUDA_VERSION >= 12040
    course::Verdict verdict;

    // Step 2: two groups of the smallest partition the driver grants (minCount 1 is rounded up).
    course::printStep(2, "two green contexts on disjoint SMs, a stream on each");
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    CHECK_DRIVER(cuCtxSetCurrent(primary));
    int unifiedAddressing = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&unifiedAddressing, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, device));
    std::printf("CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: %d\n", unifiedAddressing);
    const std::string noUnified = lesson24::missingUnifiedAddressing(unifiedAddressing);
    if (!noUnified.empty()) {
        std::printf("section green contexts: SKIP (%s)\n", noUnified.c_str());
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
        std::printf("Result = SKIP (the device has no unified addressing)\n");
        return course::kExitNotApplicable;
    }
    CUdevResource all{};
    CHECK_DRIVER(cuDeviceGetDevResource(device, &all, CU_DEV_RESOURCE_TYPE_SM));
    unsigned int groupCount = 0;
    CHECK_DRIVER(cuDevSmResourceSplitByCount(nullptr, &groupCount, &all, nullptr, 0, 1));
    if (groupCount < 2) {
        std::printf("section green contexts: SKIP (the SMs split into %u group(s); two are needed)\n", groupCount);
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
        std::printf("Result = SKIP (the device's SMs do not split into two green contexts)\n");
        return course::kExitNotApplicable;
    }
    CUdevResource groups[2] = {};
    CUdevResource rest{};
    groupCount = 2;
    CHECK_DRIVER(cuDevSmResourceSplitByCount(groups, &groupCount, &all, &rest, 0, 1));
    CUdevResourceDesc descA = nullptr;
    CUdevResourceDesc descB = nullptr;
    CHECK_DRIVER(cuDevResourceGenerateDesc(&descA, &groups[0], 1));
    CHECK_DRIVER(cuDevResourceGenerateDesc(&descB, &groups[1], 1));
    CUgreenCtx greenA = nullptr;
    CUgreenCtx greenB = nullptr;
    CHECK_DRIVER(cuGreenCtxCreate(&greenA, descA, device, CU_GREEN_CTX_DEFAULT_STREAM));
    CHECK_DRIVER(cuGreenCtxCreate(&greenB, descB, device, CU_GREEN_CTX_DEFAULT_STREAM));
    // What each green context reports it was given: the SM counts the checks below compare with.
    CUdevResource ofA{};
    CUdevResource ofB{};
    CHECK_DRIVER(cuGreenCtxGetDevResource(greenA, &ofA, CU_DEV_RESOURCE_TYPE_SM));
    CHECK_DRIVER(cuGreenCtxGetDevResource(greenB, &ofB, CU_DEV_RESOURCE_TYPE_SM));
    std::printf("green context A: %u SMs, green context B: %u SMs\n", ofA.sm.smCount, ofB.sm.smCount);
    CUstream streamA = greenStream(greenA, driverVersion);
    CUstream streamB = greenStream(greenB, driverVersion);
    // One library, one CUkernel for every context; launched as a CUfunction, the context comes
    // from the stream (cuda.h, cuLaunchKernel).
    CUlibrary library = nullptr;
    CHECK_DRIVER(cuLibraryLoadFromFile(&library, course::kernelPath("stream_kernels.fatbin").c_str(), nullptr, nullptr,
                                       0, nullptr, nullptr, 0));
    CUkernel gate = nullptr;
    CUkernel loadWord = nullptr;
    CUkernel smOfBlock = nullptr;
    CHECK_DRIVER(cuLibraryGetKernel(&gate, library, "gate"));
    CHECK_DRIVER(cuLibraryGetKernel(&loadWord, library, "load_word"));
    CHECK_DRIVER(cuLibraryGetKernel(&smOfBlock, library, "sm_of_block"));
    lesson24::HostWords words = lesson24::allocHostWords(kWords);
    CUevent event = nullptr;  // made in the primary context: cuGreenCtxRecordEvent wants the same one
    CHECK_DRIVER(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
#if CUDA_VERSION >= 12050
    if (driverVersion >= 12050) {
        CUcontext ofB = nullptr;
        CUgreenCtx greenOfB = nullptr;
        CHECK_DRIVER(cuStreamGetCtx_v2(streamB, &ofB, &greenOfB));
        // cuda.h: the green context in pGreenCtx, and "the primary context of the associated
        // device" in pCtx (cuda.h:15180-15181): the context cuDevicePrimaryCtxRetain gave.
        std::printf("cuStreamGetCtx_v2 of B's stream: green context %s, context %s\n",
                    greenOfB == greenB ? "B" : (greenOfB == greenA ? "A" : "another"),
                    ofB == primary ? "the retained primary context's handle" : "another handle");
        verdict.check("cuStreamGetCtx_v2 names the stream's green context and the device's primary context",
                      greenOfB == greenB && ofB == primary);
    }
#endif

    // The SMs each green context's kernel ran on: no more than the green context reports, none in
    // both. cuda.h: "in certain scenarios, it is possible for the workload to run on more SMs than
    // was provisioned (but never less)", and it names two, MPS with
    // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and, on compute capability 9.x, a loaded module with
    // dynamic parallelism (cuda.h:24719-24727). This program loads no such module; under MPS these
    // checks may FAIL where cuda.h allows it.
    const std::set<unsigned int> smsA = smsUsed(smOfBlock, streamA, ofA.sm.smCount);
    const std::set<unsigned int> smsB = smsUsed(smOfBlock, streamB, ofB.sm.smCount);
    unsigned int shared = 0;
    for (unsigned int sm : smsA) shared += smsB.count(sm) != 0 ? 1u : 0u;
    std::printf("SMs a kernel of %u blocks per SM ran on: A %zu, B %zu, in both %u\n", kBlocksPerSm, smsA.size(),
                smsB.size(), shared);
    verdict.check("each green context's kernel ran on no more SMs than cuGreenCtxGetDevResource reports",
                  smsA.size() <= ofA.sm.smCount && smsB.size() <= ofB.sm.smCount);
    verdict.check("the kernels of green contexts A and B ran on disjoint SMs", shared == 0);

    // Step 3: A's kernel holds until the host opens its gate, A records; B reads A's word once
    // (the control), waits, reads it again. The host opens the gate once the control has read.
    course::printStep(3, "green context A records, green context B waits");
    // One launch of the reading kernel in B beforehand (lesson24::warmUpLoad): without it, on the
    // course's H200, the control did not run while A's kernel was held.
    lesson24::warmUpLoad(reinterpret_cast<CUfunction>(loadWord), words.at(kSawWithoutWait), streamB);
    words.markNotRead({kSawWithWait, kSawWithoutWait});
    lesson24::launchGated(reinterpret_cast<CUfunction>(gate), words, kGate, kStarted, kWritten, streamA);
    CHECK_DRIVER(cuGreenCtxRecordEvent(greenA, event));
    lesson24::launchLoad(reinterpret_cast<CUfunction>(loadWord), words.at(kWritten), words.at(kSawWithoutWait),
                         streamB);  // the control
    CHECK_DRIVER(cuGreenCtxWaitEvent(greenB, event));
    lesson24::launchLoad(reinterpret_cast<CUfunction>(loadWord), words.at(kWritten), words.at(kSawWithWait), streamB);
    const bool controlRan =
        lesson24::waitForChange(words, kSawWithoutWait, lesson24::kNotRead, lesson24::kControlBound);
    lesson24::openAfterHold(words, kGate);
    CHECK_DRIVER(cuStreamSynchronize(streamB));
    CHECK_DRIVER(cuStreamSynchronize(streamA));
    std::printf("B's kernel before cuGreenCtxWaitEvent read: %u (the control: 0 = A's kernel was held)\n",
                words.read(kSawWithoutWait));
    std::printf("B's kernel after cuGreenCtxWaitEvent read: %u (1 = A's kernel had finished)\n",
                words.read(kSawWithWait));
    lesson24::checkOrder(verdict, "B's kernel, queued after cuGreenCtxWaitEvent, read what A's kernel wrote",
                         words.read(kSawWithWait) == 1 && words.read(kSawWithoutWait) == 0, controlRan);

    // Step 4: streams before their green contexts (cuGreenCtxDestroy does not destroy them, and
    // every later call on them fails), then the rest, newest first.
    course::printStep(4, "release everything, newest first");
    CHECK_DRIVER(cuEventDestroy(event));
    CHECK_DRIVER(cuMemFreeHost(words.host));
    CHECK_DRIVER(cuLibraryUnload(library));
    CHECK_DRIVER(cuStreamDestroy(streamB));
    CHECK_DRIVER(cuStreamDestroy(streamA));
    CHECK_DRIVER(cuGreenCtxDestroy(greenB));
    CHECK_DRIVER(cuGreenCtxDestroy(greenA));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: event, host words, library, streams, green contexts, primary context\n");

    course::printStep(5, "check");
    return verdict.finish();
#endif
}
