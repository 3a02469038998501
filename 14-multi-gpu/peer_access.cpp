// Lesson 14, program 1 — peer access: one GPU's kernels reading another GPU's memory.
//
// Each GPU has its own context (here, its primary context). Unified addressing gives every
// allocation of every device one address in one address space, but an address is not
// access: a kernel in GPU A's context may touch GPU B's memory only after
// cuCtxEnablePeerAccess, called in A's context for B's. That call opens ONE direction.
// This program asks the driver what the link between the two GPUs supports, enables
// A -> B, reads the driver's own record of it back through two provoked errors (enabled
// once, and only that way), lets a kernel on A read a buffer that lives on B, and checks
// the result on the host. It never lets a kernel of B touch A's memory: cuda.h grants no
// such access, and if the kernel ends in CUDA_ERROR_ILLEGAL_ADDRESS, cuda.h says the
// process must be terminated and relaunched to use CUDA again (README, pitfalls).
//
//   peer_access                         GPUs 0 and 1
//   peer_access --device A --peer B     two other GPUs
#include <cuda.h>

#include <cstdio>
#include <utility>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "two_gpus.h"

namespace {

// Step 2: what the driver says about the link from `source` to `destination` (one direction:
// the answers may differ the other way round).
void printLinkAttributes(CUdevice source, CUdevice destination, int sourceOrdinal, int destinationOrdinal) {
    struct Named {
        CUdevice_P2PAttribute attribute;
        const char* label;
    };
    static constexpr Named kAttributes[] = {
        {CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, "performance rank"},
        {CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, "access supported"},
        {CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, "native atomics supported"},
        {CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED, "CUDA array access supported"},
    };
    for (const Named& named : kAttributes) {
        int value = 0;
        CHECK_DRIVER(cuDeviceGetP2PAttribute(&value, named.attribute, source, destination));
        std::printf("link GPU %d -> GPU %d, %s: %d\n", sourceOrdinal, destinationOrdinal, named.label, value);
    }
    // NATIVE_ATOMIC_SUPPORTED is 1 only if ALL CUDA-valid atomics work over the link. CUDA 13
    // added ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED: 1 if only SOME do (cuDeviceGetP2PAtomicCapabilities
    // says which). So a 0 above is not "no atomics". A driver older than the header may not
    // know the attribute: its answer is then printed instead of a value.
#if CUDA_VERSION >= 13000
    int partial = 0;
    const CUresult asked = REPORT_DRIVER(cuDeviceGetP2PAttribute(
        &partial, CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED, source, destination));
    if (asked == CUDA_SUCCESS)
        std::printf("link GPU %d -> GPU %d, only partial native atomics supported: %d\n", sourceOrdinal,
                    destinationOrdinal, partial);
    else
        std::printf("link GPU %d -> GPU %d, only partial native atomics supported: not known to this driver (%s)\n",
                    sourceOrdinal, destinationOrdinal, course::driverErrorName(asked));
#endif
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    int ordinalA = 0;
    int ordinalB = 1;
    if (!course::parseArguments(argc, argv, {}, {"--device", "--peer"}, "[--device A] [--peer B]", args) ||
        !lesson14::pickOrdinals(args, argv[0], ordinalA, ordinalB))
        return course::kExitUsage;
    constexpr unsigned int kWords = 1u << 20;
    constexpr size_t kBytes = kWords * sizeof(unsigned int);

    course::printStep(1, "find two GPUs");
    CHECK_DRIVER(cuInit(0));
    int deviceCount = 0;
    CHECK_DRIVER(cuDeviceGetCount(&deviceCount));
    if (!lesson14::twoGpusPresent(deviceCount, {"retain the primary context of each GPU",
                                                "ask cuDeviceCanAccessPeer and cuDeviceGetP2PAttribute, both ways",
                                                "enable peer access GPU A -> GPU B, once, in A's context",
                                                "show CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED and, for B -> A, "
                                                "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
                                                "run a kernel on GPU A that reads a buffer on GPU B, check it"}))
        return course::kExitNotApplicable;
    CUdevice deviceA = 0;
    CUdevice deviceB = 0;
    CHECK_DRIVER(cuDeviceGet(&deviceA, ordinalA));
    CHECK_DRIVER(cuDeviceGet(&deviceB, ordinalB));
    for (const auto& [ordinal, device] : {std::pair{ordinalA, deviceA}, std::pair{ordinalB, deviceB}}) {
        char name[256] = {};
        int unified = 0;
        int major = 0;
        int minor = 0;
        CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
        CHECK_DRIVER(cuDeviceGetAttribute(&unified, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, device));
        CHECK_DRIVER(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
        CHECK_DRIVER(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
        std::printf("GPU %d name: %s\n", ordinal, name);
        std::printf("GPU %d unified addressing: %d\n", ordinal, unified);
        // cuCtxEnablePeerAccess opens every allocation of the peer only between devices with
        // unified addressing and the same major compute capability (cuda.h).
        std::printf("GPU %d compute capability: %d.%d\n", ordinal, major, minor);
    }

    // Step 2: properties of the pair of devices, asked before any context exists. "Can
    // access" is about hardware and topology (NVLink, or PCIe under one root complex). The
    // performance rank has no unit: it only compares the links of one machine.
    course::printStep(2, "can each GPU reach the other? (no context needed)");
    int canAB = 0;
    int canBA = 0;
    CHECK_DRIVER(cuDeviceCanAccessPeer(&canAB, deviceA, deviceB));
    CHECK_DRIVER(cuDeviceCanAccessPeer(&canBA, deviceB, deviceA));
    std::printf("cuDeviceCanAccessPeer(GPU %d -> GPU %d): %d\n", ordinalA, ordinalB, canAB);
    std::printf("cuDeviceCanAccessPeer(GPU %d -> GPU %d): %d\n", ordinalB, ordinalA, canBA);
    printLinkAttributes(deviceA, deviceB, ordinalA, ordinalB);
    printLinkAttributes(deviceB, deviceA, ordinalB, ordinalA);
    if (!lesson14::peersReachEachOther(ordinalA, ordinalB, canAB, canBA)) return course::kExitNotApplicable;

    // Step 3: one context per device. A thread has one current context at a time, so every
    // call below that works "on a GPU" is preceded by making that GPU's context current.
    course::printStep(3, "one primary context per GPU");
    CUcontext contextA = nullptr;
    CUcontext contextB = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&contextA, deviceA));
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&contextB, deviceB));
    std::printf("primary contexts: retained for GPU %d and GPU %d\n", ordinalA, ordinalB);

    // Step 4: enable A -> B: called in A's context, naming B's. It maps B's allocations into
    // A's context (those of today and those made later). It says nothing about B's kernels.
    // What the two provoked errors below show is the driver's record of what was enabled:
    // A -> B once, B -> A never. They are not a fault of B's kernels; the program runs none.
    course::printStep(4, "enable peer access GPU A -> GPU B, one direction");
    course::Verdict verdict;
    CHECK_DRIVER(cuCtxSetCurrent(contextA));
    CHECK_DRIVER(cuCtxEnablePeerAccess(contextB, 0));
    std::printf("cuCtxEnablePeerAccess in GPU %d's context for GPU %d's: CUDA_SUCCESS\n", ordinalA, ordinalB);
    const CUresult again = REPORT_DRIVER(cuCtxEnablePeerAccess(contextB, 0));
    std::printf("cuCtxEnablePeerAccess again, same two contexts: %s\n", course::driverErrorName(again));
    verdict.check("driver records the direction as already enabled", again == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    CHECK_DRIVER(cuCtxSetCurrent(contextB));
    const CUresult reverse = REPORT_DRIVER(cuCtxDisablePeerAccess(contextA));
    std::printf("cuCtxDisablePeerAccess in GPU %d's context for GPU %d's (never enabled): %s\n", ordinalB, ordinalA,
                course::driverErrorName(reverse));
    verdict.check("driver records the reverse direction as not enabled", reverse == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);

    // Step 5: the buffer is allocated and filled in B's context; its address means the same
    // in every context of the process (unified addressing), and the driver can tell whose
    // memory it is. The kernel runs in A's context and is handed that address as it is.
    course::printStep(5, "a kernel on GPU A reads GPU B's memory");
    std::vector<unsigned int> host(kWords);
    for (unsigned int i = 0; i < kWords; ++i) host[i] = 3u * i + 7u;
    CUdeviceptr onB = 0;
    CHECK_DRIVER(cuMemAlloc(&onB, kBytes));
    CHECK_DRIVER(cuMemcpyHtoD(onB, host.data(), kBytes));
    // From pageable memory, cuMemcpyHtoD may return before the last bytes reach the device,
    // and A's kernel is not ordered after B's work: wait here, in B's context.
    CHECK_DRIVER(cuCtxSynchronize());
    int owner = -1;
    CHECK_DRIVER(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, onB));
    std::printf("buffer on GPU %d: 0x%llx (%zu bytes), CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: %d\n", ordinalB,
                static_cast<unsigned long long>(onB), kBytes, owner);
    verdict.check("buffer belongs to the peer GPU", owner == ordinalB);
    CHECK_DRIVER(cuCtxSetCurrent(contextA));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("peer_read.fatbin").c_str()));
    CUfunction doubleAndIncrement = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&doubleAndIncrement, module, "doubleAndIncrement"));
    CUdeviceptr onA = 0;
    CHECK_DRIVER(cuMemAlloc(&onA, kBytes));
    CUdeviceptr in = onB;
    CUdeviceptr out = onA;
    unsigned int n = kWords;
    void* params[] = {&in, &out, &n};
    CHECK_DRIVER(
        cuLaunchKernel(doubleAndIncrement, (kWords + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    CHECK_DRIVER(cuCtxSynchronize());
    std::vector<unsigned int> result(kWords);
    CHECK_DRIVER(cuMemcpyDtoH(result.data(), onA, kBytes));
    unsigned int right = 0;
    for (unsigned int i = 0; i < kWords; ++i) right += result[i] == 2u * host[i] + 1u;
    std::printf("kernel on GPU %d read GPU %d's buffer: %u of %u words = 2 * in + 1\n", ordinalA, ordinalB, right,
                kWords);
    verdict.check("kernel on the first GPU computed from the peer's buffer", right == kWords);

    // Step 6: close the direction again, in the context that opened it. From now on A's
    // kernels have no access to B's memory again, as before step 4.
    course::printStep(6, "disable peer access GPU A -> GPU B");
    CHECK_DRIVER(cuCtxDisablePeerAccess(contextB));
    std::printf("cuCtxDisablePeerAccess in GPU %d's context for GPU %d's: CUDA_SUCCESS\n", ordinalA, ordinalB);

    // Step 7: memory goes back in its own context; then the contexts, newest first.
    course::printStep(7, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(onA));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuCtxSetCurrent(contextB));
    CHECK_DRIVER(cuMemFree(onB));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(deviceB));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(deviceA));
    std::printf("released: buffer on GPU %d, module, buffer on GPU %d, both primary contexts\n", ordinalA, ordinalB);

    course::printStep(8, "check");
    return verdict.finish();
}
