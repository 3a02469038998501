// cache_preference.h — step 2 of lesson 22's occupancy program: the context's cache preference,
// set and read back. cuda.h says what a read gives: "the preferred cache configuration for the
// current context" on devices where "the L1 cache and shared memory use the same hardware
// resources", and CU_FUNC_CACHE_PREFER_NONE "on devices where the size of the L1 cache and
// shared memory are fixed" (cuda.h:6798-6806), where setting one "does nothing" (6853-6854).
#pragma once

#include <cuda.h>

#include <cstdio>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "lesson22.h"

namespace lesson22 {

// Read the preference, set PREFER_SHARED and read, set PREFER_L1 and read, set the first one
// again and read. Two different preferences, neither of them the default PREFER_NONE, must each
// read back as set; or, on a device with a fixed split, every read must be PREFER_NONE.
inline void contextCachePreference(course::Verdict& verdict) {
    CUfunc_cache initial = CU_FUNC_CACHE_PREFER_NONE;
    CUfunc_cache shared = CU_FUNC_CACHE_PREFER_NONE;
    CUfunc_cache l1 = CU_FUNC_CACHE_PREFER_NONE;
    // Not PREFER_NONE, the default a fresh context starts with: a restore that is never read
    // back cannot pass for one that worked.
    CUfunc_cache restored = CU_FUNC_CACHE_PREFER_EQUAL;
    CHECK_DRIVER(cuCtxGetCacheConfig(&initial));
    CHECK_DRIVER(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_SHARED));
    CHECK_DRIVER(cuCtxGetCacheConfig(&shared));
    CHECK_DRIVER(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_L1));
    CHECK_DRIVER(cuCtxGetCacheConfig(&l1));
    CHECK_DRIVER(cuCtxSetCacheConfig(initial));
    CHECK_DRIVER(cuCtxGetCacheConfig(&restored));
    std::printf("context cache preference: %s\n", cacheConfigName(initial));
    std::printf("after cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_SHARED): %s\n", cacheConfigName(shared));
    std::printf("after cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_L1): %s\n", cacheConfigName(l1));
    const bool kept = shared == CU_FUNC_CACHE_PREFER_SHARED && l1 == CU_FUNC_CACHE_PREFER_L1;
    const bool fixed = initial == CU_FUNC_CACHE_PREFER_NONE && shared == CU_FUNC_CACHE_PREFER_NONE &&
                       l1 == CU_FUNC_CACHE_PREFER_NONE && restored == CU_FUNC_CACHE_PREFER_NONE;
    std::printf("L1 and shared memory share their hardware here: %s\n",
                kept ? "yes (each preference set was kept)" : "no (the preferences set did not read back)");
    verdict.check("cuCtxGetCacheConfig reads back each preference set, or PREFER_NONE throughout", kept || fixed);
    std::printf("context cache preference after setting the first one again: %s\n", cacheConfigName(restored));
    const char* name = "the context's cache preference is back to what it was";
    if (kept)
        verdict.check(name, restored == initial);
    else
        std::printf("check %s: SKIP (the preferences set did not read back)\n", name);
}

}  // namespace lesson22
