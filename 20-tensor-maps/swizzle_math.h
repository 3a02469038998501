// swizzle_math.h — where CU_TENSOR_MAP_SWIZZLE_128B puts a byte of a tile in shared memory,
// what that does to a warp's shared-memory banks, and the banks' limit per clock. Arithmetic
// only, no driver calls, so a CPU test checks it; swizzle_bench checks the formula against the
// copy engine on the GPU.
#pragma once

#include <algorithm>
#include <array>

namespace lesson20 {

// cuda.h: CU_TENSOR_MAP_SWIZZLE_128B swizzles "16B chunks within 128B span". Within the tile,
// rows of 128 bytes, the 16-byte chunk index (offset bits 4-6) is XORed with the row's position
// in a group of 8 rows (offset bits 7-9): the pattern repeats every 1024 bytes. It holds for
// offsets from a 1024-byte boundary, so the tile starts on one.
constexpr unsigned int swizzle128(unsigned int byteOffset) {
    return byteOffset ^ (((byteOffset >> 7) & 7u) << 4);
}

// Shared memory has 32 banks of 4 bytes: word w (byte offset / 4) is in bank w % 32.
constexpr unsigned int kBanks = 32;

// One warp-wide read of the demo: lane l reads the 16 bytes (4 words) of chunk `chunk` of row l
// of a tile with 128-byte rows, at the swizzled place or not. Returns the most words any one bank
// must deliver: the passes the read needs at least (a bank delivers one word per pass). 32 lanes
// x 4 words over 32 banks need at least 4.
inline unsigned int busiestBankWords(unsigned int chunk, bool swizzled) {
    std::array<unsigned int, kBanks> words{};
    for (unsigned int lane = 0; lane < 32; ++lane) {
        const unsigned int offset = lane * 128 + chunk * 16;
        const unsigned int placed = swizzled ? swizzle128(offset) : offset;
        for (unsigned int word = 0; word < 4; ++word) ++words[(placed / 4 + word) % kBanks];
    }
    return *std::max_element(words.begin(), words.end());
}

// The most a shared memory delivers: every bank one 4-byte word per clock (CUDA C++ Programming
// Guide: "Each bank has a bandwidth of 32 bits per clock cycle"), 128 bytes per clock and SM.
constexpr double kSharedBytesPerClock = kBanks * 4.0;

// A measured rate in the same units: `bytes` read from shared memory by all SMs in
// `milliseconds`, at an SM clock of `clockKHz`.
constexpr double bytesPerClockPerSm(double bytes, double milliseconds, double clockKHz, int smCount) {
    return bytes / (milliseconds / 1e3) / (clockKHz * 1e3) / smCount;
}

}  // namespace lesson20
