// Lesson 03, program 6 — what identifies a context, and what can change on a live one.
//
// A CUcontext handle is an address: once a context is destroyed, a new one may get the same
// handle. cuCtxGetId gives an Id that "is unique for the life of the program" (cuda.h). This
// program asks for the Ids of two contexts, of the current one, of a stream's context and of
// a context made after a destroy; then it reads a context's API version, changes a flag on the
// current context with cuCtxSetFlags, and asks about execution affinity (the share of SMs a
// context may use), which a context created without it still answers for.
//
//   context_identity [--device N]
#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#include "../common/check_driver.h"
#include "../common/context_flags.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"

namespace {
// cuCtxGetId came with CUDA 12.0, cuCtxSetFlags with 12.1, CU_CTX_SYNC_MEMOPS's name in
// cuda.h with 12.4: the program needs all three, in the headers and in the driver.
constexpr int kNeededVersion = 12040;
}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    // Step 1: the driver, the device, and whether both are new enough.
    course::printStep(1, "initialise");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    if (CUDA_VERSION < kNeededVersion || driverVersion < kNeededVersion) {
        std::printf("Result = SKIP (needs CUDA %s headers and driver)\n",
                    course::formatCudaVersion(kNeededVersion).c_str());
        return course::kExitNotApplicable;
    }
