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

#include <cstddef>

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

// The same advice for the host: in 13.0 a CUmemLocation of type CU_MEM_LOCATION_TYPE_HOST (its id
// "is ignored", cuda.h:14477-14478); before, the CUdevice CU_DEVICE_CPU.
inline CUresult memAdviseForHost(CUdeviceptr pointer, size_t bytes, CUmem_advise advice) {
#if CUDA_VERSION >= 13000
    return cuMemAdvise(pointer, bytes, advice, hostLocation());
#else
    return cuMemAdvise(pointer, bytes, advice, CU_DEVICE_CPU);
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

// Graph calls whose signature changed in CUDA 13.0 (lesson 23).
//
// 12.4's cuda.h has "edge data" (CUgraphEdgeData: ports and a dependency type on each edge) and
// entry points that carry it (cuGraphAddNode_v2, cuGraphGetEdges_v2, ...), but keeps the plain
// names on the functions without it. 13.0's cuda.h maps the plain names to the _v2 (and _v3)
// functions (cuda.h:165-181), so the same source line needs an extra argument there. The
// wrappers switch at 13.0 (the 12.x headers after 12.4 are not checked here). Every edge in the
// lesson is a plain one (default, zeroed edge data), which cuda.h lets a caller express with a
// NULL edge-data pointer (cuda.h:21461, 20147, 20186, 20265, 20291).
#if CUDA_VERSION >= 12040
// cuGraphAddNode: 13.0 adds `dependencyData` before `numDependencies`.
inline CUresult graphAddNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies, size_t count,
                             CUgraphNodeParams* params) {
#if CUDA_VERSION >= 13000
    return cuGraphAddNode(node, graph, dependencies, nullptr, count, params);
#else
    return cuGraphAddNode(node, graph, dependencies, count, params);
#endif
}

// cuGraphGetEdges: 13.0 adds `edgeData` after `to`. NULL asks for edges that all have default
// data; cuda.h: otherwise the query is lossy and fails with CUDA_ERROR_LOSSY_QUERY.
inline CUresult graphGetEdges(CUgraph graph, CUgraphNode* from, CUgraphNode* to, size_t* count) {
#if CUDA_VERSION >= 13000
    return cuGraphGetEdges(graph, from, to, nullptr, count);
#else
    return cuGraphGetEdges(graph, from, to, count);
#endif
}

// cuGraphNodeGetDependencies / cuGraphNodeGetDependentNodes: 13.0 adds `edgeData`.
inline CUresult nodeGetDependencies(CUgraphNode node, CUgraphNode* dependencies, size_t* count) {
#if CUDA_VERSION >= 13000
    return cuGraphNodeGetDependencies(node, dependencies, nullptr, count);
#else
    return cuGraphNodeGetDependencies(node, dependencies, count);
#endif
}

inline CUresult nodeGetDependentNodes(CUgraphNode node, CUgraphNode* dependents, size_t* count) {
#if CUDA_VERSION >= 13000
    return cuGraphNodeGetDependentNodes(node, dependents, nullptr, count);
#else
    return cuGraphNodeGetDependentNodes(node, dependents, count);
#endif
}

// cuGraphAddDependencies / cuGraphRemoveDependencies: 13.0 adds `edgeData` before the count.
inline CUresult graphAddDependencies(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to, size_t count) {
#if CUDA_VERSION >= 13000
    return cuGraphAddDependencies(graph, from, to, nullptr, count);
#else
    return cuGraphAddDependencies(graph, from, to, count);
#endif
}

inline CUresult graphRemoveDependencies(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to, size_t count) {
#if CUDA_VERSION >= 13000
    return cuGraphRemoveDependencies(graph, from, to, nullptr, count);
#else
    return cuGraphRemoveDependencies(graph, from, to, count);
#endif
}

