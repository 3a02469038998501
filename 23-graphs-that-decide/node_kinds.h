// node_kinds.h — general_nodes' pieces: the host node's function and what it looks at, the
// CUgraphNodeParams of event and host nodes, and one launch of the graph behind a slow producer.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>

#include "../common/check_driver.h"
#include "lesson23.h"

#if CUDA_VERSION >= 12040
namespace lesson23 {

// What the host node looks at: the page-locked buffer the memcpy node filled, and the value each
// of its `count` elements should hold. cuda.h:18994 says only that the node "will invoke the
// specified CPU function", not on which thread: what it shares with main is atomic, so that any
// thread may run it.
struct HostView {
    const float* buffer = nullptr;
    size_t count = 0;
    std::atomic<float> expected{0.0f};
    std::atomic<int> calls{0};
    std::atomic<size_t> correct{0};  // elements that held `expected` when the node ran
};

// The host node's function. It makes no CUDA call: cuda.h forbids that to cuLaunchHostFunc's
// function, the stream form of a host node (cuda.h:18070), and says nothing looser for host nodes.
inline void CUDA_CB inspect(void* userData) {
    HostView* view = static_cast<HostView*>(userData);
    view->correct = countEqual(view->buffer, view->count, view->expected.load());
    view->calls.fetch_add(1);
}

// An event wait node (CU_GRAPH_NODE_TYPE_WAIT_EVENT) or an event record node
// (CU_GRAPH_NODE_TYPE_EVENT_RECORD): each has its own member of the union.
inline CUgraphNodeParams eventNode(CUgraphNodeType type, CUevent event) {
    CUgraphNodeParams node{};
    node.type = type;
    if (type == CU_GRAPH_NODE_TYPE_WAIT_EVENT) node.eventWait.event = event;
    if (type == CU_GRAPH_NODE_TYPE_EVENT_RECORD) node.eventRecord.event = event;
    return node;
}

inline CUgraphNodeParams hostNode(HostView* view) {
    CUgraphNodeParams node{};
    node.type = CU_GRAPH_NODE_TYPE_HOST;
    node.host.fn = inspect;
    node.host.userData = view;
    return node;
}

// What every launch of general_nodes' graph needs.
struct ProducerLaunch {
    CUfunction produce;  // the slow producer kernel
    CUstream producer;   // its stream
    CUstream stream;     // the graph's stream
    CUdeviceptr y;       // what the producer writes: count floats
    int count;
    float value;
    unsigned long long spinNs;  // how long the producer waits before it writes
    CUevent produced;           // recorded behind the producer; the graph's event wait node waits for it
    CUevent finished;           // the graph's event record node records it
    CUgraphExec exec;
};

// One launch of the graph behind a fresh producer: y cleared, then, once %globaltimer has
// advanced by spinNs, set to `value`, and `produced` recorded behind that. The graph's event wait
// node waits for that event. The host then waits for the graph's own event record node
// (cuEventSynchronize), not for the graph's stream.
inline void launchBehindProducer(const ProducerLaunch& l) {
    // y is zero before anything else is queued: a graph that did not wait reads zeros, never the
    // last launch's values.
    CHECK_DRIVER(cuMemsetD32Async(l.y, 0, static_cast<size_t>(l.count), l.producer));
    CHECK_DRIVER(cuStreamSynchronize(l.producer));
    CUdeviceptr y = l.y;
    float value = l.value;
    int n = l.count;
    unsigned long long spin = l.spinNs;
    void* params[] = {&y, &value, &n, &spin};
    CHECK_DRIVER(cuLaunchKernel(l.produce, 1, 1, 1, 256, 1, 1, 0, l.producer, params, nullptr));
    CHECK_DRIVER(cuEventRecord(l.produced, l.producer));
    CHECK_DRIVER(cuGraphLaunch(l.exec, l.stream));
    CHECK_DRIVER(cuEventSynchronize(l.finished));
}

}  // namespace lesson23
#endif
