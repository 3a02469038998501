// Lesson 09, program 5 — the CUDA upgrade package check.
//
// Jetson's CUDA upgrade package (cuda-compat) ships a newer libcuda.so.1 in
// /usr/local/cuda-X.Y/compat, chosen with LD_LIBRARY_PATH. Two errors from cuInit tell
// a deployment that the pairing is wrong; the rest is what to log: the driver's CUDA
// version against the toolkit's, and which libcuda.so.1 the loader picked.
//
//   upgrade_check [--device N]
#include <cuda.h>
#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "tegra_device.h"

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;

    // Step 1: the two codes, named by the driver's own table (cuGetErrorName).
    course::printStep(1, "the two errors of a wrong pairing");
    CHECK_DRIVER(cuInit(0));  // on a wrong pairing, this call returns one of them
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device name: %s\n", name);
    std::printf(
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = %d (%s): the upgraded CUDA driver does not match the "
        "installed kernel-mode/JetPack drivers\n",
        static_cast<int>(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH),
        course::driverErrorName(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH));
    std::printf(
        "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = %d (%s): the system runs the upgrade package but this "
        "hardware does not support that configuration\n",
        static_cast<int>(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE),
        course::driverErrorName(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE));

    // Step 2: the driver's CUDA version against the one this program was compiled with.
    course::printStep(2, "driver against toolkit");
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("driver CUDA version: %s\n", course::formatCudaVersion(driverVersion).c_str());
    std::printf("compiled with CUDA_VERSION: %s\n", course::formatCudaVersion(CUDA_VERSION).c_str());
    const course::CudaVersion driverV = course::decodeCudaVersion(driverVersion);
    const course::CudaVersion toolkitV = course::decodeCudaVersion(CUDA_VERSION);
    if (driverVersion >= CUDA_VERSION) {
        std::printf("upgrade package needed: no (the driver is as new as the toolkit)\n");
    } else if (driverV.major == toolkitV.major) {
        std::printf(
            "upgrade package needed: only for PTX JIT or new driver APIs (minor-version compatibility "
            "runs this toolkit's SASS)\n");
    } else {
        std::printf("upgrade package needed: yes (on Jetson: cuda-compat-%d-%d, if JetPack supports it)\n",
                    toolkitV.major, toolkitV.minor);
    }

    // Step 3: which libcuda.so.1 did the loader pick? RTLD_NOLOAD finds the copy
    // already in the process instead of loading another.
    course::printStep(3, "the libcuda.so.1 in this process");
    bool found = false;
    if (void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD); handle != nullptr) {
        link_map* map = nullptr;
        if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
            std::printf("libcuda.so.1 loaded from: %s\n", map->l_name);
            std::printf("libcuda.so.1 from a cuda-compat folder: %s\n",
                        tegra::yesNo(std::strstr(map->l_name, "/compat/") != nullptr));
            found = true;
        }
        dlclose(handle);
    }
    if (!found) std::printf("libcuda.so.1 loaded from: unknown (dlinfo gave no path)\n");

    // Step 4: the program runs on the driver it linked, so the loader must know where that came from.
    course::printStep(4, "check");
    course::Verdict verdict;
    verdict.check("the loader names the libcuda.so.1 in this process", found);
    return verdict.finish();
}
