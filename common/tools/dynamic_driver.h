// dynamic_driver.h — loads libcuda.so.1 at run time, for the course's tools and tests.
//
// The lessons link libcuda directly, as an application would. The test suite and
// the driver probe must start on machines that have no driver at all (CI), so
// they open it with dlopen and resolve every function through cuGetProcAddress,
// asking for the ABI version that matches the cuda.h they were compiled with.
// (Lesson 08 teaches this technique step by step.)
#pragma once

#include <cuda.h>
#include <dlfcn.h>

#include <string>

#include "../check_driver.h"

namespace course {

class DynamicDriver {
public:
    DynamicDriver() {
        handle_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (handle_ == nullptr) {
            const char* why = dlerror();
            problem_ = std::string("no NVIDIA driver: libcuda.so.1 could not be loaded (") +
                       (why != nullptr ? why : "unknown reason") + ")";
            return;
        }
        // The unversioned export has the CUDA 11.3 signature in every driver since.
        getProcAddress_ = reinterpret_cast<GetProcAddressV1>(dlsym(handle_, "cuGetProcAddress"));
        if (getProcAddress_ == nullptr) {
            problem_ = "libcuda.so.1 has no cuGetProcAddress: the driver is older than CUDA 11.3";
            return;
        }
        // The stub library answers every call, cuGetProcAddress included, with CUDA_ERROR_STUB_LIBRARY.
        void* probe = nullptr;
        if (const CUresult lookup = getProcAddress_("cuInit", &probe, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT);
            lookup != CUDA_SUCCESS) {
            problem_ = std::string("cuGetProcAddress(\"cuInit\") failed with ") + describe(lookup);
            return;
        }
        auto init = get<decltype(&::cuInit)>("cuInit");
        auto count = get<decltype(&::cuDeviceGetCount)>("cuDeviceGetCount");
        auto version = get<decltype(&::cuDriverGetVersion)>("cuDriverGetVersion");
        if (init == nullptr || count == nullptr || version == nullptr) {
            problem_ = "libcuda.so.1 lacks cuInit/cuDeviceGetCount/cuDriverGetVersion";
            return;
        }
        if (const CUresult result = init(0); result != CUDA_SUCCESS) {
            problem_ = std::string("cuInit(0) failed with ") + describe(result);
            return;
        }
        version(&driverVersion_);
        count(&deviceCount_);
        if (deviceCount_ == 0) {
            problem_ = "the driver reports no CUDA device";
            return;
        }
        usable_ = true;
    }
    ~DynamicDriver() {
        if (handle_ != nullptr) dlclose(handle_);
    }
    DynamicDriver(const DynamicDriver&) = delete;
    DynamicDriver& operator=(const DynamicDriver&) = delete;

    bool usable() const { return usable_; }
    const std::string& problem() const { return problem_; }
    int driverVersion() const { return driverVersion_; }
    int deviceCount() const { return deviceCount_; }

    // The name of device `ordinal` ("NVIDIA H100 80GB HBM3"), or "" if it cannot be read.
    std::string deviceName(int ordinal) const {
        auto deviceGet = exported<decltype(&::cuDeviceGet)>("cuDeviceGet");
        auto getName = exported<decltype(&::cuDeviceGetName)>("cuDeviceGetName");
        CUdevice device = 0;
        char name[256] = {};
        if (!usable_ || deviceGet == nullptr || getName == nullptr || deviceGet(&device, ordinal) != CUDA_SUCCESS ||
            getName(name, sizeof(name), device) != CUDA_SUCCESS)
            return "";
        return name;
    }

    // Resolves a driver function by its base name ("cuMemAlloc", not "cuMemAlloc_v2")
    // at the ABI of the cuda.h this file was compiled with. nullptr if unavailable.
    template <class Function>
    Function get(const char* symbol) const {
        void* function = nullptr;
        if (getProcAddress_ == nullptr ||
            getProcAddress_(symbol, &function, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT) != CUDA_SUCCESS)
            return nullptr;
        return reinterpret_cast<Function>(function);
    }

    // Looks up an exported symbol by its exact name ("cuMemAlloc_v2"). DRIVER_FUNCTION
    // passes the name cuda.h's macros expand to, which is exactly the ABI cuda.h declares.
    template <class Function>
    Function exported(const char* exactSymbol) const {
        return handle_ == nullptr ? nullptr : reinterpret_cast<Function>(dlsym(handle_, exactSymbol));
    }

    // The driver's name for a code, or the header's fallback table.
    std::string nameOf(CUresult result) const {
        const char* name = nullptr;
        auto getErrorName = get<decltype(&::cuGetErrorName)>("cuGetErrorName");
        if (getErrorName != nullptr && getErrorName(result, &name) == CUDA_SUCCESS && name != nullptr) return name;
        const char* fallback = fallbackErrorName(result);
        return fallback != nullptr ? fallback : "an unnamed CUresult";
    }

private:
    // "CUDA_ERROR_X (code N)", with what it means when the driver is missing or hides every device.
    std::string describe(CUresult result) const {
        std::string text = nameOf(result) + " (code " + std::to_string(static_cast<int>(result)) + ")";
        if (result == CUDA_ERROR_STUB_LIBRARY) text += ": this is NVIDIA's stub libcuda, not a driver";
        if (result == CUDA_ERROR_NO_DEVICE) text += ": the driver sees no CUDA device";
        return text;
    }

    using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cuuint64_t);
    void* handle_ = nullptr;
    GetProcAddressV1 getProcAddress_ = nullptr;
    bool usable_ = false;
    std::string problem_;
    int driverVersion_ = 0;
    int deviceCount_ = 0;
};

// Resolves a driver function with the ABI and type that cuda.h gives the name:
// DRIVER_FUNCTION(driver, cuMemAlloc) is cuMemAlloc_v2. It looks up the *expanded*
// name rather than asking cuGetProcAddress at CUDA_VERSION, because the two can
// differ: CUDA 13's cuda.h still declares cuCtxSynchronize(void), while
// cuGetProcAddress("cuCtxSynchronize", 13000) returns the new cuCtxSynchronize_v2(CUcontext).
#define COURSE_STRINGIFY_EXPANDED(name) COURSE_STRINGIFY_LITERAL(name)
#define COURSE_STRINGIFY_LITERAL(name) #name
#define DRIVER_FUNCTION(driver, name) (driver).exported<decltype(&::name)>(COURSE_STRINGIFY_EXPANDED(name))

}  // namespace course
