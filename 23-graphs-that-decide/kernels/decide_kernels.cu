// Device code of lesson 23. The Makefile builds it to build/23-graphs-that-decide/kernels/
// decide_kernels.{ptx,cubin,fatbin}; the programs load the fatbin (SASS for every listed SM plus
// PTX), so the driver picks the code for the GPU it runs on. extern "C" keeps the names unmangled
// for cuModuleGetFunction.
//
// cudaGraphSetConditional, which sets a conditional node's value from a kernel, is a device-side
// runtime function declared in cuda_device_runtime_api.h (nvcc includes it in every .cu file).
// The CUDA Programming Guide documents one build for device-runtime code (section 4.18.4.1):
// nvcc -rdc=true ... -lcudadevrt. The Makefile builds this file another way, without -rdc and
// without libcudadevrt: nvcc 13.0 leaves the call as an undefined symbol of the module
// (readelf -s), as it leaves printf's vprintf. No header says how the driver resolves it; that it
// works is an observation, not a rule: on an NVIDIA H200 (driver 580, nvcc 13.0) cuModuleLoad
// loaded the module and the call set the value (the conditionals checks decide it elsewhere).
// It is compiled only with CUDA 12.4 or newer, the version the host programs ask for; an older
// toolkit builds a kernel without the call, which the programs never launch.
// (launcher_kernels.cu, the kernel that launches a graph from the GPU, is a module of its own.)
#if defined(CUDART_VERSION) && CUDART_VERSION >= 12040
#define LESSON23_DEVICE_GRAPH_CALLS 1
#else
#define LESSON23_DEVICE_GRAPH_CALLS 0
#endif

// x = a * x + b, one element per thread (lesson 15's kernel).
extern "C" __global__ void axpb(float* __restrict__ x, float a, float b, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i] + b;
}

// x += s * y, one element per thread.
extern "C" __global__ void add_scaled(float* __restrict__ x, const float* __restrict__ y, float s, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += s * y[i];
}

// %globaltimer. The PTX ISA (section "Special Registers: %globaltimer, %globaltimer_lo,
// %globaltimer_hi") calls it "A predefined, 64-bit global nanosecond timer", and says these
// registers are "intended for use by NVIDIA tools" and that "The behavior is target-specific and
// may change or be removed in future GPUs". produce only needs to be slow; nothing checks how long
// it waited.
__device__ __forceinline__ unsigned long long globalTimer() {
    unsigned long long t = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// A slow producer: one block spins until %globaltimer has advanced by `spinNs` (nanoseconds, by
// the PTX ISA's name for the timer), then writes `value` into all n elements of y. general_nodes
// runs it on another stream ahead of its graph, whose event wait node must hold the graph until it
// is done: without that wait the graph would read y long before the producer writes it.
extern "C" __global__ void produce(float* __restrict__ y, float value, int n, unsigned long long spinNs) {
    if (threadIdx.x == 0) {
        const unsigned long long start = globalTimer();
        while (globalTimer() - start < spinNs) {
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = value;
}

// One thread adds 1 to a counter: the work of the graph that device_launch launches from the GPU.
extern "C" __global__ void bump(unsigned int* counter) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *counter += 1;
}

// ---------------------------------------------------------------------------
// Conditional nodes. A conditional node runs its body graph depending on a value that belongs
// to a handle (CUgraphConditionalHandle, an unsigned long long on the device:
// cudaGraphConditionalHandle). A kernel that runs before the node decides the value with
// cudaGraphSetConditional. cuda_device_runtime_api.h: calls that race with each other are
// undefined behaviour, so exactly one thread calls it.

// IF: one block scans all n elements and says whether any is negative. Only where it found one
// does it set the value, to 1: otherwise the value stays at the 0 that CU_GRAPH_COND_ASSIGN_DEFAULT
// gave it at the start of the launch. *setCalls counts the calls that were made, for the host to
// see that one thread made each: a build without the call counts none.
extern "C" __global__ void decide_any_negative(const float* __restrict__ x, int n, unsigned long long handle,
                                               unsigned int* setCalls) {
    int negative = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) negative |= x[i] < 0.0f;
    negative = __syncthreads_or(negative);  // the block's answer, in every thread
    if (threadIdx.x != 0 || !negative) return;
#if LESSON23_DEVICE_GRAPH_CALLS
    cudaGraphSetConditional(handle, 1u);
    atomicAdd(setCalls, 1u);
#else
    (void)handle;
    (void)setCalls;
#endif
}

// The IF body: clamp negatives to 0, and count the runs of the body in `bodyRuns`.
extern "C" __global__ void clamp_negatives(float* __restrict__ x, int n, unsigned int* bodyRuns) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = fmaxf(x[i], 0.0f);
    if (i == 0) atomicAdd(bodyRuns, 1u);
}

// One sweep of a relaxation: every v[i] moves toward its target t[i] by at most `step`. An
// element that has not reached its target after the sweep sets *notDone. The WHILE body runs
// this sweep, and so does the host-driven loop of the same computation.
extern "C" __global__ void relax_step(int* __restrict__ v, const int* __restrict__ t, int n, int step,
                                      unsigned int* notDone) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int d = v[i] - t[i];
    const int move = d > step ? step : (d < -step ? -step : d);
    const int moved = v[i] - move;
    v[i] = moved;
    if (moved != t[i]) atomicOr(notDone, 1u);
}

// The WHILE body's last node, one thread: count the sweep, decide whether to go round again,
// and clear the flag for the next sweep. state[0] is the sweep's "not done" flag, state[1] the
// number of sweeps so far. `maxSweeps` bounds the loop, so that a bug cannot spin the GPU forever.
extern "C" __global__ void decide_again(unsigned int* state, unsigned int maxSweeps, unsigned long long handle) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const unsigned int sweeps = state[1] + 1;
    state[1] = sweeps;
    const unsigned int again = state[0] != 0u && sweeps < maxSweeps ? 1u : 0u;
    state[0] = 0u;
#if LESSON23_DEVICE_GRAPH_CALLS
    cudaGraphSetConditional(handle, again);
#else
    (void)handle;
    (void)again;
#endif
}
