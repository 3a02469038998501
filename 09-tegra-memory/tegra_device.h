// tegra_device.h — small helpers the programs of lesson 09 share.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

#include "../common/check_driver.h"

namespace tegra {

// One device attribute (cuDeviceGetAttribute needs no context).
inline int attribute(CUdevice device, CUdevice_attribute which) {
    int value = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&value, which, device));
    return value;
}

// Jetson and DRIVE boards describe their SoC in the device tree as "nvidia,tegra...".
inline bool runningOnTegraSoc() {
    std::ifstream compatible("/proc/device-tree/compatible", std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(compatible)), std::istreambuf_iterator<char>());
    return text.find("nvidia,tegra") != std::string::npos;
}

// A managed allocation is one address for CPU and GPU: the CUdeviceptr is also a host pointer.
inline int* hostView(CUdeviceptr managed) {
    return reinterpret_cast<int*>(static_cast<std::uintptr_t>(managed));
}

inline double gib(std::uint64_t bytes) {
    return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
}

inline const char* yesNo(bool value) {
    return value ? "yes" : "no";
}

}  // namespace tegra
