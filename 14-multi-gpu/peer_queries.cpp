// Lesson 14, program 3 — what the peer-access calls answer, on one GPU and on two.
//
// cuda.h documents several refusals that one GPU can show: a device is not a link to itself,
// access between two contexts of one device is refused when cuDeviceCanAccessPeer says the
// device cannot reach itself, and a direction never enabled cannot be disabled. With two
// GPUs, the link attributes are compared with the other calls that describe the same link.
// This program runs on every machine with a GPU; the two-GPU part says SKIP on one.
//
//   peer_queries                         GPU 0 (and GPU 1 where there is one)
//   peer_queries --device A --peer B     two other GPUs
#include <cuda.h>

#include <cstdio>
#include <utility>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "two_gpus.h"

namespace {

#if CUDA_VERSION >= 13000
// Three atomics every CUDA GPU has in some form (atomicAdd, atomicExch, atomicCAS on 32-bit
// integers): where a link supports "all CUDA-valid atomic operations", each has a capability.
constexpr CUatomicOperation kOperations[] = {CU_ATOMIC_OPERATION_INTEGER_ADD, CU_ATOMIC_OPERATION_EXCHANGE,
                                             CU_ATOMIC_OPERATION_CAS};
constexpr unsigned int kOperationCount = sizeof(kOperations) / sizeof(kOperations[0]);
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    int ordinalA = 0;
    int ordinalB = 1;
    if (!course::parseArguments(argc, argv, {}, {"--device", "--peer"}, "[--device A] [--peer B]", args) ||
        !lesson14::pickOrdinals(args, argv[0], ordinalA, ordinalB))
        return course::kExitUsage;

    // Step 1: the device count decides whether step 3 runs; step 2 needs one GPU.
    course::printStep(1, "devices");
    CHECK_DRIVER(cuInit(0));
    int deviceCount = 0;
    CHECK_DRIVER(cuDeviceGetCount(&deviceCount));
    std::printf("device count: %d\n", deviceCount);
    CUdevice deviceA = 0;
    CHECK_DRIVER(cuDeviceGet(&deviceA, ordinalA));
    course::Verdict verdict;

    // Step 2: one GPU and itself. cuDeviceGetP2PAttribute (and, from CUDA 13.0,
    // cuDeviceGetP2PAtomicCapabilities) return CUDA_ERROR_INVALID_DEVICE for source and
    // destination that "represent the same device" (cuda.h).
    course::printStep(2, "one GPU and itself");
    int selfAttribute = -1;
    const CUresult selfLink =
        cuDeviceGetP2PAttribute(&selfAttribute, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, deviceA, deviceA);
    std::printf("cuDeviceGetP2PAttribute(GPU %d -> GPU %d): %s\n", ordinalA, ordinalA,
                course::driverErrorName(selfLink));
    verdict.check("a device is no link to itself", selfLink == CUDA_ERROR_INVALID_DEVICE);
#if CUDA_VERSION >= 13000
    unsigned int selfCapabilities[kOperationCount] = {};
    const CUresult selfAtomics =
        cuDeviceGetP2PAtomicCapabilities(selfCapabilities, kOperations, kOperationCount, deviceA, deviceA);
    std::printf("cuDeviceGetP2PAtomicCapabilities(GPU %d -> GPU %d): %s\n", ordinalA, ordinalA,
                course::driverErrorName(selfAtomics));
    verdict.check("a device has no atomics link to itself", selfAtomics == CUDA_ERROR_INVALID_DEVICE);
#endif

