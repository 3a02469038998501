// Device code of lesson 24. The Makefile builds it to build/24-streams-and-events/kernels/
// stream_kernels.{ptx,cubin,fatbin}; the programs load the fatbin (with cuModuleLoad, or with
// cuLibraryLoadFromFile where green contexts need one kernel for several contexts).
// extern "C" keeps the names unmangled for cuModuleGetFunction and cuLibraryGetKernel.
//
// Every wait in these kernels has a bound, counted in %globaltimer (a PTX special register,
// cccl's get_sreg.h; the PTX ISA manual, not a header, calls it a nanosecond timer; each thread
// only subtracts readings it took itself), so a broken program ends with a wrong value, not a hang.

__device__ __forceinline__ unsigned long long nowNs() {
    unsigned long long t = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// A store the host and other streams can see: fenced at system scope before and after.
__device__ __forceinline__ void publish(unsigned int* word, unsigned int value) {
    __threadfence_system();
    *reinterpret_cast<volatile unsigned int*>(word) = value;
    __threadfence_system();
}

// Every thread of every block spins `nanoseconds` of wall-clock time, so each block holds its
// SM slot that long. Thread 0 of block 0 first stores `value` at `started` (when not null: the
// host learns that the kernel is running), and at the end stores `value` at `done` (when not
// null: whoever reads it learns that the kernel has finished).
extern "C" __global__ void spin(unsigned long long nanoseconds, unsigned int* started, unsigned int* done,
                                unsigned int value) {
    const bool first = blockIdx.x == 0 && threadIdx.x == 0;
    if (first && started != nullptr) publish(started, value);
    const unsigned long long start = nowNs();
    while (nowNs() - start < nanoseconds) {
    }
    __syncthreads();
    if (first && done != nullptr) publish(done, value);
}

// *dst = *src, read once, as late as the kernel runs: what `src` held when this kernel ran
// tells which writes came before it.
extern "C" __global__ void load_word(const unsigned int* src, unsigned int* dst) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const unsigned int value = *reinterpret_cast<const volatile unsigned int*>(src);
    publish(dst, value);
}

// One thread: stores `tag` at `started`, then spins until the host stores `tag` at `gate`, at
// most `timeoutNs`; then stores `tag` at `done`, or 0 when the gate never opened.
extern "C" __global__ void gate(const unsigned int* gateWord, unsigned int tag, unsigned long long timeoutNs,
                                unsigned int* started, unsigned int* done) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    publish(started, tag);
    const unsigned long long start = nowNs();
    bool opened = false;
    while (!opened && nowNs() - start < timeoutNs)
        opened = *reinterpret_cast<const volatile unsigned int*>(gateWord) == tag;
    publish(done, opened ? tag : 0u);
}

// Every block spins `nanoseconds` (long enough for the scheduler to spread the blocks over every
// SM the kernel may use), then thread 0 writes the SM it ran on (%smid, a PTX special register:
// where the thread was when it read it) to smOfBlock[blockIdx.x].
extern "C" __global__ void sm_of_block(unsigned long long nanoseconds, unsigned int* smOfBlock) {
    const unsigned long long start = nowNs();
    while (nowNs() - start < nanoseconds) {
    }
    if (threadIdx.x != 0) return;
    unsigned int sm = 0;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    publish(&smOfBlock[blockIdx.x], sm);
}
