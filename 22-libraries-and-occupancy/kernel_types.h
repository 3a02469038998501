// kernel_types.h — what lesson 22's kernel files and host programs must agree on: a parameter
// type, array sizes and the layout of the occupancy counters. Included by nvcc (kernels/*.cu)
// and by g++ (the programs), so it holds plain C++ only.
#pragma once

namespace lesson22 {

// The fourth parameter of mixedParams: 4 bytes of float, 4 of padding, 8 of double
// (alignof 8, sizeof 16 on every platform the course builds for).
struct FloatAndDouble {
    float f;
    double d;
};

// reverseTile: __launch_bounds__(kBoundedThreads) and a static __shared__ float[kTileFloats].
constexpr int kBoundedThreads = 256;
constexpr int kTileFloats = 256;

// The occupancy kernels count blocks per SM identifier (%smid) in one array of unsigned ints:
//   [kCurrent + sm]  blocks on SM sm now          [kPeak + sm]  the most seen there at once
//   [kOutOfRange]    blocks whose %smid was >= kMaxSmIds (then they were not counted per SM)
//   [kSmIdCount]     %nsmid, the number of SM identifiers (the PTX ISA manual, not a CUDA
//                    header, says the identifiers need not be contiguous, so it may exceed the
//                    SM count; it equalled the SM count in the README's captured run)
//   [kClustersNow], [kClustersPeak], [kClustersDone]  the same for whole clusters
constexpr unsigned int kMaxSmIds = 1024;
constexpr unsigned int kCurrent = 0;
constexpr unsigned int kPeak = kMaxSmIds;
constexpr unsigned int kOutOfRange = 2 * kMaxSmIds;
constexpr unsigned int kSmIdCount = kOutOfRange + 1;
constexpr unsigned int kClustersNow = kOutOfRange + 2;
constexpr unsigned int kClustersPeak = kOutOfRange + 3;
constexpr unsigned int kClustersDone = kOutOfRange + 4;
constexpr unsigned int kCounterWords = kOutOfRange + 5;

// residentHeavy keeps this many floats per thread in registers while its block is resident.
constexpr int kHeavyValues = 64;

}  // namespace lesson22
