// copy_helpers.h — lesson 25's small helpers: the byte patterns every check compares against,
// a whole buffer copied back to the host, and the check line of a part this machine cannot run.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/device_info.h"

namespace lesson25 {

// What every destination holds before a copy or a fill writes it. A copy that writes a byte it
// should not, or misses one it should write, leaves a byte the host model does not expect.
constexpr unsigned char kFill = 0xA5;

// Byte `index` of test data number `seed`: a multiplicative hash, so that neighbouring bytes,
// rows, slices and blocks differ and a byte taken from the wrong place shows. Host code only: the
// checks never ask the driver to compute what they compare against.
inline unsigned char patternByte(size_t index, unsigned seed) {
    const unsigned long long mixed = (index + 1) * 0x9E3779B97F4A7C15ULL + (seed + 1) * 0xBF58476D1CE4E5B9ULL;
    return static_cast<unsigned char>((mixed ^ (mixed >> 29)) >> 53);
}

inline std::vector<unsigned char> pattern(size_t bytes, unsigned seed) {
    std::vector<unsigned char> data(bytes);
    for (size_t i = 0; i < bytes; ++i) data[i] = patternByte(i, seed);
    return data;
}

// Positions where two byte ranges differ.
inline size_t differences(const unsigned char* a, const unsigned char* b, size_t count) {
    size_t different = 0;
    for (size_t i = 0; i < count; ++i) different += a[i] != b[i] ? 1 : 0;
    return different;
}

// Bytes of a range that no longer hold kFill.
inline size_t notFill(const unsigned char* bytes, size_t count) {
    size_t changed = 0;
    for (size_t i = 0; i < count; ++i) changed += bytes[i] != kFill ? 1 : 0;
    return changed;
}

// A tail guard: kTailGuard bytes right after a destination, put there before its copy runs and
// compared after it. They hold test data of their own (seed 1000 + `seed`, one seed for each
// destination), not the fill: what a copy that runs past its end carries there is often the fill
// itself (the rest of a volume around a box, the rest of an array) or another destination's tail
// guard. Each guard byte then differs from what lands on it, except for the 1 in 256 that happen
// to be equal.
constexpr size_t kTailGuard = 4096;

inline std::vector<unsigned char> tailGuard(unsigned seed) {
    return pattern(kTailGuard, 1000 + seed);
}

// Bytes of the tail guard at `after` still equal to `guard`.
inline size_t tailGuardKept(const unsigned char* after, const std::vector<unsigned char>& guard) {
    return guard.size() - differences(after, guard.data(), guard.size());
}

// Queues on `stream` the fill of `bytes` bytes of device memory at `destination`, and `guard`
// right after them. `guard` must live until the stream has run the copy.
inline void fillThenTailGuard(CUdeviceptr destination, size_t bytes, const std::vector<unsigned char>& guard,
                              CUstream stream) {
    CHECK_DRIVER(cuMemsetD8Async(destination, kFill, bytes, stream));
    CHECK_DRIVER(cuMemcpyHtoDAsync(destination + bytes, guard.data(), guard.size(), stream));
}

// `bytes` bytes of device memory, copied to the host (cuMemcpyDtoH waits for the copy).
inline std::vector<unsigned char> download(CUdeviceptr source, size_t bytes) {
    std::vector<unsigned char> host(bytes);
    CHECK_DRIVER(cuMemcpyDtoH(host.data(), source, bytes));
    return host;
}

// A check this machine cannot run (one GPU, no sparse arrays, an older driver): the same
// "check NAME:" label as where it runs, so the expected output has the same lines everywhere,
// with "SKIP (reason)" as its value; it decides nothing (course::Verdict::checkFreeMemory
// prints the same form).
inline void skipCheck(const char* name, const std::string& reason) {
    std::printf("check %s: SKIP (%s)\n", name, reason.c_str());
}

inline const char* yesNo(bool value) {
    return value ? "yes" : "no";
}

}  // namespace lesson25
