// green_helpers.h — lesson 17's small helpers: may this build and this driver use green
// contexts, the documented partition rule, one SM split, a stream on a green context, and
// whether a tool that runs one kernel at a time is attached.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace lesson17 {

// The green context API (cuGreenCtxCreate and the cuDevResource calls) came with CUDA 12.4.
constexpr int kGreenContextsVersion = 12040;

// Step 1 of both programs: the headers this program was built with and the driver must both
// know green contexts. Prints the versions, and the reason and the SKIP result when not.
inline bool greenContextsAvailable(int driverVersion) {
    std::printf("built with CUDA headers: %s\n", course::formatCudaVersion(CUDA_VERSION).c_str());
    std::printf("driver supports CUDA: %s\n", course::formatCudaVersion(driverVersion).c_str());
    std::string reason;
    if (CUDA_VERSION < kGreenContextsVersion)
        reason = "built with CUDA " + course::formatCudaVersion(CUDA_VERSION) + " headers; needs 12.4";
    else if (driverVersion < kGreenContextsVersion)
        reason = "the driver supports CUDA " + course::formatCudaVersion(driverVersion) + "; needs 12.4";
    if (reason.empty()) return true;
    std::printf("section green contexts: SKIP (%s)\n", reason.c_str());
    std::printf("Result = SKIP (%s)\n", reason.c_str());
    return false;
}

#if CUDA_VERSION >= 12040

// The guideline cuda.h gives next to the API ("Green Contexts"): the smallest partition and
// the multiple a partition is rounded up to, by compute capability. The 12.4 headers said
// "1 SM" for 6.x; 13.0 says 2. The driver's own numbers (step 2) are what counts.
struct SmRule {
    unsigned int minimum;
    unsigned int multiple;
};

inline SmRule documentedRule(int computeMajor) {
    if (computeMajor >= 9) return {8, 8};
    if (computeMajor == 8) return {4, 2};
    return {2, 2};
}

// Step 2 of partitions: the rule the driver reports (CUDA 13.0 headers: minSmPartitionSize and
// smCoscheduledAlignment) next to the documented one. Returns the rule the splits must follow:
// the driver's, or the documented one where the headers lack the fields or the driver, older
// than the headers, left them 0.
inline SmRule printPartitionRule(const CUdevResource& all, int major, int minor) {
    const SmRule documented = documentedRule(major);
    SmRule rule = documented;
#if CUDA_VERSION >= 13000
    std::printf("minimum partition size (minSmPartitionSize): %u SMs\n", all.sm.minSmPartitionSize);
    std::printf("co-scheduled alignment (smCoscheduledAlignment): %u SMs\n", all.sm.smCoscheduledAlignment);
    if (all.sm.minSmPartitionSize != 0 && all.sm.smCoscheduledAlignment != 0) {
        rule = {all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment};
        // cuda.h says smCount "is a multiple of" the alignment; for a whole device it need not be.
        std::printf("device SM count a multiple of the alignment (cuda.h says so): %s (%u = %u x %u + %u)\n",
                    all.sm.smCount % rule.multiple == 0 ? "yes" : "no", all.sm.smCount, all.sm.smCount / rule.multiple,
                    rule.multiple, all.sm.smCount % rule.multiple);
    }
#else
    (void)all;
    std::printf("section driver-reported rule: SKIP (built with CUDA %s headers; the fields need 13.0)\n",
                course::formatCudaVersion(CUDA_VERSION).c_str());
#endif
    std::printf("documented rule for compute capability %d.%d: at least %u SMs, a multiple of %u\n", major, minor,
                documented.minimum, documented.multiple);
    return rule;
}

// One cuDevSmResourceSplitByCount: groups of at least `request` SMs, at most `maxGroups` of
// them (0: as many as fit), and the SMs no group got. First a call with no result array,
// which only counts the groups, then the real split into an array of that size.
struct Split {
    std::vector<CUdevResource> groups;
    CUdevResource remainder{};
};

inline Split splitSms(const CUdevResource& input, unsigned int request, unsigned int flags,
                      unsigned int maxGroups = 0) {
    unsigned int count = 0;
    CHECK_DRIVER(cuDevSmResourceSplitByCount(nullptr, &count, &input, nullptr, flags, request));
    if (maxGroups != 0 && maxGroups < count) count = maxGroups;
    Split split;
    split.groups.resize(count);
    if (count == 0) return split;
    CHECK_DRIVER(cuDevSmResourceSplitByCount(split.groups.data(), &count, &input, &split.remainder, flags, request));
    split.groups.resize(count);
    return split;
}

// The SMs a green context was given, read back from the driver.
inline unsigned int greenContextSms(CUgreenCtx green) {
    CUdevResource resource{};
    CHECK_DRIVER(cuGreenCtxGetDevResource(green, &resource, CU_DEV_RESOURCE_TYPE_SM));
    return resource.sm.smCount;
}

// The distinct SMs in `count` words a kernel wrote with %smid (its work must have completed).
inline std::set<unsigned int> smSet(CUdeviceptr smOfBlock, unsigned int count) {
    std::vector<unsigned int> sms(count);
    CHECK_DRIVER(cuMemcpyDtoH(sms.data(), smOfBlock, count * sizeof(unsigned int)));
    return std::set<unsigned int>(sms.begin(), sms.end());
}

// A stream whose work runs on the green context's SMs. cuGreenCtxStreamCreate came with
// CUDA 12.5 (its flags must include CU_STREAM_NON_BLOCKING). With 12.4 headers or a 12.4
// driver the stream is made the way 12.4 documented: cuStreamCreate while the green
// context, as a CUcontext from cuCtxFromGreenCtx, is current.
inline CUstream createGreenStream(CUgreenCtx green, [[maybe_unused]] int driverVersion) {
    CUstream stream = nullptr;
#if CUDA_VERSION >= 12050
    if (driverVersion >= 12050) {
        CHECK_DRIVER(cuGreenCtxStreamCreate(&stream, green, CU_STREAM_NON_BLOCKING, 0));
        return stream;
    }
#endif
    CUcontext context = nullptr;
    CHECK_DRIVER(cuCtxFromGreenCtx(&context, green));
    CHECK_DRIVER(cuCtxPushCurrent(context));
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECK_DRIVER(cuCtxPopCurrent(&context));
    return stream;
}

#endif  // CUDA_VERSION >= 12040

}  // namespace lesson17
