// Lesson 13 — sharing device memory between two processes.
//
// The program starts a second copy of itself (posix_spawn of /proc/self/exe with
// --child FD), joined to it by a Unix socket, and shares device memory with it three
// ways: the legacy cuIpc* handles with an interprocess event for ordering; physical
// memory from cuMemCreate exported as a POSIX file descriptor that crosses the socket
// (SCM_RIGHTS); and a memory pool exported the same way. Each time the child writes a
// pattern and the parent checks every word. Then it provokes the faults: a child that
// dies before it maps, a descriptor closed too early, a legacy handle opened by its own
// process. Every check prints "check NAME: ok|FAIL" where the program knows the answer; the
// children report their driver calls to the parent, which checks them. It ends by proving that
// no descriptor the program had to close and no child process is left behind.
//
//   13-ipc               every way and every fault, checked
//   13-ipc --device N    another GPU
//   13-ipc --child FD    the second process (started by the lesson itself, not by hand)
#include <cuda.h>

#include <climits>
#include <cstdio>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "ipc_channel.h"
#include "ways.h"

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device", "--child"}, "[--device N]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    if (args.values.count("--child") != 0) {
        const long long socket = args.valueOr("--child", -1);
        return ways::runChild(socket < 0 || socket > INT_MAX ? -1 : static_cast<int>(socket), ordinal);
    }

    // Step 1: each way has its own requirements, and the driver reports each one.
    course::printStep(1, "initialise the driver: what each way needs on this device");
    CHECK_DRIVER(cuInit(0));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("driver version: %s (cuDriverGetVersion = %d)\n", course::formatCudaVersion(driverVersion).c_str(),
                driverVersion);
    std::printf("device %d name: %s\n", ordinal, name);
    // A driver older than the CUDA version that added an attribute does not know it (it
    // answers CUDA_ERROR_INVALID_VALUE): such an attribute is not asked, and counts as 0.
    auto attribute = [device, driverVersion](const char* label, CUdevice_attribute which, int since) {
        int value = 0;
        if (driverVersion < since) {
            std::printf("%s: not known to this driver (CUDA %s added it)\n", label,
                        course::formatCudaVersion(since).c_str());
            return value;
        }
        CHECK_DRIVER(cuDeviceGetAttribute(&value, which, device));
        std::printf("%s: %d\n", label, value);
        return value;
    };
    int integrated = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED, device));
    std::printf("integrated (Tegra) GPU: %s\n", integrated ? "yes" : "no");
    const int unifiedAddressing =
        attribute("CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING", CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0);
    // Without this attribute (a toolkit or driver older than 12.0) the lesson falls back to the
    // rule the cuIpc* docs give: unified addressing.
#if CUDA_VERSION >= 12000
    int ipcEvents =
        attribute("CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED", CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 12000);
    if (driverVersion < 12000) ipcEvents = unifiedAddressing;
#else
    const int ipcEvents = unifiedAddressing;
    std::printf("CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED: not in this toolkit's cuda.h (CUDA < 12.0)\n");
#endif
    const int vmm = attribute("CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED",
                              CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 10020);
    const int posixFd = attribute("CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED",
                                  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 10020);
    const int pools =
        attribute("CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED", CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 11020);
    // A bit mask of CUmemAllocationHandleType: bit 1 is CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.
    const int poolHandleTypes = attribute("CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES",
                                          CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, 11030);
    const bool legacyWay = unifiedAddressing != 0 && ipcEvents != 0;
    const bool vmmWay = vmm != 0 && posixFd != 0;
    const bool poolWay = pools != 0 && (poolHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0;
    std::printf("legacy way (cuIpc*, needs unified addressing and IPC events): %s\n", legacyWay ? "yes" : "no");
    std::printf("modern way (cuMemCreate, needs VMM and POSIX fd handles): %s\n", vmmWay ? "yes" : "no");
    std::printf("pool way (cuMemPoolCreate, needs pools with POSIX fd handles): %s\n", poolWay ? "yes" : "no");
    if (!legacyWay && !vmmWay) {
        std::printf("Result = SKIP (the driver offers neither legacy IPC nor POSIX fd handles on this device)\n");
        return course::kExitNotApplicable;
    }

    // Step 2: the primary context. From here every descriptor the program must close and
    // every child it starts is recorded, for step 7.
    course::printStep(2, "retain the primary context and a stream");
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    std::printf("context: primary context of device %d; child processes: started with posix_spawn of /proc/self/exe\n",
                ordinal);

    course::Verdict verdict;
    course::printStep(3, "legacy: cuIpcGetMemHandle, cuIpcOpenMemHandle in the child, an IPC event for ordering");
    // A device may report IPC events and still refuse the memory handle: shareLegacy says so.
    bool legacyShared = false;
    if (legacyWay)
        legacyShared = ways::shareLegacy(argv[0], ordinal, stream, verdict);
    else
        std::printf("section legacy-ipc: SKIP (the driver reports no IPC event support on this device)\n");

    course::printStep(4, "modern: cuMemCreate, the allocation exported as a file descriptor sent with SCM_RIGHTS");
    if (vmmWay)
        ways::shareVmm(argv[0], ordinal, device, stream, verdict);
    else
        std::printf("section vmm-ipc: SKIP (the driver reports no POSIX fd handles for cuMemCreate here)\n");

    course::printStep(5, "a memory pool exported as a file descriptor, its allocation as export data");
#if CUDA_VERSION >= 11020
    if (poolWay)
        ways::sharePool(argv[0], ordinal, device, stream, verdict);
    else
        std::printf("section pool-ipc: SKIP (the driver reports no POSIX fd handles for memory pools here)\n");
#else
    std::printf("section pool-ipc: SKIP (built with CUDA < 11.2: no cuMemPoolExportToShareableHandle)\n");
#endif

    // Step 6: each fault is provoked on purpose; the driver's report shows on stderr.
    course::printStep(6, "faults: a child that dies, a closed descriptor, a handle opened by its own process");
    if (vmmWay) {
        ways::childDiesBeforeMapping(argv[0], ordinal, device, verdict);
        ways::importDescriptorThatNamesNothing(verdict);
    }
    if (legacyShared) ways::openLegacyHandleInSameProcess(verdict);

    // Step 7: everything back, newest first; then what the process still holds.
    course::printStep(7, "release everything: no descriptor and no child left behind");
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("descriptors to close (driver exports, socket ends): %zu\n", ipc::descriptorsTracked());
    const int stillOpen = ipc::descriptorsStillOpen();
    std::printf("descriptors still open: %d\n", stillOpen);
    verdict.check("every exported descriptor and socket end is closed", stillOpen == 0);
    std::printf("child processes started: %zu\n", ipc::childrenStarted());
    const int notReaped = ipc::childrenNotReaped();
    std::printf("child processes not reaped: %d\n", notReaped);
    verdict.check("every child process was reaped", notReaped == 0);

    course::printStep(8, "check");
    return verdict.finish();
}
