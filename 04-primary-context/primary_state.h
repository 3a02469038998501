// primary_state.h — what lesson 04's programs print about a device's primary context.
#pragma once

#include <cuda.h>

#include <cstdio>

#include "../common/check_driver.h"
#include "../common/context_flags.h"

namespace lesson04 {

// Prints the primary context's state as the driver reports it, labelled with the moment
// ("flags after retain: ...", "active after retain: 1"). Returns the active flag.
inline int showPrimaryState(CUdevice device, const char* moment) {
    unsigned int flags = 0;
    int active = -1;
    CHECK_DRIVER(cuDevicePrimaryCtxGetState(device, &flags, &active));
    std::printf("flags %s: 0x%x (%s)\n", moment, flags, course::describeContextFlags(flags).c_str());
    std::printf("active %s: %d\n", moment, active);
    return active;
}

// "none", "primary", or "another context", for the handle cuCtxGetCurrent gives.
inline const char* describeCurrent(CUcontext current, CUcontext primary) {
    if (current == nullptr) return "none";
    return current == primary ? "primary" : "another context";
}

inline CUcontext currentContext() {
    CUcontext current = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    return current;
}

}  // namespace lesson04
