// Lesson 23, program 3 — look inside a graph, rewire it, clone it, and let it own a resource.
//
// A CUgraph can be read as well as built: its root nodes, its edges, each node's dependencies and
// dependents. This program builds a diamond (fill -> twice and plus3 side by side -> copy ->
// count), reads it back, and rewires it into a chain with cuGraphRemoveDependencies and
// cuGraphAddDependencies, because twice and plus3 write the same memory and their order decides
// the result. It ties a host-side resource to the graph with a user object before any exec or
// clone is made from it (the graph holds a reference, and the release callback runs once, when
// the last reference goes; the CUDA C++ Programming Guide says execs and clones copy the graph's
// references when they are made), uploads the exec before the first launch (cuGraphUpload), and clones
// the graph and changes one node of the clone only (cuGraphNodeFindInClone).
//
//   introspect               the walkthrough
//   introspect --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <utility>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "lesson23.h"
#include "named_nodes.h"

#if CUDA_VERSION >= 12040
namespace {

using lesson23::indexOf;
using lesson23::nameAt;
using lesson23::Named;
using lesson23::sameSet;
constexpr int kCount = 1 << 16;
constexpr size_t kAll = kCount;
constexpr size_t kBytes = kCount * sizeof(float);

// The resource the graph keeps alive: here a host-side object that the graph's host node writes
// to. A real program would free it in the release callback; this one counts the calls instead,
// so the object itself must outlive every call: main keeps it in static storage, not on its stack.
struct Resource {
    std::atomic<int> launchesSeen{0};
    std::atomic<int> releases{0};
};

// The host node: counts the launches that reached it. It makes no CUDA call.
void CUDA_CB countLaunch(void* userData) {
    static_cast<Resource*>(userData)->launchesSeen.fetch_add(1);
}

// The user object's destructor. cuda.h:21303-21304: it runs on "a shared internal thread" and
// must not call CUDA; with CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, the one flag there is, no CUDA call
// waits for it (cuda.h:21316): the program waits for its sign itself, for a bounded time.
void CUDA_CB releaseResource(void* object) {
    static_cast<Resource*>(object)->releases.fetch_add(1);
}

// Whether `resource` was released (once at least) within `limit`; returns at the first sign of it.
bool releasedWithin(const Resource& resource, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (resource.releases.load() == 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return resource.releases.load() != 0;
}

// A graph's edges as pairs of positions in `names` (a node not there: names.size()), through
// cuGraphGetEdges: once for the count, once for the lists. cuda.h does not say in which order they
// come, so they are sorted: two graphs' edges compare equal when they join the same named nodes.
using Edges = std::vector<std::pair<size_t, size_t>>;

Edges edgesOf(CUgraph graph, const std::vector<Named>& names) {
    size_t count = 0;
    CHECK_DRIVER(course::graphGetEdges(graph, nullptr, nullptr, &count));
    std::vector<CUgraphNode> from(count), to(count);
    CHECK_DRIVER(course::graphGetEdges(graph, from.data(), to.data(), &count));
    Edges edges;
    for (size_t i = 0; i < count; ++i) edges.emplace_back(indexOf(from[i], names), indexOf(to[i], names));
    std::sort(edges.begin(), edges.end());
    return edges;
}

Edges printEdges(CUgraph graph, const std::vector<Named>& names, const char* label) {
    const Edges edges = edgesOf(graph, names);
    std::printf("%s: %zu edges:", label, edges.size());
    for (size_t i = 0; i < edges.size(); ++i)
        std::printf("%s %s -> %s", i > 0 ? "," : "", nameAt(edges[i].first, names), nameAt(edges[i].second, names));
    std::printf("\n");
    return edges;
}

// A node's dependencies (`up`) or dependents (cuGraphNodeGetDependencies / ...GetDependentNodes),
// printed by name in the order of `names`.
std::vector<CUgraphNode> neighbours(CUgraphNode node, bool up, const std::vector<Named>& names, const char* label) {
    const std::vector<CUgraphNode> nodes = lesson23::neighbours(node, up);
    std::vector<size_t> order;
    for (CUgraphNode found : nodes) order.push_back(indexOf(found, names));
    std::sort(order.begin(), order.end());
    std::printf("%s:", label);
    for (size_t i = 0; i < order.size(); ++i) std::printf("%s %s", i > 0 ? "," : "", nameAt(order[i], names));
    std::printf("%s\n", order.empty() ? " none" : "");
    return nodes;
}

// Step 6: the clone against the original. Each named node's counterpart (cuGraphNodeFindInClone)
// must be a node of its own with the original's type, the clone must have no other nodes, and its
// edges must join the counterparts as the original's edges join the originals.
bool cloneMatches(CUgraph original, CUgraph clone, const std::vector<Named>& names) {
    std::vector<Named> inClone;
    size_t sameType = 0;
    for (const Named& node : names) {
        CUgraphNode found = nullptr;
        if (!CHECK_DRIVER_BOOL(cuGraphNodeFindInClone(&found, node.node, clone))) found = nullptr;
        const bool same =
            found != nullptr && found != node.node && lesson23::nodeType(found) == lesson23::nodeType(node.node);
        sameType += same ? 1 : 0;
        inClone.push_back({found, node.name});
    }
    const size_t nodes = lesson23::nodeCount(clone);
    std::printf("clone's nodes: %zu (the original's: %zu), found in it with the original's type: %zu of %zu\n", nodes,
                lesson23::nodeCount(original), sameType, names.size());
    const Edges edges = printEdges(clone, inClone, "clone");
    return nodes == lesson23::nodeCount(original) && sameType == names.size() && edges == edgesOf(original, names);
}

// Launches an exec and returns how many elements of the host buffer are `expected`.
size_t launchAndCount(CUgraphExec exec, CUstream stream, float* host, float expected) {
    std::fill(host, host + kCount, -1.0f);
    CHECK_DRIVER(cuGraphLaunch(exec, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    return lesson23::countEqual(host, kAll, expected);
}

}  // namespace
#endif

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "initialise, check the versions, load the kernel");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    if (!lesson23::usableHere(device, ordinal)) return course::kExitNotApplicable;
#if CUDA_VERSION >= 12040
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("decide_kernels.fatbin").c_str()));
    CUfunction axpb = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&axpb, module, "axpb"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr x = 0;
    CHECK_DRIVER(cuMemAlloc(&x, kBytes));
    void* hostBuffer = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&hostBuffer, kBytes));
    float* host = static_cast<float*>(hostBuffer);
    // Static storage, not main's stack: the release callback comes on a driver thread that no CUDA
    // call waits for, maybe after main has left (a CHECK_DRIVER exit, a failed check); the object
    // must still be there then.
    static Resource resource;

    // Step 2: twice (x = 2x) and plus3 (x = x + 3) both depend only on fill: a diamond.
    course::printStep(2, "build a diamond and read it back");
    CUgraph graph = nullptr;
    CHECK_DRIVER(cuGraphCreate(&graph, 0));
    int n = kCount;
    float two = 2.0f, one = 1.0f, zero = 0.0f, three = 3.0f;
    void* twiceParams[] = {&x, &two, &zero, &n};
    void* plus3Params[] = {&x, &one, &three, &n};
    const unsigned int blocks = lesson23::blocksFor(n);
    const CUgraphNode fill =
        lesson23::addNode(graph, {}, lesson23::memsetNode(x, std::bit_cast<std::uint32_t>(1.0f), kCount, context));
    const CUgraphNode twice = lesson23::addNode(graph, {fill}, lesson23::kernelNode(axpb, blocks, 256, twiceParams));
    const CUgraphNode plus3 = lesson23::addNode(graph, {fill}, lesson23::kernelNode(axpb, blocks, 256, plus3Params));
    const CUgraphNode copy =
        lesson23::addNode(graph, {twice, plus3}, lesson23::copyToHostNode(host, x, kBytes, context));
    CUgraphNodeParams countParams{};
    countParams.type = CU_GRAPH_NODE_TYPE_HOST;
    countParams.host.fn = countLaunch;
    countParams.host.userData = &resource;
    const CUgraphNode count = lesson23::addNode(graph, {copy}, countParams);
    const std::vector<Named> names = {
        {fill, "fill"}, {twice, "twice"}, {plus3, "plus3"}, {copy, "copy"}, {count, "count"}};
    size_t rootCount = 0;
    CHECK_DRIVER(cuGraphGetRootNodes(graph, nullptr, &rootCount));
    std::vector<CUgraphNode> roots(rootCount);
    CHECK_DRIVER(cuGraphGetRootNodes(graph, roots.data(), &rootCount));
    std::printf("root nodes: %zu (%s)\n", rootCount,
                rootCount == 1 ? nameAt(indexOf(roots[0], names), names) : "not one");
    const Edges diamond = printEdges(graph, names, "diamond");  // positions in names: fill 0 ... count 4
    const auto copyWaitsFor = neighbours(copy, true, names, "copy's dependencies");
    const auto afterFill = neighbours(fill, false, names, "fill's dependents");
    course::Verdict verdict;
    verdict.check("introspection finds the diamond",
                  rootCount == 1 && roots[0] == fill && diamond == Edges{{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}} &&
                      sameSet(copyWaitsFor, {twice, plus3}) && sameSet(afterFill, {twice, plus3}));

    // Step 3: the diamond leaves the order of twice and plus3 open. Rewire: twice, then plus3.
    course::printStep(3, "rewire into a chain: remove fill -> plus3 and twice -> copy, add twice -> plus3");
    const CUgraphNode removeFrom[] = {fill, twice};
    const CUgraphNode removeTo[] = {plus3, copy};
    CHECK_DRIVER(course::graphRemoveDependencies(graph, removeFrom, removeTo, 2));
    CHECK_DRIVER(course::graphAddDependencies(graph, &twice, &plus3, 1));
    const Edges chain = printEdges(graph, names, "chain");
    const auto plus3WaitsFor = neighbours(plus3, true, names, "plus3's dependencies");
    verdict.check("the rewired graph is a chain",  // fill -> twice -> plus3 -> copy -> count, nothing else
                  chain == Edges{{0, 1}, {1, 2}, {2, 3}, {3, 4}} && sameSet(plus3WaitsFor, {twice}));

    // Step 4: a user object ties the resource's lifetime to the graph, before any exec or clone is
    // made from it: the CUDA C++ Programming Guide (section "CUDA User Objects", to which
    // cuda.h:21391 points) says an exec and a clone each retain a copy of every reference the graph
    // holds when they are made, so the execs and the clone below keep the resource too (cuda.h
    // itself speaks only of graphs' references, cuda.h:21389).
    // One reference is ours from cuUserObjectCreate, a second from cuUserObjectRetain;
    // CU_GRAPH_USER_OBJECT_MOVE hands that one to the graph, and we release ours.
    course::printStep(4, "user object: the graph holds the last reference, before any exec is made");
    CUuserObject object = nullptr;
    CHECK_DRIVER(cuUserObjectCreate(&object, &resource, releaseResource, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CHECK_DRIVER(cuUserObjectRetain(object, 1));
    CHECK_DRIVER(cuGraphRetainUserObject(graph, object, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK_DRIVER(cuUserObjectRelease(object, 1));
    const bool releasedEarly = releasedWithin(resource, std::chrono::milliseconds(200));
    std::printf("release callback calls 200 ms after our last reference went: %d\n", resource.releases.load());
    verdict.check("the graph's reference keeps the resource", !releasedEarly);

    // Step 5: cuGraphUpload prepares the exec on the stream and runs nothing; then launch.
    course::printStep(5, "instantiate, cuGraphUpload, launch");
    CUgraphExec exec = nullptr;
    CHECK_DRIVER(course::graphInstantiate(&exec, graph, 0));
    std::fill(host, host + kCount, -1.0f);
    CHECK_DRIVER(cuGraphUpload(exec, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const size_t untouched = lesson23::countEqual(host, kAll, -1.0f);
    std::printf("after cuGraphUpload: %zu of %d elements still -1, host node calls: %d\n", untouched, kCount,
                resource.launchesSeen.load());
    verdict.check("cuGraphUpload ran nothing", untouched == kAll && resource.launchesSeen == 0);
    const size_t fives = launchAndCount(exec, stream, host, 5.0f);
    std::printf("chain launch: %zu of %d elements = 5 (1 * 2 + 3; plus3 first would give 8)\n", fives, kCount);
    verdict.check("the chain computes 1 * 2 + 3", fives == kAll);

    // Step 6: a clone is a separate graph with the same nodes and parameters. Change its twice
    // to x = 10x; the original keeps x = 2x.
    course::printStep(6, "cuGraphClone, cuGraphNodeFindInClone, change the clone's node");
    CUgraph clone = nullptr;
    CHECK_DRIVER(cuGraphClone(&clone, graph));
    verdict.check("the clone has the original's nodes and edges", cloneMatches(graph, clone, names));
    CUgraphNode twiceInClone = nullptr;
    CHECK_DRIVER(cuGraphNodeFindInClone(&twiceInClone, twice, clone));
    float ten = 10.0f;
    void* tenfoldParams[] = {&x, &ten, &zero, &n};
    CUgraphNodeParams tenfold = lesson23::kernelNode(axpb, blocks, 256, tenfoldParams);
    CHECK_DRIVER(cuGraphNodeSetParams(twiceInClone, &tenfold));
    std::printf("clone's twice node: %s handle, type %s\n", twiceInClone == twice ? "the same" : "its own",
                lesson23::nodeTypeName(lesson23::nodeType(twiceInClone)));
    CUgraphExec cloneExec = nullptr;
    CHECK_DRIVER(course::graphInstantiate(&cloneExec, clone, 0));
    const size_t thirteens = launchAndCount(cloneExec, stream, host, 13.0f);
    const size_t fivesAgain = launchAndCount(exec, stream, host, 5.0f);
    std::printf("clone launch: %zu of %d elements = 13 (1 * 10 + 3)\n", thirteens, kCount);
    std::printf("original launch: %zu of %d elements = 5\n", fivesAgain, kCount);
    verdict.check("the clone runs its own parameters", thirteens == kAll);
    verdict.check("the original graph kept its parameters", fivesAgain == kAll);

    // Step 7: the execs and the clone go (each may hold a copy of the reference, as the CUDA C++
    // Programming Guide says), then the graph gives its reference back: the count reaches 0 and the driver calls
    // the callback, on "a shared internal thread" (cuda.h:21304), once.
    course::printStep(7, "release the execs and the clone, cuGraphReleaseUserObject, wait for the callback");
    CHECK_DRIVER(cuGraphExecDestroy(cloneExec));
    CHECK_DRIVER(cuGraphExecDestroy(exec));
    CHECK_DRIVER(cuGraphDestroy(clone));
    CHECK_DRIVER(cuGraphReleaseUserObject(graph, object, 1));
    const bool released = releasedWithin(resource, std::chrono::seconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // time for a second call, if one came
    std::printf("release callback calls after the graph's release: %d\n", resource.releases.load());
    std::printf("launches the host node counted: %d\n", resource.launchesSeen.load());
    verdict.check("the release callback ran exactly once", released && resource.releases == 1);

    course::printStep(8, "release everything, newest first");
    CHECK_DRIVER(cuGraphDestroy(graph));                // where step 7 failed, this drops the graph's reference
    releasedWithin(resource, std::chrono::seconds(5));  // a callback still due: wait for it, bounded
    CHECK_DRIVER(cuMemFreeHost(hostBuffer));
    CHECK_DRIVER(cuMemFree(x));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: graph, buffers, stream, module, primary context\n");

    course::printStep(9, "check");
    return verdict.finish();
#else
    return course::kExitNotApplicable;  // not reached: usableHere said why and returned false
#endif
}
