// two_gpus.h — what both programs of lesson 14 do first: pick two GPUs from the command
// line and stop, saying why, where this machine cannot run the lesson.
#pragma once

#include <climits>
#include <cstdio>
#include <initializer_list>

#include "../common/course_util.h"

namespace lesson14 {

// The two GPUs: --device A (default 0) and --peer B (default: 1, or 0 when A is not 0).
// A value outside int becomes -1, an ordinal no device has, as course::Arguments does.
// Returns false, after a usage message, when both name the same GPU.
inline bool pickOrdinals(const course::Arguments& args, const char* program, int& first, int& second) {
    first = args.deviceOrdinal();
    const long long peer = args.valueOr("--peer", first == 0 ? 1 : 0);
    second = peer < INT_MIN || peer > INT_MAX ? -1 : static_cast<int>(peer);
    if (first != second) return true;
    std::fprintf(stderr, "%s: --device and --peer must name two different GPUs (both are %d)\n", program, first);
    return false;
}

// Step 1: a GPU cannot be its own peer. With fewer than two, print what the program would
// have done and the line make run shows as the reason (the caller exits 77).
inline bool twoGpusPresent(int deviceCount, std::initializer_list<const char*> plan) {
    std::printf("device count: %d\n", deviceCount);
    if (deviceCount >= 2) return true;
    std::printf("on a machine with two GPUs that can access each other, this program would:\n");
    for (const char* step : plan) std::printf("  - %s\n", step);
    std::printf("section peer access: SKIP (one GPU cannot be its own peer)\n");
    std::printf("Result = SKIP (needs two GPUs with peer access; this machine has %d)\n", deviceCount);
    return false;
}

// Step 2: cuDeviceCanAccessPeer answered both ways. Both must be 1: the lesson enables and
// uses each direction. Otherwise print which direction is missing (the caller exits 77).
inline bool peersReachEachOther(int first, int second, int firstToSecond, int secondToFirst) {
    if (firstToSecond && secondToFirst) return true;
    std::printf("section peer access: SKIP (not possible in both directions between GPU %d and GPU %d)\n", first,
                second);
    std::printf(
        "Result = SKIP (needs two GPUs with peer access; cuDeviceCanAccessPeer GPU %d -> GPU %d = %d, "
        "GPU %d -> GPU %d = %d)\n",
        first, second, firstToSecond, second, first, secondToFirst);
    return false;
}

}  // namespace lesson14
