// Lesson 27, program 3 — device memory exported as a Linux dma-buf, and what that descriptor is for.
//
// A dma-buf is the Linux kernel's way to share a buffer between device drivers: a file descriptor
// that another driver (a network card's, a video decoder's, another GPU API's) can import and
// then reach the memory directly. cuMemGetHandleForAddressRange turns a range of CUDA device
// memory into such a descriptor. The program asks the kernel what the descriptor is (its size and
// its exporter, from /proc/self/fdinfo), tries to import it back into CUDA (cuda.h: supported
// only on Jetson Thor and later), closes it and checks that no descriptor of it is left. Last,
// cuFlushGPUDirectRDMAWrites, which blocks until RDMA writes of a third-party device into GPU
// memory are visible (cuda.h:5680-5700 also says where it is a no-op, and where it is not enough).
//
//   dma_buf               the walkthrough
//   dma_buf --device N    another GPU
#include <cuda.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "proc_fd.h"

namespace {

constexpr size_t kExportBytes = 4u << 20;  // the range exported: 4 MiB, a multiple of any host page size
// The version the dma-buf part is guarded with. What the headers at hand show: 11.8's cuda.h
// declares cuMemGetHandleForAddressRange and CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (11.8 cuda.h:10074
// and :739; 12.4 cuda.h:11857 and :808), and cudaTypedefs.h (11.8, 12.4 and 13.0) names the call's
// type PFN_cuMemGetHandleForAddressRange_v11070. No header older than 11.8 was at hand: 11.7 is the
// number in that name, not a release the course looked into.
constexpr int kDmaBufVersion = 11070;
constexpr const char* kDmaBufWhy =
    "the course uses cuMemGetHandleForAddressRange from 11.7 on (cudaTypedefs.h: "
    "PFN_cuMemGetHandleForAddressRange_v11070)";

// What the program writes into the range: a multiplicative hash, different in every word.
uint32_t pattern(size_t i) {
    return 2246822519u * static_cast<uint32_t>(i + 1);
}

#if CUDA_VERSION >= 11070
// The check of step 5. It can run only where the import back is supported (cuda.h: Tegra Jetson,
// Thor on); elsewhere it prints SKIP with the reason and decides nothing. It has no mutant: no GPU
// the course runs on (H100, H200) can reach it, so a mutant could never be caught there.
constexpr const char* kImportCheck = "the dma-buf imported back reads as the words written";

// A check that cannot run on this machine: its line, with the reason, where it would run.
void skipCheck(const char* name, const std::string& reason) {
    std::printf("check %s: SKIP (%s)\n", name, reason.c_str());
}
#endif

const char* flushOptionsText(int options) {
    switch (options & 3) {
        case 0: return "none";
        case CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST: return "HOST";
        case CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_MEMOPS: return "MEMOPS";
        default: return "HOST | MEMOPS";
    }
}

// Step 6. cuFlushGPUDirectRDMAWrites "Blocks until GPUDirect RDMA writes to the target context
// via mappings created through APIs like nvidia_p2p_get_pages ... are visible to the specified
// scope" (cuda.h:5682-5685), and is a no-op where the scope lies within the device's ordering
// attribute (cuda.h:5687-5691). Not a remedy everywhere: where the platform has more than one
// hardware path for RDMA writes (cuda.h points at CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE,
// a flag of dma-buf exports), the driver reports ALL_DEVICES, the call is a no-op, and "when
// these multiple paths are used simultaneously, it is the user's responsibility to ensure
// ordering by using mechanisms outside the scope of CUDA" (cuda.h:5693-5700). Nothing here
// writes through RDMA, so the call shows its use and its answer only.
void flushRdmaWrites(int flushOptions, int ordering) {
    if ((flushOptions & CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST) != 0) {
        const CUresult flushed = cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                                            CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER);
        std::printf("cuFlushGPUDirectRDMAWrites(CURRENT_CTX, TO_OWNER): %s\n", course::driverErrorName(flushed));
        CHECK_DRIVER(flushed);
        // cuda.h compares the numbers: a scope that is at most the device's ordering makes it a no-op.
        std::printf("a no-op here (writes ordering %d >= scope %d): %s\n", ordering,
                    static_cast<int>(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER),
                    ordering >= static_cast<int>(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER) ? "yes" : "no");
    } else {
        std::printf(
            "section cuFlushGPUDirectRDMAWrites: SKIP (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_"
            "OPTIONS has no HOST bit on this device)\n");
    }
}

