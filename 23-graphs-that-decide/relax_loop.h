// relax_loop.h — conditionals' loop data and its benchmark: the relaxation the WHILE graph and
// the host-driven loop both run, the host's own count of the sweeps it needs, and the timing of
// both ways (--bench).
#pragma once

#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace lesson23 {

constexpr int kLoopCount = 1 << 16;          // ints the loop relaxes
constexpr int kStep = 4;                     // how far one sweep moves an element, at most
constexpr unsigned int kMaxSweeps = 100000;  // decide_again and the host loop stop here whatever happens

// The relaxation's data: targets t and start values v, each v[i] at most sweeps * kStep away
// from t[i], and v[0] exactly that far, so that the loop needs `sweeps` sweeps.
struct LoopData {
    std::vector<int> start, target;
};

inline LoopData makeLoopData(int sweeps) {
    LoopData data{std::vector<int>(kLoopCount), std::vector<int>(kLoopCount)};
    const int reach = sweeps * kStep;
    unsigned int state = 12345u;
    for (int i = 0; i < kLoopCount; ++i) {
        state = state * 1664525u + 1013904223u;  // a fixed pseudo-random sequence
        data.target[i] = static_cast<int>(state >> 20) - 2048;
        const int offset = static_cast<int>(state % static_cast<unsigned int>(2 * reach + 1)) - reach;
        data.start[i] = data.target[i] + (i == 0 ? reach : offset);
    }
    return data;
}

// The host's count, from the data alone: element i needs ceil(|v[i] - t[i]| / kStep) sweeps, and
// the loop runs until the slowest has arrived, but at least once (the WHILE's value starts at 1).
inline unsigned int sweepsNeeded(const LoopData& data) {
    unsigned int most = 1;
    for (int i = 0; i < kLoopCount; ++i) {
        const unsigned int distance = static_cast<unsigned int>(std::abs(data.start[i] - data.target[i]));
        most = std::max(most, (distance + kStep - 1) / kStep);
    }
    return most;
}

// The host's count of the elements at their target after `sweeps` sweeps (those that need no more).
inline size_t arrivedWithin(const LoopData& data, unsigned int sweeps) {
    size_t arrived = 0;
    for (int i = 0; i < kLoopCount; ++i) {
        const unsigned int distance = static_cast<unsigned int>(std::abs(data.start[i] - data.target[i]));
        arrived += (distance + kStep - 1) / kStep <= sweeps ? 1 : 0;
    }
    return arrived;
}

// Start values into v, on the stream (a copy that the following work is ordered after).
inline void loadStart(CUstream stream, CUdeviceptr v, const LoopData& data) {
    CHECK_DRIVER(cuMemcpyHtoDAsync(v, data.start.data(), kLoopCount * sizeof(int), stream));
}

// Median wall-clock microseconds of `runs` runs of `loop` (after one untimed run), each after
// the start values are loaded (not timed). Every run must need `expected` sweeps, else `agreed`
// becomes false.
template <class Loop>
double medianMicroseconds(int runs, unsigned int expected, bool& agreed, CUstream stream, CUdeviceptr v,
                          const LoopData& data, Loop loop) {
    std::vector<double> samples;
    for (int run = -1; run < runs; ++run) {
        loadStart(stream, v, data);
        CHECK_DRIVER(cuStreamSynchronize(stream));
        const auto start = std::chrono::steady_clock::now();
        const unsigned int sweeps = loop();
        const auto end = std::chrono::steady_clock::now();
        agreed = agreed && sweeps == expected;
        if (run >= 0) samples.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    return course::median(samples);
}

// --bench: loops of 100 and 1000 sweeps, each timed both ways (graphLoop() and hostLoop() run the
// loop on the data in v and t and return the sweeps it took); a table and "bench:" lines. Returns
// whether every timed run needed the host's count of sweeps.
template <class GraphLoop, class HostLoop>
bool benchLoops(CUstream stream, CUdeviceptr v, CUdeviceptr t, GraphLoop graphLoop, HostLoop hostLoop) {
    constexpr int kRuns = 21;
    std::printf(
        "method: %d timed runs after 1 untimed, medians of wall-clock time from the first call until the "
        "sweep count is on the host (the graph: cuGraphLaunch, cuStreamSynchronize and one 8-byte copy; "
        "the host loop: its launches, copies and waits); start values copied in before the clock starts\n",
        kRuns);
    std::printf("| sweeps | one graph | per sweep | host-driven | per sweep | host / graph |\n");
    std::printf("| --- | --- | --- | --- | --- | --- |\n");
    bool agreed = true;
    for (int sweeps : {100, 1000}) {
        const LoopData data = makeLoopData(sweeps);
        const unsigned int need = sweepsNeeded(data);
        CHECK_DRIVER(cuMemcpyHtoDAsync(t, data.target.data(), kLoopCount * sizeof(int), stream));
        const double graphUs = medianMicroseconds(kRuns, need, agreed, stream, v, data, graphLoop);
        const double hostUs = medianMicroseconds(kRuns, need, agreed, stream, v, data, hostLoop);
        // Each figure computed once: the table and the "bench:" lines print the same values.
        const double graphPerSweep = graphUs / need, hostPerSweep = hostUs / need, ratio = hostUs / graphUs;
        std::printf("| %u | %.1f us | %.2f us | %.1f us | %.2f us | %.1f x |\n", need, graphUs, graphPerSweep, hostUs,
                    hostPerSweep, ratio);
        std::printf("bench: per sweep, one conditional graph, %u sweeps = %.2f us\n", need, graphPerSweep);
        std::printf("bench: per sweep, host-driven loop, %u sweeps = %.2f us\n", need, hostPerSweep);
        std::printf("bench: host-driven / conditional graph, %u sweeps = %.1f x\n", need, ratio);
    }
    return agreed;
}

}  // namespace lesson23
