// Lesson 23, program 5 — a graph that the GPU launches.
//
// An executable graph instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH can be launched
// by a kernel (cudaGraphLaunch on the device) as well as by the host. Such a graph has rules of
// its own (cuda.h, cuGraphInstantiate): one context, only kernel, memcpy, memset and child graph
// nodes, at least one kernel, memcpy or memset node. This program instantiates a graph that breaks
// a rule with cuGraphInstantiateWithParams, which says why it refuses and which node it refuses;
// then instantiates one that keeps them, uploads it (the CUDA C++ Programming Guide asks for an
// upload before a device launch, by cuGraphUpload, the instantiate flag or a first host launch;
// cuda.h does not), and launches it three times from a kernel of another graph and once from
// the host, counting the runs on the GPU.
//
//   device_launch               the walkthrough
//   device_launch --device N    another GPU
#include <cuda.h>

#include <cstdio>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "lesson23.h"

#if CUDA_VERSION >= 12040
namespace {

const char* instantiateResultName(CUgraphInstantiateResult result) {
    switch (result) {
        case CUDA_GRAPH_INSTANTIATE_SUCCESS: return "CUDA_GRAPH_INSTANTIATE_SUCCESS";
        case CUDA_GRAPH_INSTANTIATE_ERROR: return "CUDA_GRAPH_INSTANTIATE_ERROR";
        case CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE: return "CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE";
        case CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED:
            return "CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED";
        case CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED:
            return "CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED";
        default: return "(another CUgraphInstantiateResult)";
    }
}

// The host node of the graph that the device-launch instantiation must refuse; it never runs.
void CUDA_CB neverRuns(void*) {}

unsigned int counterValue(CUdeviceptr counter) {
    return lesson23::copyBack<unsigned int>(counter, 1)[0];
}

}  // namespace
#endif

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    // Step 1: two modules: bump (the device graph's work) and launch_from_device (the kernel
    // that launches it), in a module of its own by the lesson's choice (launcher_kernels.cu says why).
    course::printStep(1, "initialise, check the versions, load the kernels");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    if (!lesson23::usableHere(device, ordinal)) return course::kExitNotApplicable;