#if CUDA_VERSION >= 13000
// Step 5: the dma-buf imported back into CUDA. cuda.h (cuda.h:16324-16331): the descriptor must
// reference a dma_buf, the flags must be zero, and "Importing a dma_buf object is supported only
// on Tegra Jetson platform starting with Thor series". The program tries anyway. cuda.h names no
// error code for an import that is not supported (the call's list, cuda.h:16350-16355, has none for
// it), and nothing in cuda.h tells a Thor from another GPU: so any refusal makes the check print
// SKIP, with the code the call returned and cuda.h's reason. Ownership: cuda.h transfers an
// OPAQUE_FD descriptor to the driver on a successful import (cuda.h:16242-16244) and states no such
// transfer for a DMABUF_FD one, so `fd` stays the program's whatever the answer: main closes it.
void importBack(int fd, const std::vector<uint32_t>& expected, course::Verdict& verdict) {
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC desc{};
    desc.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD;
    desc.handle.fd = fd;
    desc.size = kExportBytes;
    desc.flags = 0;
    CUexternalMemory external = nullptr;
    const CUresult imported = cuImportExternalMemory(&external, &desc);
    std::printf("cuImportExternalMemory(CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD): %s\n",
                course::driverErrorName(imported));
    if (imported != CUDA_SUCCESS) {
        skipCheck(kImportCheck, std::string(course::driverErrorName(imported)) +
                                    "; cuda.h: importing a dma_buf is supported only on Tegra Jetson platforms, "
                                    "from the Thor series on");
        return;
    }
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC bufferDesc{};
    bufferDesc.size = kExportBytes;
    CUdeviceptr second = 0;
    CHECK_DRIVER(cuExternalMemoryGetMappedBuffer(&second, external, &bufferDesc));
    std::vector<uint32_t> read(expected.size());
    CHECK_DRIVER(cuMemcpyDtoH(read.data(), second, kExportBytes));
    size_t same = 0;
    for (size_t i = 0; i < read.size(); ++i) same += read[i] == expected[i] ? 1 : 0;
    std::printf("words read through the second mapping as written through the first: %zu of %zu\n", same, read.size());
    verdict.check(kImportCheck, same == read.size());
    CHECK_DRIVER(cuMemFree(second));
    CHECK_DRIVER(cuDestroyExternalMemory(external));
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "the device: dma-buf and GPUDirect RDMA attributes");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    int rdma = 0;
    int flushOptions = 0;
    int ordering = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&flushOptions, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&ordering, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, device));
    std::printf("device %d name: %s\n", ordinal, name);
    std::printf("CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: %d\n", rdma);
    std::printf("CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS: %s\n", flushOptionsText(flushOptions));
    std::printf("CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING: %d\n", ordering);
    // Why the dma-buf part cannot run here, if it cannot; the flush part below runs anyway.
    std::string skip;
    if (CUDA_VERSION < kDmaBufVersion)
        skip = "built with CUDA " + course::formatCudaVersion(CUDA_VERSION) + " headers; " + kDmaBufWhy;
    else if (driverVersion < kDmaBufVersion)
        skip = "the driver supports CUDA " + course::formatCudaVersion(driverVersion) + "; " + kDmaBufWhy;
#if CUDA_VERSION >= 11070
    if (skip.empty()) {
        int dmaBuf = 0;
        CHECK_DRIVER(cuDeviceGetAttribute(&dmaBuf, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, device));
        std::printf("CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: %d\n", dmaBuf);
        if (dmaBuf == 0) skip = "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0 on this device";
    }
#endif
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    course::Verdict verdict;

    // Step 2: cuda.h:12570 asks for a range whose start and size are aligned to the host page
    // size; cuMemAlloc promises memory "suitably aligned for any kind of variable" (cuda.h:8581),
    // no more. So the program looks: an allocation that starts on a page boundary is exported
    // whole; otherwise it allocates one page more and exports the page-aligned window inside.
    course::printStep(2, "device memory, and a page-aligned range of it");
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    CUdeviceptr allocation = 0;
    CHECK_DRIVER(cuMemAlloc(&allocation, kExportBytes));
    const bool pageAligned = allocation % page == 0;
    if (!pageAligned) {
        CHECK_DRIVER(cuMemFree(allocation));
        CHECK_DRIVER(cuMemAlloc(&allocation, kExportBytes + page));
    }
    const CUdeviceptr start = (allocation + page - 1) / page * page;
    std::vector<uint32_t> words(kExportBytes / sizeof(uint32_t));
    for (size_t i = 0; i < words.size(); ++i) words[i] = pattern(i);
    CHECK_DRIVER(cuMemcpyHtoD(start, words.data(), kExportBytes));
    std::printf("host page size: %zu bytes\n", page);
    std::printf("cuMemAlloc's address on a page boundary: %s\n",
                pageAligned ? "yes (the whole allocation is exported)"
                            : "no (the page-aligned window of an allocation one page larger is exported)");
    std::printf("range to export: %zu bytes\n", kExportBytes);

