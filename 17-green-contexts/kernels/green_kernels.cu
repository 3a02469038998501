// Device code of lesson 17. The Makefile builds it to build/17-green-contexts/kernels/
// green_kernels.{ptx,cubin,fatbin}; the programs load the fatbin with cuLibraryLoadFromFile,
// so one CUkernel serves the primary context and every green context.
// extern "C" keeps the name unmangled for cuLibraryGetKernel.

// Every block holds its SM for `nanoseconds` of wall-clock time, read from %globaltimer
// (nanoseconds, the same on every SM and independent of the SM clock, which boosts and
// throttles). Spinning uses no memory, so two of these kernels compete only for SMs.
// When `smOfBlock` is not null, thread 0 of each block writes the SM it ran on (%smid).
extern "C" __global__ void spin(unsigned long long nanoseconds, unsigned int* smOfBlock) {
    unsigned long long start = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    unsigned long long now = start;
    while (now - start < nanoseconds) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (smOfBlock != nullptr && threadIdx.x == 0) {
        unsigned int sm = 0;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        smOfBlock[blockIdx.x] = sm;
    }
}
