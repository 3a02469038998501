// managed_compat.h — the CUDA versions from which lesson 26 uses its newer calls. The calls whose
// signature changed at 13.0 (cuMemPrefetchAsync, cuMemAdvise) go through common/cuda_compat.h.
#pragma once

#include <cuda.h>

#include <string>

#include "../common/course_util.h"
#include "../common/cuda_compat.h"

namespace lesson26 {

// The versions below are the course's choice: cuda.h names no version a name came with. What the
// headers the course is checked against show:
// - CU_MEM_RANGE_ATTRIBUTE_{PREFERRED,LAST_PREFETCH}_LOCATION_{TYPE,ID} are not in 11.8's cuda.h and
//   are in 12.4's (12.4 cuda.h:1078-1081); the course asks for 12.2 headers and driver.
constexpr int kLocationFormsVersion = 12020;
// - cuMemPrefetchBatchAsync, cuMemDiscardBatchAsync, cuMemDiscardAndPrefetchBatchAsync,
//   cuDeviceGetHostAtomicCapabilities, cuMemGetDefaultMemPool, cuMemGetMemPool and cuMemSetMemPool
//   are in 13.0's cuda.h (cuda.h:14596, 14629, 14677, 5531, 13598, 13620, 13647) and not in 12.4's;
//   the course asks for 13.0 headers and driver.
constexpr int kCuda13 = 13000;

// Why `what`, which the course uses only from CUDA `needed` on, cannot run with this build's
// headers and a driver of `driverVersion`; "" when both are new enough. The programs name the 13.0
// functions directly, as lesson 17 names the 12.4 ones: with the default lazy binding a symbol the
// driver lacks is looked up only at its first call, which this check prevents on an older driver; a
// program linked with -Wl,-z,now would instead stop at start-up there (lesson 25 explains the
// difference).
inline std::string versionReason(int needed, int driverVersion, const char* what) {
    if (CUDA_VERSION < needed)
        return "built with CUDA " + course::formatCudaVersion(CUDA_VERSION) + " headers; " + what + " needs " +
               course::formatCudaVersion(needed) + " headers";
    if (driverVersion < needed)
        return "the driver supports CUDA " + course::formatCudaVersion(driverVersion) + "; " + what + " needs " +
               course::formatCudaVersion(needed);
    return "";
}

}  // namespace lesson26
