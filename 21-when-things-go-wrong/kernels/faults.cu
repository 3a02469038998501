// Device code of lesson 21: two healthy kernels and the kernels that fail on purpose, one for
// each kind of failure the lesson shows. The Makefile builds it to build/21-when-things-go-wrong/
// kernels/faults.{ptx,cubin,fatbin}; the programs load the fatbin. extern "C" keeps the names
// unmangled for cuModuleGetFunction. nvcc does not define NDEBUG unless asked to, so assert() is
// compiled in.
#include <cassert>
#include <cstdio>

// Word i becomes seed ^ (i * 2654435761): a pattern that memory left over from other work does not
// hold by chance. Grid-stride loop: any grid covers any count.
extern "C" __global__ void fillPattern(unsigned int* words, unsigned long long count, unsigned int seed) {
    const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
    for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += stride)
        words[i] = seed ^ static_cast<unsigned int>(i * 2654435761ull);
}

// Adds 1 to every word: work after a restore, on memory from before it.
extern "C" __global__ void addOne(unsigned int* words, unsigned long long count) {
    const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
    for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
         i += stride)
        words[i] += 1u;
}

// One store to words[index]. The host passes an index far past the allocation, 1 TiB away; on
// NVIDIA H100 80GB HBM3 nothing was mapped there, and the store ended the kernel with
// CUDA_ERROR_ILLEGAL_ADDRESS (observed, not promised: no header says what lies at an address no
// allocation returned). A store just past the end can land in memory that the same page still
// maps: then nothing may be reported, and compute-sanitizer is the tool that finds it.
extern "C" __global__ void storeAt(unsigned int* words, long long index, unsigned int value) {
    words[index] = value;
}

// storeAt's store, once the host has written a non-zero value to *flag: host memory mapped into
// the device, read again each time round (volatile). So the host decides when the kernel faults,
// and what it does meanwhile is not a race. After `timeoutNs` (read from %globaltimer) the kernel
// stops waiting, so that a host that never sets the flag cannot keep it running for ever.
extern "C" __global__ void storeAtWhenFlagged(const volatile int* flag, unsigned int* words, long long index,
                                              unsigned long long timeoutNs) {
    unsigned long long start = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    unsigned long long now = start;
    while (*flag == 0 && now - start < timeoutNs) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    words[index] = 1u;
}

// Prints each value, then asserts that it is positive. Launched as one thread, so the lines come
// in order. A failed assert prints its message and stops the kernel: CUDA_ERROR_ASSERT.
extern "C" __global__ void assertPositive(const int* values, int count) {
    for (int i = 0; i < count; ++i) {
        printf("device printf: values[%d] = %d\n", i, values[i]);
        assert(values[i] > 0);
    }
}

// Prints one line, then executes the trap instruction, which stops the kernel with an error.
extern "C" __global__ void trapAfterPrinting() {
    printf("device printf: calling __trap()\n");
    __trap();
}
