// cuda_egl.h — resolving the CUDA side of EGL interop from the driver at run time.
//
// The x86-64 stub libcuda.so that programs link against does not export the cuEGL*
// functions (the real driver does, and an aarch64 Tegra toolkit's stub does too), so
// calling them directly fails to link here. Looking them up with cuGetProcAddress
// (lesson 08) links everywhere and turns "this driver lacks it" into a printed answer:
// resolveDriverFunction, in common/driver_function.h (lesson 27 resolves its OpenGL
// interop functions the same way).
#pragma once

#include "../common/driver_function.h"

