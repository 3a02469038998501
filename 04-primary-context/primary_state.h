// primary_state.h — what lesson 04's programs print about a device's primary context.
#pragma once

#include <cuda.h>

#include <cstdio>

#include "../common/check_driver.h"
#include "../common/context_flags.h"

namespace lesson04 {

// The primary context's state as cuDevicePrimaryCtxGetState reports it.
struct PrimaryState {
    unsigned int flags = 0;
    int active = -1;
};

// Prints the primary context's state, labelled with the moment ("flags after retain: ...",
// "active after retain: 1"), and returns it so that the caller can check it.
inline PrimaryState showPrimaryState(CUdevice device, const char* moment) {
    PrimaryState state;
    CHECK_DRIVER(cuDevicePrimaryCtxGetState(device, &state.flags, &state.active));
    std::printf("flags %s: 0x%x (%s)\n", moment, state.flags, course::describeContextFlags(state.flags).c_str());
    std::printf("active %s: %d\n", moment, state.active);
    return state;
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
