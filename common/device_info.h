// device_info.h — two lines every program of some lessons starts with: the device's name, and
// one attribute read through the course's check macro.
#pragma once

#include <cuda.h>

#include <cstdio>

#include "check_driver.h"

namespace course {

// "device N name: NAME" (cuDeviceGetName): the stable label the lessons' tests read.
inline void printDeviceName(int ordinal, CUdevice device) {
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", ordinal, name);
}

inline int deviceAttribute(CUdevice device, CUdevice_attribute attribute) {
    int value = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&value, attribute, device));
    return value;
}

}  // namespace course
