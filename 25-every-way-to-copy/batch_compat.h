// batch_compat.h — cuMemcpyBatchAsync and cuMemcpy3DBatchAsync under one spelling for every
// toolkit that has them, resolved at run time, and whether this build and this driver can call them.
//
// This is a version shim, and the course keeps its version shims in common/cuda_compat.h; it
// lives in the lesson folder until it moves there.
//
// CUDA 12.8 added both calls with an out-parameter `size_t* failIdx` (the copy that failed).
// CUDA 13.0 removed it, and its cuda.h maps the plain names to the new ABI:
//   #define cuMemcpyBatchAsync   __CUDA_API_PTSZ(cuMemcpyBatchAsync_v2)     (cuda.h:122)
//   #define cuMemcpy3DBatchAsync __CUDA_API_PTSZ(cuMemcpy3DBatchAsync_v2)   (cuda.h:123)
// cuda.h still declares the unversioned names with the 12.8 arguments, failIdx included, in the
// section it keeps for the driver's own build (cuda.h:25716-25720, under __CUDA_API_VERSION_INTERNAL),
// and cudaTypedefs.h names both: PFN_cuMemcpyBatchAsync_v12080 (with failIdx) and
// PFN_cuMemcpyBatchAsync_v13000 (without), cudaTypedefs.h:518-521. So one source line,
// cuMemcpyBatchAsync(...), is a different function under each toolkit.
//
// A program that called cuMemcpyBatchAsync directly would, built with CUDA 13 headers, name the
// symbol cuMemcpyBatchAsync_v2 in its dynamic symbol table: the ABI cudaTypedefs.h dates to 13.0
// (PFN_cuMemcpyBatchAsync_v13000). Neither header lists what a driver exports; a 12.8 or 12.9
// driver is older than that ABI, and where the symbol is missing, a program linked with -Wl,-z,now
// (or run with LD_BIND_NOW=1) would not even reach main. The course's programs never name the
// symbol: resolveBatchCalls() asks cuGetProcAddress for
// "cuMemcpyBatchAsync" at the CUDA version whose ABI this build's headers declare (13000 with
// CUDA 13 headers, 12080 with 12.8 and 12.9), after cuDriverGetVersion has said the driver is that
// new; asked for a version newer than the driver, cuGetProcAddress returns CUDA_ERROR_INVALID_VALUE
// (cuda.h:24295-24296).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdio>
#include <string>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"

