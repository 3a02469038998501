// tensor_maps.h — lesson 20's helpers: may this build, this driver and this GPU use tensor
// maps; the module with the kernels; one 2-D tensor map of a row-major float matrix (the call
// that encode_rules builds argument by argument); event timing; a copy back from the GPU.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace lesson20 {

// CUtensorMap and cuTensorMapEncodeTiled came with the CUDA 12.0 headers and driver; the
// copy engine that reads tensor maps with compute capability 9.0 (cuda.h: "Tensor map objects
// are only supported on devices of compute capability 9.0 or higher").
constexpr int kVersionNeeded = 12000;
constexpr int kCapabilityNeeded = 90;

// Step 1 of every program: the device, its compute capability, the header and driver versions.
// Prints the "section ... : SKIP" and "Result = SKIP" lines and returns false where tensor maps
// cannot be used: then the program exits 77.
inline bool tensorMapsUsable(CUdevice device, int ordinal) {
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
    std::string reason;
    if (CUDA_VERSION < kVersionNeeded)
        reason = "built with CUDA " + course::formatCudaVersion(CUDA_VERSION) + " headers; tensor maps need 12.0";
    else if (driverVersion < kVersionNeeded)
        reason = "the driver supports CUDA " + course::formatCudaVersion(driverVersion) + "; tensor maps need 12.0";
    else if (10 * major + minor < kCapabilityNeeded)
        reason = "tensor maps need compute capability 9.0; this GPU has " + std::to_string(major) + "." +
                 std::to_string(minor);
    if (reason.empty()) return true;
    std::printf("section tensor maps: SKIP (%s)\n", reason.c_str());
    std::printf("Result = SKIP (%s)\n", reason.c_str());
    return false;
}

// The kernels come from the fatbin: sm_90 code for compute capability 9.0, and PTX (of the
// newest architecture the course builds for) that the driver can compile for a newer GPU; which
// entry it loads, cuda.h does not say. The cubin holds code for one GPU only, and the .ptx file,
// built for the oldest architecture (compute_75), has nothing but __trap() in these kernels.
inline CUmodule loadKernels() {
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("tensor_map_kernels.fatbin").c_str()));
    return module;
}

// Milliseconds per run of `enqueue` (which queues work on the null stream), from events
// recorded around `runs` runs after one untimed run (a caller's own untimed run comes on top).
template <typename Enqueue>
double millisecondsPerRun(int runs, const Enqueue& enqueue) {
    CUevent start = nullptr;
    CUevent stop = nullptr;
    CHECK_DRIVER(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    enqueue();
    CHECK_DRIVER(cuEventRecord(start, nullptr));
    for (int i = 0; i < runs; ++i) enqueue();
    CHECK_DRIVER(cuEventRecord(stop, nullptr));
    CHECK_DRIVER(cuEventSynchronize(stop));
    float milliseconds = 0.0f;
    CHECK_DRIVER(cuEventElapsedTime(&milliseconds, start, stop));
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    return static_cast<double>(milliseconds) / runs;
}

// The whole buffer, copied back to the host.
template <typename T>
std::vector<T> copyBack(CUdeviceptr buffer, size_t count) {
    std::vector<T> host(count);
    CHECK_DRIVER(cuMemcpyDtoH(host.data(), buffer, count * sizeof(T)));
    return host;
}

// The kernels' count of blocks that gave up waiting for their box (kWaitDeadlineNs,
// tile_shape.h), as it stands after the launches since it was last cleared.
inline unsigned int lateBlocks(CUdeviceptr counter) {
    return copyBack<unsigned int>(counter, 1)[0];
}

#if CUDA_VERSION >= 12000
// A 2-D tensor map of a row-major float matrix: `cols` x `rows` elements starting at `base`,
// rows `rowBytes` apart, boxes of boxCols x boxRows elements, every element of the box read
// (element strides 1), no interleave, 128-byte L2 promotion. encode_rules explains each argument.
inline CUresult encodeFloatMatrix(CUtensorMap* map, CUdeviceptr base, cuuint64_t cols, cuuint64_t rows,
                                  cuuint64_t rowBytes, cuuint32_t boxCols, cuuint32_t boxRows,
                                  CUtensorMapSwizzle swizzle, CUtensorMapFloatOOBfill fill) {
    const cuuint64_t globalDim[2] = {cols, rows};  // dimension 0 first: the contiguous one
    const cuuint64_t globalStrides[1] = {rowBytes};
    const cuuint32_t boxDim[2] = {boxCols, boxRows};
    const cuuint32_t elementStrides[2] = {1, 1};
    return cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, reinterpret_cast<void*>(base), globalDim,
                                  globalStrides, boxDim, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, fill);
}
#endif

}  // namespace lesson20
