// Device code of lesson 23's device_launch: the kernel that launches a graph from the GPU. It is a
// module of its own by the lesson's choice, not by a rule: the device graph's kernel (bump) comes
// from decide_kernels, which holds no kernel that launches work from the GPU. cuda.h:20476 says
// only that a device-launch graph's kernel nodes may not use CUDA Dynamic Parallelism; it says
// nothing of modules, nor whether a device-side cudaGraphLaunch counts as such (the CUDA C++
// Programming Guide's section "Device Graph Launch" has device graphs that launch graphs).
//
// cudaGraphLaunch on the device is declared in cuda_device_runtime_api.h (nvcc includes it in
// every .cu file). The Guide's documented build for device-runtime code is nvcc -rdc=true ...
// -lcudadevrt (section 4.18.4.1); like cudaGraphSetConditional it is built here without -rdc, and
// nvcc 13.0 leaves it as an undefined symbol of the module. No header says how the driver
// resolves it; observed, not a rule: on an NVIDIA H200 (driver 580, nvcc 13.0) cuModuleLoad
// loaded the module and the launch ran (device_launch's step 4 check decides it on each GPU). It
// is compiled only with CUDA 12.4 or newer, the version the host programs ask for.
#if defined(CUDART_VERSION) && CUDART_VERSION >= 12040
#define LESSON23_DEVICE_GRAPH_CALLS 1
#else
#define LESSON23_DEVICE_GRAPH_CALLS 0
#endif

// Launches an executable graph (instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH and
// uploaded first, one of the three ways the Guide's section 4.2.6.1.2 names) from the GPU;
// cudaGraphExec_t is the driver's CUgraphExec. cuda_device_runtime_api.h:176 only defines
// cudaStreamGraphFireAndForget; the Guide (section "Fire and Forget Launch") says such a launch
// "is submitted to the GPU immediately, and it runs independently of the launching graph". The
// first error, if any, is kept in *status for the host to print.
extern "C" __global__ void launch_from_device(cudaGraphExec_t graph, int* status) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
#if LESSON23_DEVICE_GRAPH_CALLS
    const cudaError_t launched = cudaGraphLaunch(graph, cudaStreamGraphFireAndForget);
    if (launched != cudaSuccess && *status == 0) *status = static_cast<int>(launched);
#else
    (void)graph;
    (void)status;
#endif
}
