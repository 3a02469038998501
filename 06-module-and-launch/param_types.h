// param_types.h — the struct that host and device code both pass to a kernel by value.
//
// Included by kernels/vector_ops.cu (nvcc) and by param_buffer.cpp (g++): both must see the same
// layout, so the type is defined once. float4 comes from vector_types.h (line 390), declared
// __builtin_align__(16); crt/host_defines.h (lines 193-202) turns that into a 16-byte alignment under
// nvcc, GCC, Clang and 64-bit MSVC, and into nothing under any other host compiler. With the
// compilers this course builds with, float4 is 16-byte aligned on the host as on the device.
#pragma once

#include <vector_types.h>

#include <cstddef>

// The classic padding example. f4 must start at a multiple of 16, so 12 bytes of
// padding follow f: f4 is at offset 16, not 4, and the struct is 32 bytes, not 20.
// NVIDIA's Programming Guide (section 3.3.3) calls this struct "not padded at all in host code":
// true for a host compiler that does not see float4's alignment. The static_asserts below
// say what g++ and clang++ do; echoParams reading s.f4 back decides it on the GPU.
struct FloatAndFloat4 {
    float f;
    float4 f4;
};

static_assert(alignof(float4) == 16, "float4 is 16-byte aligned on host and device");
static_assert(offsetof(FloatAndFloat4, f4) == 16, "f4 starts at the next multiple of 16 after f");
static_assert(sizeof(FloatAndFloat4) == 32, "4 bytes f + 12 bytes padding + 16 bytes f4");
static_assert(alignof(FloatAndFloat4) == 16, "a struct is as aligned as its most aligned member");