#if CUDA_VERSION >= 12040
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr, launcherModule = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("decide_kernels.fatbin").c_str()));
    CHECK_DRIVER(cuModuleLoad(&launcherModule, course::kernelPath("launcher_kernels.fatbin").c_str()));
    CUfunction bump = nullptr, launchFromDevice = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&bump, module, "bump"));
    CHECK_DRIVER(cuModuleGetFunction(&launchFromDevice, launcherModule, "launch_from_device"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr counter = 0, status = 0;
    CHECK_DRIVER(cuMemAlloc(&counter, sizeof(unsigned int)));
    CHECK_DRIVER(cuMemAlloc(&status, sizeof(int)));
    course::Verdict verdict;

    // Step 2: bump -> a host node. cuda.h: a graph for device launch holds only kernel, memcpy,
    // memset and child graph nodes. cuGraphInstantiateWithParams fills in result_out and
    // hErrNode_out to say what went wrong and where.
    course::printStep(2, "cuGraphInstantiateWithParams refuses a host node for device launch");
    void* bumpParams[] = {&counter};
    CUgraph withHost = nullptr;
    CHECK_DRIVER(cuGraphCreate(&withHost, 0));
    const CUgraphNode bumpFirst = lesson23::addNode(withHost, {}, lesson23::kernelNode(bump, 1, 1, bumpParams));
    CUgraphNodeParams hostParams{};
    hostParams.type = CU_GRAPH_NODE_TYPE_HOST;
    hostParams.host.fn = neverRuns;
    const CUgraphNode hostNode = lesson23::addNode(withHost, {bumpFirst}, hostParams);
    CUDA_GRAPH_INSTANTIATE_PARAMS refusedParams{};
    refusedParams.flags = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
    CUgraphExec refusedExec = nullptr;
    const CUresult refused = REPORT_DRIVER(cuGraphInstantiateWithParams(&refusedExec, withHost, &refusedParams));
    std::printf("instantiate for device launch, with a host node: %s\n", course::driverErrorName(refused));
    std::printf("result_out: %s\n", instantiateResultName(refusedParams.result_out));
    std::printf("hErrNode_out: %s\n",
                refusedParams.hErrNode_out == hostNode ? "the host node" : "another node or none");
    verdict.check("the device-launch instantiation refused the host node and named it",
                  refused != CUDA_SUCCESS &&
                      refusedParams.result_out == CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED &&
                      refusedParams.hErrNode_out == hostNode);
    if (refused == CUDA_SUCCESS) CHECK_DRIVER(cuGraphExecDestroy(refusedExec));

    // Step 3: a graph that keeps the rules: one kernel node. Uploaded before any kernel launches it:
    // the CUDA C++ Programming Guide (section 4.2.6.1.2) says a graph "must first be uploaded to the
    // device" to be launched there, by cuGraphUpload, the upload flag or a first host launch (which
    // would also run it). cuda.h says of cuGraphUpload only that it uploads "without executing it"
    // (cuda.h:21024). The Guide also asks for an upload again after an update; nothing here updates.
    course::printStep(3, "instantiate bump for device launch, cuGraphExecGetFlags, cuGraphUpload");
    CUgraph onDevice = nullptr;
    CHECK_DRIVER(cuGraphCreate(&onDevice, 0));
    lesson23::addNode(onDevice, {}, lesson23::kernelNode(bump, 1, 1, bumpParams));
    CUDA_GRAPH_INSTANTIATE_PARAMS deviceParams{};
    deviceParams.flags = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
    CUgraphExec deviceExec = nullptr;
    CHECK_DRIVER(cuGraphInstantiateWithParams(&deviceExec, onDevice, &deviceParams));
    cuuint64_t flags = 0;
    CHECK_DRIVER(cuGraphExecGetFlags(deviceExec, &flags));
    std::printf("instantiate for device launch, kernel node only: %s\n",
                instantiateResultName(deviceParams.result_out));
    std::printf("exec flags: 0x%llx (CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH: %s)\n",
                static_cast<unsigned long long>(flags),
                (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) ? "set" : "not set");
    // cuda.h: cuGraphExecGetFlags returns "the flags that were passed to instantiation" (UPLOAD aside).
    verdict.check("the exec reports the flags it was instantiated with",
                  flags == CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH);
    CHECK_DRIVER(cuMemsetD32Async(counter, 0, 1, stream));
    CHECK_DRIVER(cuMemsetD32Async(status, 0, 1, stream));
    CHECK_DRIVER(cuGraphUpload(deviceExec, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const unsigned int afterUpload = counterValue(counter);
    std::printf("counter after cuGraphUpload: %u\n", afterUpload);
    verdict.check("the upload ran nothing", afterUpload == 0);

    // Step 4: the launcher graph's only kernel calls cudaGraphLaunch(deviceExec,
    // cudaStreamGraphFireAndForget). A kernel passes the CUgraphExec as an ordinary argument. The
    // Guide (section 4.2.6) refuses a device launch of a graph still running (cudaErrorInvalidValue)
    // and allows 120 fire-and-forget launches per run: one per launcher run, one run after another.
    course::printStep(4, "a kernel launches the graph: three launches of the launcher graph");
    CUgraph launcher = nullptr;
    CHECK_DRIVER(cuGraphCreate(&launcher, 0));
    void* launchParams[] = {&deviceExec, &status};
    lesson23::addNode(launcher, {}, lesson23::kernelNode(launchFromDevice, 1, 1, launchParams));
    CUgraphExec launcherExec = nullptr;
    CHECK_DRIVER(course::graphInstantiate(&launcherExec, launcher, 0));
    for (int i = 0; i < 3; ++i) CHECK_DRIVER(cuGraphLaunch(launcherExec, stream));
    // cuda.h does not say when a device-side launch completes. The CUDA C++ Programming Guide
    // (section "Graph Execution Environments") counts a graph complete only "when all generated
    // child work is complete": on that word, the synchronize covers the device graph's runs too.
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const unsigned int afterDevice = counterValue(counter);
    const int deviceStatus = lesson23::copyBack<int>(status, 1)[0];
    std::printf("device-side cudaGraphLaunch, first error code: %d (0: none)\n", deviceStatus);
    std::printf("counter after 3 launches of the launcher graph: %u\n", afterDevice);
    verdict.check("each launcher launch ran the device graph once", deviceStatus == 0 && afterDevice == 3);

    // Step 5: cuda.h: the handle "can be used to launch the graph from both the host and device".
    course::printStep(5, "the same exec, launched from the host");
    CHECK_DRIVER(cuGraphLaunch(deviceExec, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const unsigned int afterHost = counterValue(counter);
    std::printf("counter after one cuGraphLaunch from the host: %u\n", afterHost);
    verdict.check("the device-launchable exec also ran from the host", afterHost == 4);

    course::printStep(6, "release everything, newest first");
    CHECK_DRIVER(cuGraphExecDestroy(launcherExec));
    CHECK_DRIVER(cuGraphDestroy(launcher));
    CHECK_DRIVER(cuGraphExecDestroy(deviceExec));
    CHECK_DRIVER(cuGraphDestroy(onDevice));
    CHECK_DRIVER(cuGraphDestroy(withHost));
    CHECK_DRIVER(cuMemFree(status));
    CHECK_DRIVER(cuMemFree(counter));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(launcherModule));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: graph execs, graphs, buffers, stream, modules, primary context\n");

    course::printStep(7, "check");
    return verdict.finish();
#else
    return course::kExitNotApplicable;  // not reached: usableHere said why and returned false
#endif
}