    // Two contexts of the one device: ctx2 is current (each creation pushes). Disabling a
    // direction never enabled gives CUDA_ERROR_PEER_ACCESS_NOT_ENABLED; enabling gives
    // CUDA_ERROR_PEER_ACCESS_UNSUPPORTED "if cuDeviceCanAccessPeer() indicates that the
    // CUdevice of the current context cannot directly access memory from the CUdevice of
    // peerContext" (cuda.h). What the device says about itself is printed; cuda.h does not
    // say which answer to expect.
    CUcontext ctx1 = nullptr;
    CUcontext ctx2 = nullptr;
    CHECK_DRIVER(course::ctxCreate(&ctx1, 0, deviceA));
    CHECK_DRIVER(course::ctxCreate(&ctx2, 0, deviceA));
    int canSelf = -1;
    CHECK_DRIVER(cuDeviceCanAccessPeer(&canSelf, deviceA, deviceA));
    std::printf("cuDeviceCanAccessPeer(GPU %d -> GPU %d): %d\n", ordinalA, ordinalA, canSelf);
    const CUresult disabled = cuCtxDisablePeerAccess(ctx1);
    std::printf("cuCtxDisablePeerAccess, never enabled, two contexts of GPU %d: %s\n", ordinalA,
                course::driverErrorName(disabled));
    verdict.check("disabling a direction never enabled gives CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
                  disabled == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    const CUresult enabled = cuCtxEnablePeerAccess(ctx1, 0);
    std::printf("cuCtxEnablePeerAccess, two contexts of GPU %d: %s\n", ordinalA, course::driverErrorName(enabled));
    if (enabled == CUDA_SUCCESS) CHECK_DRIVER(cuCtxDisablePeerAccess(ctx1));  // close what opened
    verdict.check("enabling follows what cuDeviceCanAccessPeer says",
                  canSelf == 1 || (canSelf == 0 && enabled == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED));
    CHECK_DRIVER(cuCtxDestroy(ctx2));
    CHECK_DRIVER(cuCtxDestroy(ctx1));

    // Step 3: two GPUs. The link's ACCESS_SUPPORTED attribute is the answer of
    // cuDeviceCanAccessPeer, each way. Where NATIVE_ATOMIC_SUPPORTED says "all CUDA-valid
    // atomic operations over the link are supported", each of three common atomics has a
    // capability in cuDeviceGetP2PAtomicCapabilities.
    course::printStep(3, "two GPUs: the link, asked three ways");
    if (deviceCount < 2 || ordinalB >= deviceCount) {
        std::printf("section two GPUs: SKIP (this machine has %d)\n", deviceCount);
        course::printStep(4, "check");
        return verdict.finish();
    }
    CUdevice deviceB = 0;
    CHECK_DRIVER(cuDeviceGet(&deviceB, ordinalB));
    for (const auto& [from, to] : {std::pair{ordinalA, ordinalB}, std::pair{ordinalB, ordinalA}}) {
        const CUdevice source = from == ordinalA ? deviceA : deviceB;
        const CUdevice destination = to == ordinalA ? deviceA : deviceB;
        int canAccess = -1;
        CHECK_DRIVER(cuDeviceCanAccessPeer(&canAccess, source, destination));
        int accessSupported = -1;
        CHECK_DRIVER(
            cuDeviceGetP2PAttribute(&accessSupported, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, source, destination));
        std::printf("GPU %d -> GPU %d: cuDeviceCanAccessPeer %d, ACCESS_SUPPORTED %d\n", from, to, canAccess,
                    accessSupported);
        verdict.check("ACCESS_SUPPORTED is cuDeviceCanAccessPeer's answer", accessSupported == canAccess);
#if CUDA_VERSION >= 13000
        int native = -1;
        CHECK_DRIVER(
            cuDeviceGetP2PAttribute(&native, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, source, destination));
        unsigned int capabilities[kOperationCount] = {};
        const CUresult asked =
            cuDeviceGetP2PAtomicCapabilities(capabilities, kOperations, kOperationCount, source, destination);
        std::printf(
            "GPU %d -> GPU %d: NATIVE_ATOMIC_SUPPORTED %d; capabilities of add, exchange, CAS: 0x%x 0x%x 0x%x\n", from,
            to, native, capabilities[0], capabilities[1], capabilities[2]);
        // cuda.h ties no bitmask to NATIVE_ATOMIC_SUPPORTED: the masks are printed, as observed.
        verdict.check("cuDeviceGetP2PAtomicCapabilities answers for the link", asked == CUDA_SUCCESS);
#endif
    }

    // Step 4: each check above printed its line where the program learnt the answer.
    course::printStep(4, "check");
    return verdict.finish();
}
