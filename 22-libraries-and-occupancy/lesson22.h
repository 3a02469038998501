// lesson22.h — lesson 22's small helpers: the device line and the version gate that every
// program starts with, a whole file read into memory, names for a few enums, whether a device has
// managed memory, and the check that a tool running instrumented kernels cannot decide.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace lesson22 {

// The ABI version cudaTypedefs.h names in each call's typedef (PFN_..._vNNNNN): 12040 for
// cuLibraryGetKernelCount, cuLibraryEnumerateKernels, cuKernelGetParamInfo,
// cuModuleGetFunctionCount, cuModuleEnumerateFunctions, cuFuncIsLoaded and cuFuncLoad; 12030
// for cuKernelGetName and cuFuncGetName; 12000 for cuLibraryLoadData, cuLibraryGetGlobal,
// cuKernelGetFunction ...; 12050 for cuKernelGetLibrary, which the libraries program guards on
// its own. The suffix is the version of the symbol's ABI, not necessarily the release the call
// first appeared in: the programs that use these calls simply ask for headers and a driver of at
// least 12.4, the highest of them but cuKernelGetLibrary's. The occupancy calls' typedefs name
// older versions (cuOccupancy*: 6.5 to 11.7).
constexpr int kLibraryVersionNeeded = 12040;

// Prints the device, its compute capability and both versions (the headers this program was
// built with, the driver it runs on), and returns 10 * major + minor.
inline int printDevice(CUdevice device, int ordinal) {
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    int major = 0;
    int minor = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("device %d name: %s\n", ordinal, name);
    std::printf("compute capability: %d.%d\n", major, minor);
    std::printf("built with CUDA headers: %s\n", course::formatCudaVersion(CUDA_VERSION).c_str());
    std::printf("driver supports CUDA: %s\n", course::formatCudaVersion(driverVersion).c_str());
    return 10 * major + minor;
}

// Empty when both the headers and the driver are at least `needed`, else the reason they are not.
inline std::string versionShortfall(int needed) {
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    const std::string want = course::formatCudaVersion(needed);
    if (CUDA_VERSION < needed)
        return "built with CUDA " + course::formatCudaVersion(CUDA_VERSION) + " headers; this program needs " + want;
    if (driverVersion < needed)
        return "the driver supports CUDA " + course::formatCudaVersion(driverVersion) + "; this program needs " + want;
    return "";
}

// The "Result = SKIP" line, and the exit code of a program that cannot run here.
inline int skip(const std::string& reason) {
    std::printf("Result = SKIP (%s)\n", reason.c_str());
    return course::kExitNotApplicable;
}

// The whole file, or exit 1 with a message naming the path (it sits next to the program).
inline std::string readModuleFile(const std::string& path) {
    const auto bytes = course::readFile(path);
    if (!bytes) std::exit(EXIT_FAILURE);
    return *bytes;
}

inline const char* cacheConfigName(CUfunc_cache config) {
    switch (config) {
        case CU_FUNC_CACHE_PREFER_NONE: return "CU_FUNC_CACHE_PREFER_NONE";
        case CU_FUNC_CACHE_PREFER_SHARED: return "CU_FUNC_CACHE_PREFER_SHARED";
        case CU_FUNC_CACHE_PREFER_L1: return "CU_FUNC_CACHE_PREFER_L1";
        case CU_FUNC_CACHE_PREFER_EQUAL: return "CU_FUNC_CACHE_PREFER_EQUAL";
        default: return "(unknown CUfunc_cache)";
    }
}

// Whether `device` "can allocate managed memory on this system" (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
// cuda.h:811). Where it cannot, the programs do not dereference a __managed__ variable's pointer.
inline bool managedMemory(CUdevice device) {
    int value = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, device));
    return value != 0;
}

// For a check that compares what kernels measured on the GPU: under a tool that instruments
// every kernel (compute-sanitizer, Nsight Compute: course::instrumentingTool) the kernels are not
// the ones the driver's prediction describes, so the line says SKIP and decides nothing.
inline bool checkMeasured(course::Verdict& verdict, const char* name, bool held) {
    if (const char* tool = course::instrumentingTool()) {
        std::printf("check %s: SKIP (%s runs instrumented kernels)\n", name, tool);
        return true;
    }
    return verdict.check(name, held);
}

}  // namespace lesson22
