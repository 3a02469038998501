// Lesson 25, program 1 — cuMemcpyBatchAsync: a KV-cache-style gather of 1,536 scattered blocks in
// one call, and what its attributes change.
//
// An inference server keeps each request's attention keys and values in fixed-size blocks scattered
// through one big pool, and gathers a request's blocks before a kernel that wants them contiguous.
// One cuMemcpyAsync per block is one driver call per block. cuMemcpyBatchAsync (CUDA 12.8) takes the
// whole list in one call: destinations, sources, sizes, and a few sets of attributes, each applying
// to a run of the copies. The batch as a whole is in stream order; the copies in it "are not
// guaranteed to execute in any specific order" (cuda.h:11111).
//
//   batched_gather               the walkthrough
//   batched_gather --device N    another GPU
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "batch_compat.h"
#include "copy_helpers.h"

namespace {

constexpr size_t kBlocks = 4096;      // blocks in the pool (the "KV cache")
constexpr size_t kBlockBytes = 2048;  // one block
constexpr size_t kPieces = 1536;      // blocks one request gathers
constexpr size_t kGuardBytes = 4096;  // after the gathered bytes: must keep the fill
constexpr size_t kGatheredBytes = kPieces * kBlockBytes;

#if CUDA_VERSION >= 12080  // everything below serves the batched copies
// Step 4's checks, printed as SKIP lines where the step cannot run.
const char* const kManaged = "the managed pieces the CPU wrote arrive intact, in reverse order";
const char* const kManagedGuard = "nothing was copied past the managed pieces";

// The block table: piece i is block blockOf(i). 1543 is odd, so i -> (1543 i + 211) mod 4096
// never repeats a block: 1,536 distinct blocks from all over the pool, in no order.
size_t blockOf(size_t piece) {
    return (piece * 1543 + 211) % kBlocks;
}

CUmemcpyAttributes attributes(CUmemcpySrcAccessOrder order, CUmemLocation source, CUmemLocation destination,
                              unsigned int flags) {
    CUmemcpyAttributes attrs{};
    attrs.srcAccessOrder = order;
    attrs.srcLocHint = source;
    attrs.dstLocHint = destination;
    attrs.flags = flags;
    return attrs;
}

// Step 4: a managed source. Location hints apply only to managed memory (where
// CONCURRENT_MANAGED_ACCESS is 1) and to pageable memory (where PAGEABLE_MEMORY_ACCESS is 1);
// for every other pointer cuda.h says they are ignored (cuda.h:11144-11148): here srcLocHint
// describes the managed source, and dstLocHint, on cuMemAlloc memory, is ignored (cuda.h:4577).
// What a hint changes, if anything, is not visible in the bytes: the step checks the gather, not
// the hints. 64 pieces of 1 KiB the CPU just wrote, gathered in reverse order, with a tail guard
// after them (copy_helpers.h).
void gatherFromManagedMemory(course::Verdict& verdict, int ordinal, CUstream stream) {
    constexpr size_t kCount = 64;
    constexpr size_t kBytes = 1024;
    const std::vector<unsigned char> data = lesson25::pattern(kCount * kBytes, 4);
    const std::vector<unsigned char> guard = lesson25::tailGuard(4);
    CUdeviceptr managed = 0;
    CHECK_DRIVER(cuMemAllocManaged(&managed, kCount * kBytes, CU_MEM_ATTACH_GLOBAL));
    std::memcpy(reinterpret_cast<void*>(managed), data.data(), data.size());  // the CPU writes it
    CUdeviceptr landing = 0;
    CHECK_DRIVER(cuMemAlloc(&landing, kCount * kBytes + lesson25::kTailGuard));
    lesson25::fillThenTailGuard(landing, kCount * kBytes, guard, stream);
    std::vector<CUdeviceptr> dsts(kCount);
    std::vector<CUdeviceptr> srcs(kCount);
    std::vector<size_t> sizes(kCount, kBytes);
    for (size_t j = 0; j < kCount; ++j) {
        dsts[j] = landing + j * kBytes;
        srcs[j] = managed + (kCount - 1 - j) * kBytes;
    }
    // The hints say where the program expects each side: the CPU just wrote the source.
    CUmemcpyAttributes attrs = attributes(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, lesson25::hostLocation(),
                                          lesson25::deviceLocation(ordinal), CU_MEMCPY_FLAG_DEFAULT);
    size_t firstCopy = 0;
    CHECK_DRIVER(
        lesson25::memcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), kCount, &attrs, &firstCopy, 1, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const std::vector<unsigned char> landed = lesson25::download(landing, kCount * kBytes + lesson25::kTailGuard);
    size_t intact = 0;
    for (size_t j = 0; j < kCount; ++j)
        intact += std::memcmp(&landed[j * kBytes], &data[(kCount - 1 - j) * kBytes], kBytes) == 0 ? 1 : 0;
    const size_t guardKept = lesson25::tailGuardKept(&landed[kCount * kBytes], guard);
    std::printf("managed pieces gathered with location hints, intact: %zu of %zu\n", intact, kCount);
    std::printf("tail guard bytes after the managed pieces intact: %zu of %zu\n", guardKept, guard.size());
    verdict.check(kManaged, intact == kCount);
    verdict.check(kManagedGuard, guardKept == guard.size());
    CHECK_DRIVER(cuMemFree(landing));
    CHECK_DRIVER(cuMemFree(managed));
}

// Step 5: CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL: "all accesses must be complete before the API
// call returns" (cuda.h:4548-4557, 11133-11135). The stream is kept busy by a 100 ms kernel, so a
// copy in stream order could not start before the host overwrites its source right after the call.
// "The batch as a whole executes in stream order" (cuda.h:11111) all the same: the kernel marks the
// header when it ends, and the batch, queued after it, writes over the mark. A batch that did not
// wait for the kernel would land first and be marked over. Whether the call itself returns before
// the kernel ends, cuda.h does not say: the stream's state then is printed, not checked. Returns
// whether the device ended with the values the source held during the call.
bool copyDuringTheCall(CUfunction spinThenMark, int ordinal, CUstream stream) {
    constexpr size_t kWords = 64;  // a request header: 64 sequence lengths
    void* stagingMemory = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&stagingMemory, kWords * sizeof(std::uint32_t)));
    auto* staging = static_cast<std::uint32_t*>(stagingMemory);
    for (size_t i = 0; i < kWords; ++i) staging[i] = static_cast<std::uint32_t>(1000 + i);
    CUdeviceptr header = 0;
    CHECK_DRIVER(cuMemAlloc(&header, kWords * sizeof(std::uint32_t)));
    CHECK_DRIVER(cuMemsetD8Async(header, lesson25::kFill, kWords * sizeof(std::uint32_t), stream));
    unsigned long long nanoseconds = 100000000ULL;
    int count = static_cast<int>(kWords);
    unsigned int mark = 0x5A5A5A5Au;  // neither the fill, nor a header value, nor the overwrite
    void* params[] = {&nanoseconds, &header, &count, &mark};
    CHECK_DRIVER(cuLaunchKernel(spinThenMark, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
    CUdeviceptr dst = header;
    CUdeviceptr src = reinterpret_cast<CUdeviceptr>(staging);
    size_t size = kWords * sizeof(std::uint32_t);
    CUmemcpyAttributes attrs = attributes(CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL, lesson25::hostLocation(),
                                          lesson25::deviceLocation(ordinal), CU_MEMCPY_FLAG_DEFAULT);
    size_t firstCopy = 0;
    CHECK_DRIVER(lesson25::memcpyBatchAsync(&dst, &src, &size, 1, &attrs, &firstCopy, 1, stream));
    const CUresult whenReturned = cuStreamQuery(stream);           // shown: cuda.h does not say
    for (size_t i = 0; i < kWords; ++i) staging[i] = 0xFFFFFFFFu;  // the host reuses its buffer at once
    CHECK_DRIVER(cuStreamSynchronize(stream));
    std::vector<std::uint32_t> received(kWords);
    CHECK_DRIVER(cuMemcpyDtoH(received.data(), header, size));
    size_t original = 0;
    size_t marked = 0;
    for (size_t i = 0; i < kWords; ++i) {
        original += received[i] == 1000 + i ? 1 : 0;
        marked += received[i] == mark ? 1 : 0;
    }
    std::printf("stream when the call returned: %s\n", course::driverErrorName(whenReturned));
    std::printf("header words on the device as they were during the call: %zu of %zu\n", original, kWords);
    std::printf("header words still the kernel's mark: %zu of %zu\n", marked, kWords);
    CHECK_DRIVER(cuMemFree(header));
    CHECK_DRIVER(cuMemFreeHost(stagingMemory));
    return original == kWords;
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
#if CUDA_VERSION < 12080
    return lesson25::skipBatchedCopies(lesson25::batchUnavailableReason(CUDA_VERSION));
#else
    const int ordinal = args.deviceOrdinal();

    // Step 1: the device, and whether this build and this driver have the batched copies.
    course::printStep(1, "initialise, check that the driver has cuMemcpyBatchAsync");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    course::printDeviceName(ordinal, device);
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("built with CUDA headers: %s\n", course::formatCudaVersion(CUDA_VERSION).c_str());
    std::printf("driver supports CUDA: %s\n", course::formatCudaVersion(driverVersion).c_str());
    // The versions first, then the two entry points, through cuGetProcAddress (batch_compat.h).
    const std::string unavailable = lesson25::batchCallsUnavailable(driverVersion);
    if (!unavailable.empty()) return lesson25::skipBatchedCopies(unavailable);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUstream stream = nullptr;  // a stream of our own: the batch "must not be legacy NULL stream"
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    // Step 2: the pool and where the request's blocks are.
    course::printStep(2, "a pool of 4096 blocks and a block table of 1536 of them");
    const std::vector<unsigned char> poolHost = lesson25::pattern(kBlocks * kBlockBytes, 1);
    CUdeviceptr pool = 0;
    CUdeviceptr gathered = 0;
    CHECK_DRIVER(cuMemAlloc(&pool, kBlocks * kBlockBytes));
    CHECK_DRIVER(cuMemAlloc(&gathered, kGatheredBytes + kGuardBytes));
    // On the stream: a plain cuMemcpyHtoD is in the legacy stream, which a NON_BLOCKING stream
    // does not wait for.
    CHECK_DRIVER(cuMemcpyHtoDAsync(pool, poolHost.data(), poolHost.size(), stream));
    std::vector<CUdeviceptr> dsts(kPieces);
    std::vector<CUdeviceptr> srcs(kPieces);
    std::vector<size_t> sizes(kPieces, kBlockBytes);
    for (size_t i = 0; i < kPieces; ++i) {
        dsts[i] = gathered + i * kBlockBytes;
        srcs[i] = pool + blockOf(i) * kBlockBytes;
    }
    std::printf("pool: %zu blocks of %zu bytes; pieces to gather: %zu\n", kBlocks, kBlockBytes, kPieces);
    std::printf("first pieces come from blocks: %zu %zu %zu %zu\n", blockOf(0), blockOf(1), blockOf(2), blockOf(3));

    // Step 3: one call for the whole gather. Two sets of attributes: attrs[k] applies from copy
    // attrsIdxs[k] up to the next index (cuda.h:11121-11127). The location hints are ignored for
    // cuMemAlloc memory (cuda.h:4576-4577); PREFER_OVERLAP_WITH_COMPUTE is a hint that "can be ignored".
    course::printStep(3, "cuMemcpyBatchAsync: 1536 copies, two sets of attributes");
    course::Verdict verdict;
    CUmemcpyAttributes attrs[2] = {
        attributes(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, lesson25::deviceLocation(ordinal),
                   lesson25::deviceLocation(ordinal), CU_MEMCPY_FLAG_DEFAULT),
        attributes(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, lesson25::deviceLocation(ordinal),
                   lesson25::deviceLocation(ordinal), CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE)};
    size_t attrsIdxs[2] = {0, kPieces / 2};
    CHECK_DRIVER(cuMemsetD8Async(gathered, lesson25::kFill, kGatheredBytes + kGuardBytes, stream));
    CHECK_DRIVER(
        lesson25::memcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), kPieces, attrs, attrsIdxs, 2, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const std::vector<unsigned char> result = lesson25::download(gathered, kGatheredBytes + kGuardBytes);
    size_t intact = 0;
    for (size_t i = 0; i < kPieces; ++i)
        intact += std::memcmp(&result[i * kBlockBytes], &poolHost[blockOf(i) * kBlockBytes], kBlockBytes) == 0 ? 1 : 0;
    const size_t guardChanged = lesson25::notFill(&result[kGatheredBytes], kGuardBytes);
    std::printf("pieces equal to their block, byte for byte: %zu of %zu\n", intact, kPieces);
    std::printf("guard bytes after the last piece still 0xa5: %zu of %zu\n", kGuardBytes - guardChanged, kGuardBytes);
    verdict.check("every gathered piece equals its block", intact == kPieces);
    verdict.check("the bytes after the gathered pieces keep the fill", guardChanged == 0);

    // Step 4: location hints, where they apply.
    course::printStep(4, "location hints: a managed source");
    int concurrentManaged = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&concurrentManaged, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, device));
    std::printf("CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: %d\n", concurrentManaged);
    if (concurrentManaged == 0) {
        const char* const kWhy = "CONCURRENT_MANAGED_ACCESS is 0: the hints apply only where it is 1";
        std::printf("managed pieces gathered with location hints, intact: not run\n");
        std::printf("tail guard bytes after the managed pieces intact: not run\n");
        lesson25::skipCheck(kManaged, kWhy);
        lesson25::skipCheck(kManagedGuard, kWhy);
    } else {
        gatherFromManagedMemory(verdict, ordinal, stream);
    }

    // Step 5: a source that may change as soon as the call returns.
    course::printStep(5, "CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL behind a busy stream");
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("copy_kernels.fatbin").c_str()));
    CUfunction spinThenMark = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&spinThenMark, module, "spinThenMark"));
    verdict.check("a DURING_API_CALL source can be reused when the call returns, the batch still in stream order",
                  copyDuringTheCall(spinThenMark, ordinal, stream));

    // Step 6: what the driver refuses. "Each memcpy operation in the batch must have a valid
    // CUmemcpyAttributes ... otherwise the API will return CUDA_ERROR_INVALID_VALUE"
    // (cuda.h:11140-11142). A zero-initialised CUmemcpyAttributes is exactly that: INVALID is 0.
    // Every copy of this batch is invalid; cuda.h does not say what happens to the valid copies of
    // a batch in which only some are.
    course::printStep(6, "refusals: an invalid srcAccessOrder, the legacy NULL stream");
    CUmemcpyAttributes invalid = attrs[0];
    invalid.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
    size_t firstCopy = 0;
    const CUresult refused = REPORT_DRIVER(
        lesson25::memcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), 16, &invalid, &firstCopy, 1, stream));
    std::printf("srcAccessOrder CU_MEMCPY_SRC_ACCESS_ORDER_INVALID: %s\n", course::driverErrorName(refused));
    verdict.check("an invalid srcAccessOrder is refused with CUDA_ERROR_INVALID_VALUE",
                  refused == CUDA_ERROR_INVALID_VALUE);
    // cuda.h: the stream "Must not be legacy NULL stream" (cuda.h:11165), without an error code:
    // what this driver answers is shown, not checked.
    const CUresult onNull = REPORT_DRIVER(
        lesson25::memcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), 16, attrs, &firstCopy, 1, nullptr));
    std::printf("batch on the legacy NULL stream: %s\n", course::driverErrorName(onNull));
    CHECK_DRIVER(cuCtxSynchronize());  // in case a driver accepted it: done before the memory goes

    // Step 7: release, newest first.
    course::printStep(7, "release everything, newest first");
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuMemFree(gathered));
    CHECK_DRIVER(cuMemFree(pool));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: module, buffers, stream, primary context\n");

    course::printStep(8, "check");
    return verdict.finish();
#endif
}
