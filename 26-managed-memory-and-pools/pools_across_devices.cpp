// Lesson 26, program 3 — memory pools beyond lesson 12: the current pool of a memory location
// (cuMemGetDefaultMemPool, cuMemGetMemPool, cuMemSetMemPool of 13.0's cuda.h, beside cuDeviceSetMemPool),
// what a physical allocation's handle says about it (cuMemGetAllocationPropertiesFromHandle), the
// graph allocator's reserve trimmed and its watermarks reset (cuDeviceSetGraphMemAttribute), and a
// pool of one GPU opened to another (cuMemPoolSetAccess / cuMemPoolGetAccess): a kernel on the
// second GPU reads an allocation from the first GPU's pool. That last step needs two GPUs; on one
// it prints SKIP with the reason and the other steps still run.
//
//   pools_across_devices               the walkthrough (step 5 on GPU 1, when there is one)
//   pools_across_devices --device N    another GPU (the peer is then GPU 0, or GPU 1 when N is 0)
//   pools_across_devices --peer M      GPU M for step 5; asked for by name, it must exist (else SKIP, exit 77)
#include <cuda.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "managed_compat.h"
#include "managed_helpers.h"
#include "pool_steps.h"

namespace {

constexpr size_t kWords = size_t{2} << 20;  // 8 MiB of 32-bit words
constexpr size_t kBytes = kWords * sizeof(unsigned int);

CUmemoryPool createDevicePool(CUdevice device) {
    CUmemPoolProps properties{};
    properties.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    properties.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    properties.location.id = device;
    CUmemoryPool pool = nullptr;
    CHECK_DRIVER(cuMemPoolCreate(&pool, &properties));
    return pool;
}

// Step 2: the current pool of a location. cuMemGetMemPool returns "the last pool provided to
// cuMemSetMemPool or cuDeviceSetMemPool for this location and allocation type or the location's
// default memory pool" (cuda.h:13609-13610); for a device and PINNED, cuMemSetMemPool "is the
// equivalent of calling cuDeviceSetMemPool" (cuda.h:13634-13635); cuMemAllocAsync "allocates from
// the current mempool of the provided stream's device" (cuda.h:5600).
void currentPools(course::Verdict& verdict, CUdevice device, CUstream stream, int driverVersion) {
    const char* const kChecks[] = {
        "before any set, cuMemGetMemPool, cuMemGetDefaultMemPool and cuDeviceGetDefaultMemPool give one pool",
        "after cuMemSetMemPool, cuMemGetMemPool and cuDeviceGetMemPool give the pool set",
        "cuMemAllocAsync took its memory from the pool set",
        "after cuDeviceSetMemPool back to the default, cuMemGetMemPool gives the default",
    };
    const std::string reason = lesson26::versionReason(lesson26::kCuda13, driverVersion, "cuMemSetMemPool");
    if (!reason.empty()) {
        std::printf("section current pool of a location: SKIP (%s)\n", reason.c_str());
        for (const char* name : kChecks) lesson26::skipCheck(name, reason);
        return;
    }
#if CUDA_VERSION >= 13000
    const CUmemoryPool own = createDevicePool(device);
    CUmemLocation here = course::deviceLocation(device);
    CUmemoryPool viaLocation = nullptr;
    CUmemoryPool viaDevice = nullptr;
    CUmemoryPool current = nullptr;
    CHECK_DRIVER(cuMemGetDefaultMemPool(&viaLocation, &here, CU_MEM_ALLOCATION_TYPE_PINNED));
    CHECK_DRIVER(cuDeviceGetDefaultMemPool(&viaDevice, device));
    CHECK_DRIVER(cuMemGetMemPool(&current, &here, CU_MEM_ALLOCATION_TYPE_PINNED));
    std::printf("default pool by location and by device: %s\n", viaLocation == viaDevice ? "the same" : "different");
    std::printf("current pool before any set: %s\n", current == viaDevice ? "the default" : "another");
    verdict.check(kChecks[0], viaLocation == viaDevice && current == viaDevice);

    CHECK_DRIVER(cuMemSetMemPool(&here, CU_MEM_ALLOCATION_TYPE_PINNED, own));
    CUmemoryPool currentByLocation = nullptr;
    CUmemoryPool currentByDevice = nullptr;
    CHECK_DRIVER(cuMemGetMemPool(&currentByLocation, &here, CU_MEM_ALLOCATION_TYPE_PINNED));
    CHECK_DRIVER(cuDeviceGetMemPool(&currentByDevice, device));
    std::printf("current pool after cuMemSetMemPool, by location and by device: %s, %s\n",
                currentByLocation == own ? "the new pool" : "another",
                currentByDevice == own ? "the new pool" : "another");
    verdict.check(kChecks[1], currentByLocation == own && currentByDevice == own);

    CUdeviceptr block = 0;
    CHECK_DRIVER(cuMemAllocAsync(&block, kBytes, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    cuuint64_t used = 0;
    CHECK_DRIVER(cuMemPoolGetAttribute(own, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
    std::printf("new pool in use after an 8 MiB cuMemAllocAsync: %llu bytes\n", static_cast<unsigned long long>(used));
    verdict.check(kChecks[2], used >= kBytes);
    CHECK_DRIVER(cuMemFreeAsync(block, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));

    CHECK_DRIVER(cuDeviceSetMemPool(device, viaLocation));
    CHECK_DRIVER(cuMemGetMemPool(&current, &here, CU_MEM_ALLOCATION_TYPE_PINNED));
    std::printf("current pool after cuDeviceSetMemPool with the default: %s\n",
                current == viaDevice ? "the default" : "another");
    verdict.check(kChecks[3], current == viaDevice);
    CHECK_DRIVER(cuMemPoolDestroy(own));
#else
    (void)verdict;
    (void)device;
    (void)stream;
#endif
}

const char* accessName(CUmemAccess_flags flags) {
    switch (flags) {
        case CU_MEM_ACCESS_FLAGS_PROT_NONE: return "CU_MEM_ACCESS_FLAGS_PROT_NONE";
        case CU_MEM_ACCESS_FLAGS_PROT_READ: return "CU_MEM_ACCESS_FLAGS_PROT_READ";
        case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: return "CU_MEM_ACCESS_FLAGS_PROT_READWRITE";
        default: return "(unknown CUmemAccess_flags)";
    }
}

CUmemAccess_flags poolAccess(CUmemoryPool pool, CUdevice device) {
    CUmemLocation where = lesson26::locationOf(device);
    CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_MAX;  // no answer has it
    CHECK_DRIVER(cuMemPoolGetAccess(&flags, pool, &where));
    return flags;
}

// The kernel of step 5, on the peer GPU in its own primary context: out = 3 * in + 1, where `in` is
// the allocation from this GPU's pool. Returns the words of `out` that are not that.
size_t readOnPeer(CUdevice peer, CUcontext home, CUdeviceptr shared, unsigned int seed) {
    CUcontext peerContext = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&peerContext, peer));
    CHECK_DRIVER(cuCtxSetCurrent(peerContext));
    const lesson26::Kernels kernels = lesson26::loadKernels();  // a module belongs to one context
    CUdeviceptr out = 0;
    CHECK_DRIVER(cuMemAlloc(&out, kBytes));
    CHECK_DRIVER(cuMemsetD32(out, 0, kWords));
    CUdeviceptr in = shared;
    unsigned long long n = kWords;
    void* params[] = {&in, &out, &n};
    lesson26::launch(kernels.tripleAndIncrement, kWords, params, nullptr);  // after the memset: one stream
    CHECK_DRIVER(cuCtxSynchronize());
    std::vector<unsigned int> result(kWords);
    CHECK_DRIVER(cuMemcpyDtoH(result.data(), out, kBytes));
    CHECK_DRIVER(cuMemFree(out));
    CHECK_DRIVER(cuModuleUnload(kernels.module));
    CHECK_DRIVER(cuCtxSetCurrent(home));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(peer));
    return lesson26::wrongWords(result.data(), kWords, seed, 3, 1);
}

// Step 5: a new pool of this GPU, opened to the peer GPU. "By default, the pool's memory will be
// accessible from the device it is allocated on" (cuda.h:13518): checked on one GPU too, as an access
// other than NONE. cuMemPoolSetAccess changes what the other devices may do. The program never calls
// cuCtxEnablePeerAccess: the pool's access list is the only grant. It never lets a kernel touch the
// allocation without access either: a kernel that reads memory it may not can end in
// CUDA_ERROR_ILLEGAL_ADDRESS, after which "the process must be terminated and relaunched"
// (cuda.h:2834-2836).
void poolAcrossDevices(course::Verdict& verdict, CUdevice device, CUcontext context, CUstream stream, int ordinal,
                       int peerOrdinal, int deviceCount) {
    const char* const kNone = "the peer GPU has no access to the new pool before cuMemPoolSetAccess";
    const char* const kGranted = "cuMemPoolGetAccess reads back the READWRITE access set for the peer GPU";
    const char* const kRead = "a kernel on the peer GPU read the allocation from this GPU's pool";
    const char* const kRevoked = "after access NONE, cuMemPoolGetAccess reads NONE for the peer GPU";
    const CUmemoryPool pool = createDevicePool(device);
    const CUmemAccess_flags own = poolAccess(pool, device);
    std::printf("this GPU's access to its new pool: %s\n", accessName(own));
    verdict.check("this GPU can access its new pool by default",
                  own == CU_MEM_ACCESS_FLAGS_PROT_READ || own == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    std::string reason;
    CUdevice peer = 0;
    if (deviceCount < 2) {
        reason = "needs two GPUs; this machine has " + std::to_string(deviceCount);
        std::printf("peer GPU can access this GPU's memory (cuDeviceCanAccessPeer): not run\n");
    } else {
        CHECK_DRIVER(cuDeviceGet(&peer, peerOrdinal));
        int canAccess = 0;
        CHECK_DRIVER(cuDeviceCanAccessPeer(&canAccess, peer, device));
        std::printf("peer GPU can access this GPU's memory (cuDeviceCanAccessPeer): %d (GPU %d -> GPU %d)\n",
                    canAccess, peerOrdinal, ordinal);
        if (canAccess == 0)
            reason =
                "GPU " + std::to_string(peerOrdinal) + " cannot access GPU " + std::to_string(ordinal) + "'s memory";
    }
    if (!reason.empty()) {  // the same lines as a run on two GPUs, each "not run", so both read alike
        std::printf("peer GPU: not run (%s)\n", reason.c_str());
        std::printf("peer GPU's access before cuMemPoolSetAccess: not run\n");
        lesson26::skipCheck(kNone, reason);
        std::printf("peer GPU's access after cuMemPoolSetAccess: not run\n");
        lesson26::skipCheck(kGranted, reason);
        std::printf("words the peer GPU's kernel computed from the pool allocation: not run\n");
        lesson26::skipCheck(kRead, reason);
        std::printf("peer GPU's access after access NONE: not run\n");
        lesson26::skipCheck(kRevoked, reason);
        CHECK_DRIVER(cuMemPoolDestroy(pool));
        return;
    }
    std::printf("peer GPU: %d\n", peerOrdinal);
    const CUmemAccess_flags before = poolAccess(pool, peer);
    std::printf("peer GPU's access before cuMemPoolSetAccess: %s\n", accessName(before));
    verdict.check(kNone, before == CU_MEM_ACCESS_FLAGS_PROT_NONE);
    CUmemAccessDesc grant{};
    grant.location = lesson26::locationOf(peer);
    grant.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK_DRIVER(cuMemPoolSetAccess(pool, &grant, 1));
    const CUmemAccess_flags after = poolAccess(pool, peer);
    std::printf("peer GPU's access after cuMemPoolSetAccess: %s\n", accessName(after));
    const bool granted = verdict.check(kGranted, after == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

    constexpr unsigned int kSeed = 5;
    std::vector<unsigned int> pattern(kWords);
    lesson26::writePattern(pattern.data(), kWords, kSeed);
    CUdeviceptr shared = 0;
    CHECK_DRIVER(cuMemAllocFromPoolAsync(&shared, kBytes, pool, stream));
    CHECK_DRIVER(cuMemcpyHtoDAsync(shared, pattern.data(), kBytes, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));  // the peer's kernel starts after this, in host order
    if (granted) {
        const size_t wrong = readOnPeer(peer, context, shared, kSeed);
        std::printf("words the peer GPU's kernel computed from the pool allocation: %zu of %zu\n", kWords - wrong,
                    kWords);
        verdict.check(kRead, wrong == 0);
    } else {
        std::printf("words the peer GPU's kernel computed from the pool allocation: not run\n");
        lesson26::skipCheck(kRead, "the access was not granted");
    }
    CHECK_DRIVER(cuMemFreeAsync(shared, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    grant.flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CHECK_DRIVER(cuMemPoolSetAccess(pool, &grant, 1));
    const CUmemAccess_flags revoked = poolAccess(pool, peer);
    std::printf("peer GPU's access after access NONE: %s\n", accessName(revoked));
    verdict.check(kRevoked, revoked == CU_MEM_ACCESS_FLAGS_PROT_NONE);
    CHECK_DRIVER(cuMemPoolDestroy(pool));
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device", "--peer"}, "[--device N] [--peer M]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    const long long peerArgument = args.valueOr("--peer", ordinal == 0 ? 1 : 0);
    const int peerOrdinal = peerArgument < 0 || peerArgument > 1024 ? -1 : static_cast<int>(peerArgument);

    course::printStep(1, "initialise, check memory pool support");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    course::printDeviceName(ordinal, device);
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("built with CUDA headers: %s\n", course::formatCudaVersion(CUDA_VERSION).c_str());
    std::printf("driver supports CUDA: %s\n", course::formatCudaVersion(driverVersion).c_str());
    int deviceCount = 0;
    CHECK_DRIVER(cuDeviceGetCount(&deviceCount));
    std::printf("device count: %d\n", deviceCount);
    if (args.values.count("--peer") != 0 && (peerOrdinal < 0 || peerOrdinal >= deviceCount || peerOrdinal == ordinal)) {
        std::printf("section pool across devices: SKIP (--peer %lld names no other GPU)\n", peerArgument);
        std::printf("Result = SKIP (--peer asks for a second GPU; this machine has %d)\n", deviceCount);
        return course::kExitNotApplicable;
    }
    const int pools = course::deviceAttribute(device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
    std::printf("CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: %d\n", pools);
    if (pools == 0) {
        std::printf("Result = SKIP (no memory pools on this device: every step here needs them)\n");
        return course::kExitNotApplicable;
    }
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    course::Verdict verdict;

    course::printStep(2, "the current pool of a location: cuMemGetDefaultMemPool, cuMemGetMemPool, cuMemSetMemPool");
    currentPools(verdict, device, stream, driverVersion);

    course::printStep(3, "cuMemGetAllocationPropertiesFromHandle: what a handle says about its allocation");
    lesson26::propertiesFromHandles(verdict, device);

    course::printStep(4, "the graph allocator's reserve: trim it, reset its high watermarks, read them back");
    lesson26::trimAndResetGraphMemory(verdict, context, device, stream);

    course::printStep(5, "cuMemPoolSetAccess: a kernel on another GPU reads this GPU's pool");
    poolAcrossDevices(verdict, device, context, stream, ordinal, peerOrdinal, deviceCount);

    course::printStep(6, "release everything, newest first");
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: stream, primary context (each step released its own pools, handles and graphs)\n");

    course::printStep(7, "check");
    return verdict.finish();
}
