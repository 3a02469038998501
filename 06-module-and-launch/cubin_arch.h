// cubin_arch.h — can the lesson's cubin run on this GPU? Arithmetic only, no driver calls,
// so a CPU test checks the rule with known numbers.
#pragma once

// The SM that kernels/vector_ops.cubin was built for: lesson.mk passes the Makefile's
// CUBIN_ARCH (by default the GPU present when the lesson was built).
#ifndef LESSON06_CUBIN_ARCH
#define LESSON06_CUBIN_ARCH 90
#endif

namespace lesson06 {

constexpr int kCubinArch = LESSON06_CUBIN_ARCH;

// SASS is binary compatible within one major compute capability, upwards only: a cubin
// for sm_80 runs on 8.0, 8.6 and 8.9, not on 7.5 and not on 9.0 ("Binary Compatibility"
// in the CUDA C++ Programming Guide). `cubinArch` is the SM number: 86 for sm_86.
constexpr bool cubinRunsOn(int cubinArch, int ccMajor, int ccMinor) {
    return ccMajor == cubinArch / 10 && ccMinor >= cubinArch % 10;
}

}  // namespace lesson06
