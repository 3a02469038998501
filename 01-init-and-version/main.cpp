// Lesson 01 — initialise the driver and ask it what it is and what it sees.
//
// Every Driver API program starts the same way: cuInit(0) loads the driver's
// state for this process, then the program asks which CUDA version the driver
// implements and which devices it can reach. Nothing here needs a context.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#include "../common/check_driver.h"
#include "../common/course_util.h"

int main() {
    // Step 1: cuInit must come before every other driver call (lesson 02 shows
    // what happens otherwise). Flags must be 0: none are defined.
    course::printStep(1, "initialise the driver");
    CHECK_DRIVER(cuInit(0));
    std::printf("cuInit: ok\n");

    // Step 2: three versions are in play. The driver's (what libcuda.so.1 can run),
    // the toolkit's cuda.h this program was compiled with (CUDA_VERSION), and, for
    // programs that use it, the runtime library's (cudaRuntimeGetVersion; lesson 07).
    course::printStep(2, "driver and toolkit versions");
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("driver CUDA version: %s (cuDriverGetVersion = %d)\n",
                course::formatCudaVersion(driverVersion).c_str(), driverVersion);
    std::printf("compiled with cuda.h: %s (CUDA_VERSION = %d)\n", course::formatCudaVersion(CUDA_VERSION).c_str(),
                CUDA_VERSION);
    // Minor-version compatibility (CUDA 11 and later): a program built with a newer toolkit of
    // the driver's own major family can run on that driver with a limited feature set, if the
    // driver is at least the family's minimum (the CUDA Compatibility guide: >= 450 for 11.x,
    // >= 525 for 12.x, >= 580 for 13.x). What the older driver lacks stays missing: entry points
    // it does not export (a newer _v2/_v3 version, a newer API) cannot be resolved, and PTX
    // written by the newer toolkit cannot be JIT-compiled (CUDA_ERROR_UNSUPPORTED_PTX_VERSION).
    // Across major families it needs the forward-compatibility package (cuda-compat).
    const course::CudaVersion driver = course::decodeCudaVersion(driverVersion);
    const course::CudaVersion toolkit = course::decodeCudaVersion(CUDA_VERSION);
    if (driverVersion >= CUDA_VERSION) {
        std::printf("driver vs toolkit: driver is as new as the toolkit or newer\n");
    } else if (driver.major == toolkit.major) {
        std::printf("driver vs toolkit: older driver of the same major version; minor-version compatibility: "
                    "limited features, this toolkit's PTX will not JIT\n");
    } else {
        std::printf("driver vs toolkit: driver is a major version behind the toolkit; update the driver\n");
    }
    course::Verdict verdict;
    verdict.check("driver major version reaches the toolkit's", driver.major >= toolkit.major);

    // Step 3: devices. The ordinal 0..count-1 is what CUDA_VISIBLE_DEVICES leaves
    // visible, in the driver's order (fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID).
    // There is no zero-device branch: with no visible device cuInit itself fails with
    // CUDA_ERROR_NO_DEVICE (one of its documented errors, and what the course's tests see with
    // CUDA_VISIBLE_DEVICES set empty), so step 1 already ended the program.
    course::printStep(3, "devices");
    int deviceCount = 0;
    CHECK_DRIVER(cuDeviceGetCount(&deviceCount));
    std::printf("device count: %d\n", deviceCount);

    bool busIdsLeadBack = true;
    for (int ordinal = 0; ordinal < deviceCount; ++ordinal) {
        // A CUdevice is a small integer handle, not a context: querying it allocates nothing.
        CUdevice device = 0;
        CHECK_DRIVER(cuDeviceGet(&device, ordinal));

        char name[256] = {};
        CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
        int major = 0;
        int minor = 0;
        CHECK_DRIVER(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
        CHECK_DRIVER(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
        size_t totalBytes = 0;
        CHECK_DRIVER(cuDeviceTotalMem(&totalBytes, device));
        CUuuid uuid{};
        CHECK_DRIVER(cuDeviceGetUuid(&uuid, device));
        int integrated = 0;  // 1 on Jetson/Tegra: the GPU shares DRAM with the CPU (lesson 09)
        CHECK_DRIVER(cuDeviceGetAttribute(&integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED, device));
        char pciBusId[32] = {};
        CHECK_DRIVER(cuDeviceGetPCIBusId(pciBusId, sizeof(pciBusId), device));

        // The UUID in nvidia-smi's form: GPU-8-4-4-4-12 hex digits.
        char uuidText[64];
        const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
        std::snprintf(uuidText, sizeof(uuidText),
                      "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
                      b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);

        std::printf("device %d name: %s\n", ordinal, name);
        std::printf("device %d compute capability: %d.%d\n", ordinal, major, minor);
        std::printf("device %d total memory: %.2f GiB (%zu bytes)\n", ordinal,
                    static_cast<double>(totalBytes) / (1024.0 * 1024.0 * 1024.0), totalBytes);
        std::printf("device %d uuid: %s\n", ordinal, uuidText);
        std::printf("device %d integrated: %s\n", ordinal, integrated ? "yes" : "no");
        std::printf("device %d PCI bus id: %s\n", ordinal, pciBusId);

        // The bus id is how to match an ordinal with nvidia-smi, whose order may differ; the
        // driver maps it back to the device (REPORT_DRIVER: a failure here is the check's answer).
        CUdevice byBusId = -1;
        const CUresult lookup = REPORT_DRIVER(cuDeviceGetByPCIBusId(&byBusId, pciBusId));
        busIdsLeadBack = busIdsLeadBack && lookup == CUDA_SUCCESS && byBusId == device;
    }

    // The count bounds the ordinals: cuDeviceGet takes "an ordinal in the range [0,
    // cuDeviceGetCount()-1]" (cuda.h). The last one gives a device, one more does not; which
    // error code comes back is printed, not checked (cuda.h lists several without saying).
    CUdevice last = -1;
    const CUresult lastResult = cuDeviceGet(&last, deviceCount - 1);
    CUdevice pastLast = -1;
    const CUresult pastResult = cuDeviceGet(&pastLast, deviceCount);
    std::printf("cuDeviceGet(count - 1): %s\n", course::driverErrorName(lastResult));
    std::printf("cuDeviceGet(count): %s\n", course::driverErrorName(pastResult));

    // Step 4: the lesson checks its own result.
    course::printStep(4, "check");
    verdict.check("each device's PCI bus id leads back to it", busIdsLeadBack);
    verdict.check("the device count ends the valid ordinals", lastResult == CUDA_SUCCESS && pastResult != CUDA_SUCCESS);
    return verdict.finish();
}