#if CUDA_VERSION >= 12040
    course::Verdict verdict;

    // Step 2: two contexts and a stream made in the first. Each creation pushes, so ctxB is
    // current. The Ids are numbers the driver assigns; only their equalities are printed.
    course::printStep(2, "two contexts, two Ids");
    CUcontext ctxA = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxA, CU_CTX_SCHED_AUTO, device));
    CUstream streamOfA = nullptr;
    CHECK_DRIVER(cuStreamCreate(&streamOfA, CU_STREAM_NON_BLOCKING));  // made in ctxA, current now
    CUcontext ctxB = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxB, CU_CTX_SCHED_BLOCKING_SYNC, device));
    unsigned long long idA = 0;
    unsigned long long idB = 0;
    unsigned long long idCurrent = 0;
    CHECK_DRIVER(cuCtxGetId(ctxA, &idA));
    CHECK_DRIVER(cuCtxGetId(ctxB, &idB));
    CHECK_DRIVER(cuCtxGetId(nullptr, &idCurrent));  // NULL: "the Id of the current context"
    std::printf("ctxA and ctxB have the same Id: %s\n", idA == idB ? "yes" : "no");
    std::printf("cuCtxGetId(NULL) gives ctxB's Id: %s\n", idCurrent == idB ? "yes" : "no");
    verdict.check("two contexts have different Ids", idA != idB);
    verdict.check("cuCtxGetId(NULL) answers for the current context", idCurrent == idB);

    // A stream knows its context (cuStreamGetCtx): the Id of that context is its creator's.
    CUcontext streamContext = nullptr;
    CHECK_DRIVER(cuStreamGetCtx(streamOfA, &streamContext));
    unsigned long long streamContextId = 0;
    CHECK_DRIVER(cuCtxGetId(streamContext, &streamContextId));
    std::printf("the stream's context has ctxA's Id: %s\n", streamContextId == idA ? "yes" : "no");
    verdict.check("a stream's context has its creator's Id", streamContextId == idA);

    // Step 3: the API version, "corresponding to the capabilities of the context", and for a
    // NULL handle "the API version used to create the currently bound context" (cuda.h).
    course::printStep(3, "the API version");
    unsigned int apiVersionB = 0;
    CHECK_DRIVER(cuCtxGetApiVersion(ctxB, &apiVersionB));
    unsigned int apiVersionCurrent = 0;
    CHECK_DRIVER(cuCtxGetApiVersion(nullptr, &apiVersionCurrent));
    std::printf("ctxB API version: %u\n", apiVersionB);
    std::printf("current context's API version (NULL handle): %u\n", apiVersionCurrent);
    verdict.check("the API version of ctxB is the current context's",
                  apiVersionB != 0 && apiVersionB == apiVersionCurrent);

    // Step 4: cuCtxSetFlags "overwriting previously set ones": the new word keeps the old
    // flags and adds CU_CTX_SYNC_MEMOPS (synchronous memory operations always synchronise).
    course::printStep(4, "a flag set on the current context");
    unsigned int flagsBefore = 0;
    CHECK_DRIVER(cuCtxGetFlags(&flagsBefore));
    CHECK_DRIVER(cuCtxSetFlags(flagsBefore | CU_CTX_SYNC_MEMOPS));
    unsigned int flagsAfter = 0;
    CHECK_DRIVER(cuCtxGetFlags(&flagsAfter));
    std::printf("ctxB flags before cuCtxSetFlags: %s\n", course::describeContextFlags(flagsBefore).c_str());
    std::printf("ctxB flags after: %s\n", course::describeContextFlags(flagsAfter).c_str());
    verdict.check("cuCtxSetFlags added CU_CTX_SYNC_MEMOPS and kept the scheduling policy",
                  (flagsBefore & CU_CTX_SYNC_MEMOPS) == 0 && (flagsAfter & CU_CTX_SYNC_MEMOPS) != 0 &&
                      (flagsAfter & CU_CTX_SCHED_MASK) == (flagsBefore & CU_CTX_SCHED_MASK));

    // Step 5: execution affinity. cuda.h defines one type, CU_EXEC_AFFINITY_TYPE_SM_COUNT;
    // the device says 1 or 0 for it. For the current context cuda.h lists two answers that are
    // not a misuse: CUDA_SUCCESS with the number of SMs the context may use (at most the
    // device's), or CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY ("not supported by the active
    // device"). Which one a device without MPS gives, it does not say: printed.
    course::printStep(5, "execution affinity");
    int affinitySupported = -1;
    CHECK_DRIVER(cuDeviceGetExecAffinitySupport(&affinitySupported, CU_EXEC_AFFINITY_TYPE_SM_COUNT, device));
    std::printf("SM-count affinity supported by the device: %d\n", affinitySupported);
    verdict.check("cuDeviceGetExecAffinitySupport answers 0 or 1", affinitySupported == 0 || affinitySupported == 1);
    int smCount = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
    CUexecAffinityParam affinity{};
    const CUresult affinityResult = cuCtxGetExecAffinity(&affinity, CU_EXEC_AFFINITY_TYPE_SM_COUNT);
    std::printf("cuCtxGetExecAffinity(SM count) on ctxB: %s\n", course::driverErrorName(affinityResult));
    if (affinityResult == CUDA_SUCCESS) std::printf("ctxB may use SMs: %u of %d\n", affinity.param.smCount.val, smCount);
    const bool affinityAgrees =
        affinityResult == CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY ||
        (affinityResult == CUDA_SUCCESS && affinity.type == CU_EXEC_AFFINITY_TYPE_SM_COUNT &&
         affinity.param.smCount.val > 0 && affinity.param.smCount.val <= static_cast<unsigned>(smCount));
    verdict.check("cuCtxGetExecAffinity answers an SM count within the device's, or that the type is unsupported", affinityAgrees);

    // Step 6: a context made after a destroy may reuse the old handle, never the old Id.
    course::printStep(6, "an Id is not reused");
    CHECK_DRIVER(cuCtxDestroy(ctxB));  // pops it: ctxA is current again
    CUcontext ctxC = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctxC, CU_CTX_SCHED_AUTO, device));
    unsigned long long idC = 0;
    CHECK_DRIVER(cuCtxGetId(ctxC, &idC));
    std::printf("ctxC, made after ctxB's destroy, has a new Id: %s\n", idC != idB && idC != idA ? "yes" : "no");
    verdict.check("a context made after a destroy has a new Id", idC != idB && idC != idA);

    // Step 7: release in reverse order: ctxC, the stream, ctxA.
    course::printStep(7, "release");
    CHECK_DRIVER(cuCtxDestroy(ctxC));
    CHECK_DRIVER(cuStreamDestroy(streamOfA));
    CHECK_DRIVER(cuCtxDestroy(ctxA));

    // Step 8: each check above printed its line where the program learnt the answer.
    course::printStep(8, "check");
    return verdict.finish();
#endif
}
