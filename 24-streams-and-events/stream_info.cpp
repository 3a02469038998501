// Lesson 24, program 2 — what a stream says about itself, and the attributes it carries.
//
// cuStreamGetFlags returns the flags a stream was created with; cuStreamGetId an id that "is
// unique for the life of the program" (cuda.h:15096), even where a new stream gets the handle
// of a destroyed one; cuStreamGetCtx "the context that was active in the calling thread when the
// stream was created", or for the NULL stream the context current now (cuda.h:15139-15146);
// cuStreamGetCtx_v2 (12.5) also the green context, NULL for an ordinary stream. Stream
// attributes share their ids with the launch attributes; the ones "Valid for streams" apply to
// work submitted to the stream after they are set (cuda.h:2078-2083, 15873-15874):
// cuStreamSetAttribute sets one, cuStreamGetAttribute reads it, cuStreamCopyAttributes copies
// them all from one stream of a context to another.
//
//   stream_info [--device N]
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "streams.h"

namespace {

// The enum's name, or the number where the value is none of the enum's (cuda.h:2019-2024: its
// values run from CU_SYNC_POLICY_AUTO = 1 to CU_SYNC_POLICY_BLOCKING_SYNC = 4).
std::string policyName(CUsynchronizationPolicy policy) {
    switch (policy) {
        case CU_SYNC_POLICY_AUTO: return "CU_SYNC_POLICY_AUTO";
        case CU_SYNC_POLICY_SPIN: return "CU_SYNC_POLICY_SPIN";
        case CU_SYNC_POLICY_YIELD: return "CU_SYNC_POLICY_YIELD";
        case CU_SYNC_POLICY_BLOCKING_SYNC: return "CU_SYNC_POLICY_BLOCKING_SYNC";
        default: return std::to_string(static_cast<int>(policy)) + " (not a CUsynchronizationPolicy)";
    }
}

// Pre-set to all ones (-1 in syncPolicy, none of the enum's values): a value the driver did not
// write shows as -1, one it wrote as itself.
CUsynchronizationPolicy policyOf(CUstream stream) {
    CUstreamAttrValue value;
    std::memset(&value, 0xff, sizeof(value));
    CHECK_DRIVER(cuStreamGetAttribute(stream, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &value));
    return value.syncPolicy;
}

void setPolicy(CUstream stream, CUsynchronizationPolicy policy) {
    CUstreamAttrValue value{};
    value.syncPolicy = policy;
    CHECK_DRIVER(cuStreamSetAttribute(stream, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &value));
}

// cuStreamGetId came with CUDA 12.0; with older headers or driver the program does not call this.
unsigned long long streamId(CUstream stream) {
    unsigned long long id = 0;
#if CUDA_VERSION >= 12000
    CHECK_DRIVER(cuStreamGetId(stream, &id));
#else
    (void)stream;
#endif
    return id;
}

unsigned int flagsOf(CUstream stream, const char* how) {
    unsigned int flags = ~0u;  // not a value the check accepts: only what the driver writes can pass
    CHECK_DRIVER(cuStreamGetFlags(stream, &flags));
    std::printf("cuStreamGetFlags, %s: 0x%x (%s)\n", how, flags,
                flags == CU_STREAM_NON_BLOCKING ? "CU_STREAM_NON_BLOCKING"
                                                : (flags == CU_STREAM_DEFAULT ? "CU_STREAM_DEFAULT" : "other"));
    return flags;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    course::printStep(1, "initialise, the primary context");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    const int driverVersion = lesson24::printDeviceAndVersions(device, ordinal);
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    CHECK_DRIVER(cuCtxSetCurrent(primary));

    // Step 2: the flags come back as given. CU_STREAM_DEFAULT (0) makes a stream that
    // synchronises with the legacy NULL stream; CU_STREAM_NON_BLOCKING one that does not.
    course::printStep(2, "cuStreamGetFlags: the creation flags");
    CUstream first = nullptr;
    CUstream nonBlocking = nullptr;
    CUstream prioritised = nullptr;
    CHECK_DRIVER(cuStreamCreate(&first, CU_STREAM_DEFAULT));
    CHECK_DRIVER(cuStreamCreate(&nonBlocking, CU_STREAM_NON_BLOCKING));
    int greatest = 0;
    CHECK_DRIVER(cuCtxGetStreamPriorityRange(nullptr, &greatest));
    CHECK_DRIVER(cuStreamCreateWithPriority(&prioritised, CU_STREAM_NON_BLOCKING, greatest));
    const unsigned int f1 = flagsOf(first, "cuStreamCreate(CU_STREAM_DEFAULT)");
    const unsigned int f2 = flagsOf(nonBlocking, "cuStreamCreate(CU_STREAM_NON_BLOCKING)");
    const unsigned int f3 = flagsOf(prioritised, "cuStreamCreateWithPriority(CU_STREAM_NON_BLOCKING)");
    verdict.check("cuStreamGetFlags returns the creation flags",
                  f1 == CU_STREAM_DEFAULT && f2 == CU_STREAM_NON_BLOCKING && f3 == CU_STREAM_NON_BLOCKING);

    // Step 3: ids. A destroyed stream's handle may come back for the next stream (the handle is
    // an address); its id does not. The ids are printed counted from the first stream's; the
    // special handles have ids too (cuda.h does not say how they relate to the others).
    course::printStep(3, "cuStreamGetId: unique for the life of the program");
    const std::string noIds = lesson24::missingVersion(driverVersion, 12000, "cuStreamGetId");
    unsigned long long ids[4] = {};
    if (noIds.empty()) {
        ids[0] = streamId(first);
        ids[1] = streamId(nonBlocking);
        ids[2] = streamId(prioritised);
    }
    const CUstream firstHandle = first;
    CHECK_DRIVER(cuStreamDestroy(first));
    CUstream second = nullptr;
    CHECK_DRIVER(cuStreamCreate(&second, CU_STREAM_DEFAULT));
    std::printf("first stream destroyed, a new one created: same handle: %s\n", second == firstHandle ? "yes" : "no");
    if (noIds.empty()) {
        ids[3] = streamId(second);
        std::printf("ids, counted from the first stream's: +%lld, +%lld, +%lld, new stream +%lld\n", 0LL,
                    static_cast<long long>(ids[1] - ids[0]), static_cast<long long>(ids[2] - ids[0]),
                    static_cast<long long>(ids[3] - ids[0]));
        const unsigned long long nullId = streamId(nullptr);
        const unsigned long long legacyId = streamId(CU_STREAM_LEGACY);
        const unsigned long long perThreadId = streamId(CU_STREAM_PER_THREAD);
        std::printf("NULL and CU_STREAM_LEGACY: %s; CU_STREAM_PER_THREAD: %s\n",
                    nullId == legacyId ? "the same id" : "different ids",
                    perThreadId == nullId ? "the NULL stream's id" : "an id of its own");
        bool distinct = true;
        for (int i = 0; i < 4; ++i)
            for (int j = i + 1; j < 4; ++j) distinct = distinct && ids[i] != ids[j];
        verdict.check("every stream created here has an id of its own", distinct);
    } else {
        std::printf("section stream ids: SKIP (%s)\n", noIds.c_str());
    }

    // Step 4: a stream remembers the context it was made in. course::ctxCreate pushes the new
    // context, so `other` is current until the pop.
    course::printStep(4, "cuStreamGetCtx: the context a stream belongs to");
    CUcontext other = nullptr;
    CHECK_DRIVER(course::ctxCreate(&other, 0, device));
    CUstream otherStream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&otherStream, CU_STREAM_NON_BLOCKING));
    CUcontext ofNull = nullptr;
    CHECK_DRIVER(cuStreamGetCtx(nullptr, &ofNull));
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    CUcontext ofOther = nullptr;
    CUcontext ofNonBlocking = nullptr;
    CHECK_DRIVER(cuStreamGetCtx(otherStream, &ofOther));
    CHECK_DRIVER(cuStreamGetCtx(nonBlocking, &ofNonBlocking));
    std::printf("NULL stream, asked while the second context is current: %s\n",
                ofNull == other ? "the second context" : "another context");
    std::printf("stream made while the second context was current, asked from the primary: %s\n",
                ofOther == other ? "the second context" : (ofOther == primary ? "the primary context" : "another"));
    std::printf("stream made in the primary context: %s\n",
                ofNonBlocking == primary ? "the primary context" : "another");
    verdict.check("the NULL stream answers with the context current now", ofNull == other);
    verdict.check("cuStreamGetCtx names the context current when the stream was made",
                  ofOther == other && ofNonBlocking == primary);