namespace lesson25 {

// The CUDA version that brought the two calls, and the driver this build's ABI needs.
constexpr int kBatchHeadersNeeded = 12080;
#if CUDA_VERSION >= 13000
constexpr int kBatchDriverNeeded = 13000;  // the _v2 ABI, without failIdx
#else
constexpr int kBatchDriverNeeded = 12080;  // the 12.8 ABI, with failIdx
#endif

// Why batched copies cannot run with this build's headers and a driver of `driverVersion`, or ""
// when the versions allow them (the entry points themselves: resolveBatchCalls).
inline std::string batchUnavailableReason(int driverVersion) {
    if (CUDA_VERSION < kBatchHeadersNeeded)
        return "built with CUDA " + course::formatCudaVersion(CUDA_VERSION) +
               " headers; cuMemcpyBatchAsync came with 12.8";
    if (driverVersion < kBatchDriverNeeded)
        return "the driver supports CUDA " + course::formatCudaVersion(driverVersion) +
               "; this build's cuMemcpyBatchAsync needs " + course::formatCudaVersion(kBatchDriverNeeded);
    return "";
}

#if CUDA_VERSION >= 12080
// The locations a CUmemcpyAttributes or a CUmemcpy3DOperand names as a hint.
inline CUmemLocation deviceLocation(int ordinal) {
    CUmemLocation location{};
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = ordinal;
    return location;
}
inline CUmemLocation hostLocation() {
    CUmemLocation location{};
    location.type = CU_MEM_LOCATION_TYPE_HOST;
    location.id = 0;
    return location;
}

// The function types of this build's ABI, as cudaTypedefs.h names them: a type refers to no symbol.
#if CUDA_VERSION >= 13000
using MemcpyBatchAsyncFunction = PFN_cuMemcpyBatchAsync_v13000;
using Memcpy3DBatchAsyncFunction = PFN_cuMemcpy3DBatchAsync_v13000;
#else
using MemcpyBatchAsyncFunction = PFN_cuMemcpyBatchAsync_v12080;
using Memcpy3DBatchAsyncFunction = PFN_cuMemcpy3DBatchAsync_v12080;
#endif

struct BatchCalls {
    MemcpyBatchAsyncFunction batch = nullptr;
    Memcpy3DBatchAsyncFunction batch3D = nullptr;
};
inline BatchCalls& batchCalls() {
    static BatchCalls calls;
    return calls;
}

// Resolves both calls through cuGetProcAddress at kBatchDriverNeeded. Call it after cuInit, and only
// when batchUnavailableReason(driver version) is "". Returns "" when both were found, else why not.
inline std::string resolveBatchCalls() {
    void* batch = nullptr;
    void* batch3D = nullptr;
    CUdriverProcAddressQueryResult batchFound = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUdriverProcAddressQueryResult batch3DFound = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CHECK_DRIVER(course::getProcAddress("cuMemcpyBatchAsync", &batch, kBatchDriverNeeded, CU_GET_PROC_ADDRESS_DEFAULT,
                                        &batchFound));
    CHECK_DRIVER(course::getProcAddress("cuMemcpy3DBatchAsync", &batch3D, kBatchDriverNeeded,
                                        CU_GET_PROC_ADDRESS_DEFAULT, &batch3DFound));
    if (batch == nullptr || batch3D == nullptr || batchFound != CU_GET_PROC_ADDRESS_SUCCESS ||
        batch3DFound != CU_GET_PROC_ADDRESS_SUCCESS)
        return "cuGetProcAddress has no cuMemcpyBatchAsync and cuMemcpy3DBatchAsync of CUDA " +
               course::formatCudaVersion(kBatchDriverNeeded) + " in this driver";
    batchCalls().batch = reinterpret_cast<MemcpyBatchAsyncFunction>(batch);
    batchCalls().batch3D = reinterpret_cast<Memcpy3DBatchAsyncFunction>(batch3D);
    return "";
}

// Why this process cannot make batched copies, or "" when it can: the versions first, then the
// entry points (resolved here when the versions allow them).
inline std::string batchCallsUnavailable(int driverVersion) {
    const std::string tooOld = batchUnavailableReason(driverVersion);
    return tooOld.empty() ? resolveBatchCalls() : tooOld;
}

// cuMemcpyBatchAsync with CUDA 13.0's arguments, through the resolved entry point. With 12.8 and
// 12.9 headers the call also returns the index of a failing copy in failIdx; the course reads only
// the CUresult.
inline CUresult memcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                 CUmemcpyAttributes* attrs, size_t* attrsIdxs, size_t numAttrs, CUstream stream) {
    const MemcpyBatchAsyncFunction batch = batchCalls().batch;
    if (batch == nullptr) return CUDA_ERROR_NOT_FOUND;  // resolveBatchCalls() did not find it
#if CUDA_VERSION >= 13000
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream);
#else
    size_t failIdx = 0;
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, &failIdx, stream);
#endif
}

// cuMemcpy3DBatchAsync with CUDA 13.0's arguments (flags "must be zero now", cuda.h:11231).
inline CUresult memcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* opList, unsigned long long flags,
                                   CUstream stream) {
    const Memcpy3DBatchAsyncFunction batch3D = batchCalls().batch3D;
    if (batch3D == nullptr) return CUDA_ERROR_NOT_FOUND;
#if CUDA_VERSION >= 13000
    return batch3D(numOps, opList, flags, stream);
#else
    size_t failIdx = 0;
    return batch3D(numOps, opList, &failIdx, flags, stream);
#endif
}
#else
inline std::string batchCallsUnavailable(int driverVersion) {
    return batchUnavailableReason(driverVersion);
}
#endif

// The two batched programs' answer where the batched copies cannot run: the section and the
// program SKIP with `reason`, and the exit code "not applicable here".
inline int skipBatchedCopies(const std::string& reason) {
    std::printf("section batched copies: SKIP (%s)\nResult = SKIP (%s)\n", reason.c_str(), reason.c_str());
    return course::kExitNotApplicable;
}

}  // namespace lesson25
