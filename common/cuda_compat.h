// cuda_compat.h — the course's one version shim.
//
// A few Driver API entry points changed signature between CUDA 11.4 and 13.x.
// cuda.h maps each plain name (cuCtxCreate) to the newest ABI version it knows
// (cuCtxCreate_v4 in CUDA 13) with a #define, so the same source line means a
// different function on each toolkit. The wrappers below give the lessons one
// spelling that compiles everywhere; lessons call the raw API wherever it did
// not change.
#pragma once

#include <cuda.h>

// CUDA 12.0 added a status out-parameter to cuGetProcAddress. On older toolkits
// the type does not exist, so the shim declares the same three values.
#if CUDA_VERSION < 12000
typedef enum CUdriverProcAddressQueryResult_enum {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
} CUdriverProcAddressQueryResult;
#endif

namespace course {

// cuCtxCreate: (ctx, flags, dev) up to CUDA 12; CUDA 13 maps the name to
// cuCtxCreate_v4, which takes a CUctxCreateParams* in second place. NULL there
// asks for an ordinary context, the same as the old call.
inline CUresult ctxCreate(CUcontext* context, unsigned int flags, CUdevice device) {
#if CUDA_VERSION >= 13000
    return cuCtxCreate(context, nullptr, flags, device);
#else
    return cuCtxCreate(context, flags, device);
#endif
}

// cuGetProcAddress: CUDA 12.0 added the symbolStatus out-parameter. On 11.x the
// status is derived the only way that API allows: a NULL pointer means "not found".
inline CUresult getProcAddress(const char* symbol, void** function, int cudaVersion, cuuint64_t flags,
                               CUdriverProcAddressQueryResult* symbolStatus) {
#if CUDA_VERSION >= 12000
    return cuGetProcAddress(symbol, function, cudaVersion, flags, symbolStatus);
#else
    const CUresult result = cuGetProcAddress(symbol, function, cudaVersion, flags);
    if (symbolStatus != nullptr) {
        *symbolStatus = (result == CUDA_SUCCESS && *function != nullptr) ? CU_GET_PROC_ADDRESS_SUCCESS
                                                                         : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    return result;
#endif
}

// cuMemPrefetchAsync / cuMemAdvise: CUDA 13 takes a CUmemLocation (device, host,
// NUMA node) where older toolkits took a CUdevice with CU_DEVICE_CPU for the host.
#if CUDA_VERSION >= 13000
inline CUmemLocation deviceLocation(CUdevice device) {
    CUmemLocation location{};
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = device;
    return location;
}
inline CUmemLocation hostLocation() {
    CUmemLocation location{};
    location.type = CU_MEM_LOCATION_TYPE_HOST;
    location.id = 0;
    return location;
}
#endif

inline CUresult memPrefetchToDevice(CUdeviceptr pointer, size_t bytes, CUdevice device, CUstream stream) {
#if CUDA_VERSION >= 13000
    return cuMemPrefetchAsync(pointer, bytes, deviceLocation(device), 0, stream);
#else
    return cuMemPrefetchAsync(pointer, bytes, device, stream);
#endif
}

inline CUresult memPrefetchToHost(CUdeviceptr pointer, size_t bytes, CUstream stream) {
#if CUDA_VERSION >= 13000
    return cuMemPrefetchAsync(pointer, bytes, hostLocation(), 0, stream);
#else
    return cuMemPrefetchAsync(pointer, bytes, CU_DEVICE_CPU, stream);
#endif
}

inline CUresult memAdviseForDevice(CUdeviceptr pointer, size_t bytes, CUmem_advise advice, CUdevice device) {
#if CUDA_VERSION >= 13000
    return cuMemAdvise(pointer, bytes, advice, deviceLocation(device));
#else
    return cuMemAdvise(pointer, bytes, advice, device);
#endif
}

// cuGraphInstantiate: before CUDA 12.0 it took (exec, graph, errorNode, logBuffer,
// bufferSize) and wrote a failing node and a message into the caller's buffer. Since
// 12.0 the plain name is cuGraphInstantiateWithFlags-like: (exec, graph, flags), and
// errors come back only as the CUresult. cuGraphInstantiateWithFlags itself exists
// from CUDA 11.4 on, so older toolkits call it by that name: one meaning everywhere.
inline CUresult graphInstantiate(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
#if CUDA_VERSION >= 12000
    return cuGraphInstantiate(exec, graph, flags);
#else
    return cuGraphInstantiateWithFlags(exec, graph, flags);
#endif
}

// cuGraphExecUpdate: before CUDA 12.0 it took (exec, graph, CUgraphNode* errorNode,
// CUgraphExecUpdateResult* result); since 12.0 both answers come back in one
// CUgraphExecUpdateResultInfo (which also names the "from" node of a changed edge).
// The wrapper hands back the two answers every version has.
inline CUresult graphExecUpdate(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResult* result,
                                CUgraphNode* errorNode) {
#if CUDA_VERSION >= 12000
    CUgraphExecUpdateResultInfo info{};
    const CUresult status = cuGraphExecUpdate(exec, graph, &info);
    *result = info.result;
    *errorNode = info.errorNode;
    return status;
#else
    return cuGraphExecUpdate(exec, graph, errorNode, result);
#endif
}

}  // namespace course