#if CUDA_VERSION >= 12050
    if (driverVersion >= 12050) {
        // Both pre-set to values the check does not accept: only what the driver writes can pass.
        static char notWritten = 0;
        CUcontext ctxV2 = nullptr;
        CUgreenCtx green = reinterpret_cast<CUgreenCtx>(&notWritten);
        CHECK_DRIVER(cuStreamGetCtx_v2(otherStream, &ctxV2, &green));
        std::printf("cuStreamGetCtx_v2 of that stream: %s, green context %s\n",
                    ctxV2 == ofOther ? "the same context" : "another context", green == nullptr ? "NULL" : "set");
        verdict.check("cuStreamGetCtx_v2 agrees, and an ordinary stream has no green context",
                      ctxV2 == ofOther && green == nullptr);
    } else
#endif
    {
        std::printf("section cuStreamGetCtx_v2: SKIP (%s)\n",
                    lesson24::missingVersion(driverVersion, 12050, "cuStreamGetCtx_v2").c_str());
    }
    CHECK_DRIVER(cuStreamDestroy(otherStream));
    CHECK_DRIVER(cuCtxDestroy(other));

    // Step 5: one attribute through its three calls. The synchronization policy is the
    // "CUsynchronizationPolicy for work queued up in this stream" (cuda.h:2251-2253). What a new
    // stream reads back is printed, with the number where it is none of the enum's values.
    course::printStep(5, "stream attributes: get, set, copy");
    std::printf("synchronization policy of a new stream: %s\n", policyName(policyOf(nonBlocking)).c_str());
    setPolicy(nonBlocking, CU_SYNC_POLICY_BLOCKING_SYNC);
    setPolicy(second, CU_SYNC_POLICY_SPIN);
    const CUsynchronizationPolicy setSource = policyOf(nonBlocking);
    const CUsynchronizationPolicy setDestination = policyOf(second);
    std::printf("after cuStreamSetAttribute: source %s, destination %s\n", policyName(setSource).c_str(),
                policyName(setDestination).c_str());
    verdict.check("each stream reads back the policy set on it",
                  setSource == CU_SYNC_POLICY_BLOCKING_SYNC && setDestination == CU_SYNC_POLICY_SPIN);
    CHECK_DRIVER(cuStreamCopyAttributes(second, nonBlocking));  // (dst, src)
    const CUsynchronizationPolicy copiedSource = policyOf(nonBlocking);
    const CUsynchronizationPolicy copiedDestination = policyOf(second);
    std::printf("after cuStreamCopyAttributes(destination, source): source %s, destination %s\n",
                policyName(copiedSource).c_str(), policyName(copiedDestination).c_str());
    verdict.check("cuStreamCopyAttributes copied the source's policy to the destination",
                  copiedSource == CU_SYNC_POLICY_BLOCKING_SYNC && copiedDestination == CU_SYNC_POLICY_BLOCKING_SYNC);
#if CUDA_VERSION >= 12000
    // The priority is an attribute too (CU_STREAM_ATTRIBUTE_PRIORITY, in the 12.x headers).
    // cuda.h does not say how it relates to cuStreamGetPriority: both are printed.
    CUstreamAttrValue priority{};
    CHECK_DRIVER(cuStreamGetAttribute(prioritised, CU_STREAM_ATTRIBUTE_PRIORITY, &priority));
    int streamPriority = 0;
    CHECK_DRIVER(cuStreamGetPriority(prioritised, &streamPriority));
    std::printf("stream created with priority %d: CU_STREAM_ATTRIBUTE_PRIORITY %d, cuStreamGetPriority %d\n", greatest,
                priority.priority, streamPriority);
#endif

    course::printStep(6, "release everything, newest first");
    CHECK_DRIVER(cuStreamDestroy(second));
    CHECK_DRIVER(cuStreamDestroy(prioritised));
    CHECK_DRIVER(cuStreamDestroy(nonBlocking));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: streams, second context, primary context\n");

    course::printStep(7, "check");
    return verdict.finish();
}