// cuStreamGetCaptureInfo: 12.4's plain name is the _v2 form (six arguments); 13.0's is _v3,
// with `edgeData_out` before the count.
inline CUresult streamGetCaptureInfo(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                                     const CUgraphNode** dependencies, size_t* count) {
#if CUDA_VERSION >= 13000
    return cuStreamGetCaptureInfo(stream, status, id, graph, dependencies, nullptr, count);
#else
    return cuStreamGetCaptureInfo(stream, status, id, graph, dependencies, count);
#endif
}

// cuStreamUpdateCaptureDependencies: 13.0 adds `dependencyData` before the count.
inline CUresult streamUpdateCaptureDependencies(CUstream stream, CUgraphNode* dependencies, size_t count,
                                                unsigned int flags) {
#if CUDA_VERSION >= 13000
    return cuStreamUpdateCaptureDependencies(stream, dependencies, nullptr, count, flags);
#else
    return cuStreamUpdateCaptureDependencies(stream, dependencies, count, flags);
#endif
}
#endif  // CUDA_VERSION >= 12040

// The stream memory operations under one spelling for every toolkit (lesson 24).
//
// CUDA 11.7 added a second version of the stream memory operations, cuStreamWaitValue32_v2,
// cuStreamWriteValue32_v2, cuStreamWaitValue64_v2, cuStreamWriteValue64_v2 and
// cuStreamBatchMemOp_v2, with their own support attribute,
// CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V2 (11.8's cuda.h). Since the 12.x headers
// the plain names are #defined to the _v2 functions (cuda.h:174-178 in 13.0) and the plain
// attribute name is the v2 one (= 122); the old attribute is ..._V1, "Deprecated, along with v1
// MemOps API" (cuda.h:821). So one line means the v1 call with 11.x headers and the v2 call with
// 12.x headers. This lesson uses v2 everywhere: through the plain names from 12.0, through the
// _v2 names with 11.7 and 11.8 headers, and not at all before 11.7 (the programs SKIP).
constexpr int kMemOpsV2Version = 11070;

#if CUDA_VERSION >= 12000
constexpr CUdevice_attribute kCanUse64BitMemOps = CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS;
inline CUresult streamWaitValue32(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned int f) {
    return cuStreamWaitValue32(s, a, v, f);
}
inline CUresult streamWaitValue64(CUstream s, CUdeviceptr a, cuuint64_t v, unsigned int f) {
    return cuStreamWaitValue64(s, a, v, f);
}
inline CUresult streamWriteValue64(CUstream s, CUdeviceptr a, cuuint64_t v, unsigned int f) {
    return cuStreamWriteValue64(s, a, v, f);
}
inline CUresult streamWriteValue32(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned int f) {
    return cuStreamWriteValue32(s, a, v, f);
}
inline CUresult streamBatchMemOp(CUstream s, unsigned int count, CUstreamBatchMemOpParams* ops, unsigned int f) {
    return cuStreamBatchMemOp(s, count, ops, f);
}
#elif CUDA_VERSION >= 11070
constexpr CUdevice_attribute kCanUse64BitMemOps = CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V2;
inline CUresult streamWaitValue32(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned int f) {
    return cuStreamWaitValue32_v2(s, a, v, f);
}
inline CUresult streamWaitValue64(CUstream s, CUdeviceptr a, cuuint64_t v, unsigned int f) {
    return cuStreamWaitValue64_v2(s, a, v, f);
}
inline CUresult streamWriteValue64(CUstream s, CUdeviceptr a, cuuint64_t v, unsigned int f) {
    return cuStreamWriteValue64_v2(s, a, v, f);
}
inline CUresult streamWriteValue32(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned int f) {
    return cuStreamWriteValue32_v2(s, a, v, f);
}
inline CUresult streamBatchMemOp(CUstream s, unsigned int count, CUstreamBatchMemOpParams* ops, unsigned int f) {
    return cuStreamBatchMemOp_v2(s, count, ops, f);
}
#endif

}  // namespace course
