// grow_in_place.h — step 7: a growable buffer keeps its address and its data; and the two
// small helpers the other steps share.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "../common/course_util.h"

// "2 MiB", "1 GiB".
std::string sizeText(size_t bytes);

// Copies `bytes` at `address` back to the host and counts the 32-bit words equal to `word`.
// A copy the driver refuses (an address not mapped, or without access) counts nothing: the
// read-back is part of a check, which then fails with the driver's error on stderr.
size_t wordsEqualTo(CUdeviceptr address, size_t bytes, std::uint32_t word);

// Reserves `reservedBytes` once, maps `firstSize`, and keeps what an application keeps: the
// address, and (asked of the driver) which memory is mapped there. Grows to `lastSize` by
// doubling; after each growth asks the driver again what the kept address maps, and reads every
// earlier chunk back through it. Two checks; then everything is released.
void growInPlace(course::Verdict& verdict, CUdevice device, size_t firstSize, size_t lastSize, size_t reservedBytes);