#if CUDA_VERSION >= 11070
    if (skip.empty()) {
        // Step 3: `handle` points to an int where the call stores the descriptor (cuda.h:12572).
        // Nothing in cuda.h takes it back: the program closes it when done with it.
        course::printStep(3, "cuMemGetHandleForAddressRange: the range as a dma-buf file descriptor");
        int fd = -1;
        CHECK_DRIVER(cuMemGetHandleForAddressRange(&fd, start, kExportBytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
        std::printf("dma-buf descriptor: open\n");

        // Step 4: the Linux kernel's view. A dma-buf's fdinfo lists its size and the name of the
        // driver that exported it (exp_name); fstat gives the size too. Where fdinfo lists no size
        // (an older kernel), fstat's is the answer.
        course::printStep(4, "what the Linux kernel says about the descriptor");
        const std::string listed = lesson27::fdinfoValue(fd, "size");
        const std::string exporter = lesson27::fdinfoValue(fd, "exp_name");
        struct stat status {};
        const long long statSize = fstat(fd, &status) == 0 ? static_cast<long long>(status.st_size) : -1;
        unsigned long long size = static_cast<unsigned long long>(statSize);
        const bool readable = listed.empty() || lesson27::parseBytes(listed, size);
        const std::string target = lesson27::fdTarget(fd);
        std::printf("/proc/self/fd link: %s\n", target.c_str());
        std::printf("exporter (fdinfo exp_name): %s\n", exporter.empty() ? "(not listed)" : exporter.c_str());
        std::printf("size (fdinfo): %s bytes\n", listed.empty() ? "(not listed)" : listed.c_str());
        if (!readable) std::printf("size (fdinfo) is not a whole number of bytes: '%s'\n", listed.c_str());
        std::printf("size (fstat): %lld bytes\n", statSize);
        [[maybe_unused]] const bool sized =  // used by step 5 with 13.0 headers
            verdict.check("the kernel's dma-buf is as large as the exported range", readable && size == kExportBytes);

        course::printStep(5, "import the dma-buf back into CUDA, then close the descriptor");
#if CUDA_VERSION >= 13000
        // The import asks for the 4 MiB range: tried only where the dma-buf is that size (else step 4 failed).
        if (sized)
            importBack(fd, words, verdict);
        else
            skipCheck(kImportCheck, "the dma-buf is not the exported range's size");
#else
        // 13.0's cuda.h has CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD (cuda.h:3752); 12.4's and 11.8's do not.
        skipCheck(kImportCheck, "built with CUDA " + course::formatCudaVersion(CUDA_VERSION) +
                                    " headers; the course imports a dma-buf only with 13.0 headers on (13.0's "
                                    "cuda.h has CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD; 12.4's and 11.8's do not)");
#endif
        // The memory stays CUDA's; only the descriptor goes, the program's still (importBack says why),
        // once step 5's import, if any, is destroyed.
        if (close(fd) != 0) std::printf("close of the dma-buf descriptor failed: %s\n", std::strerror(errno));
        // The kernel keeps a dma-buf while any descriptor of it is open: the process lists its own.
        const int left = lesson27::descriptorsOn(status, target);
        std::printf("descriptors of this process still on the dma-buf: %d%s\n", left,
                    left < 0 ? " (/proc/self/fd unreadable)" : "");
        verdict.check("the program closed its dma-buf descriptors", left == 0);
    }
#endif
    if (!skip.empty()) std::printf("section dma-buf: SKIP (%s)\n", skip.c_str());

    course::printStep(6, "cuFlushGPUDirectRDMAWrites, where the device supports it");
    flushRdmaWrites(flushOptions, ordering);

    course::printStep(7, "release");
    CHECK_DRIVER(cuMemFree(allocation));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: device memory, primary context\n");

    course::printStep(8, "check");
    if (!skip.empty()) {
        std::printf("Result = SKIP (%s)\n", skip.c_str());
        return course::kExitNotApplicable;
    }
    return verdict.finish();
}
