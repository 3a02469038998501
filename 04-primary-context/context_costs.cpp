// Lesson 04, program 3 — what each way of getting a context costs.
//
// A cold retain builds the context (as cuCtxCreate does) and the release that drops the
// last reference tears it down; a warm retain, while someone else keeps it active, only
// counts. This is why libraries keep one reference instead of retaining around calls.
// The program checks that claim with a margin: the cold median must be at least
// kColdOverWarm times the warm one (the README's captured H200 run shows how far apart they
// were there). It does not compare cuCtxCreate with a cold retain: those medians are close and
// vary by run.
//
//   context_costs [--device N]           10 runs per measurement
//   context_costs [--device N] --bench   20 runs, and "bench:" lines for make bench
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "primary_state.h"

namespace {

// The check in step 2: a cold retain+release must take at least this many warm ones.
constexpr double kColdOverWarm = 10.0;

// Runs `once` `runs` times and returns the median wall time of one run in microseconds.
// The median ignores the odd run that the OS or the driver makes slow.
template <class Operation>
double medianMicroseconds(int runs, Operation once) {
    std::vector<double> samples;
    for (int i = 0; i < runs; ++i) {
        const auto start = std::chrono::steady_clock::now();
        once();
        const auto stop = std::chrono::steady_clock::now();
        samples.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
    }
    std::sort(samples.begin(), samples.end());
    const size_t middle = samples.size() / 2;
    return samples.size() % 2 == 1 ? samples[middle] : (samples[middle - 1] + samples[middle]) / 2.0;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const bool bench = args.has("--bench");
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    // Step 1: a cold retain is only cold if nobody holds the context yet.
    course::printStep(1, "the primary context starts inactive");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    verdict.check("primary context inactive at start", lesson04::showPrimaryState(device, "at start").active == 0);

    // Step 2: the three timings, each a median of several runs of wall-clock time.
    course::printStep(2, "what a context costs");
    const int runs = bench ? 20 : 10;
    std::printf("runs per measurement: %d (median)\n", runs);
    const double createDestroy = medianMicroseconds(runs, [device] {
        CUcontext context = nullptr;
        CHECK_DRIVER(course::ctxCreate(&context, CU_CTX_SCHED_AUTO, device));
        CHECK_DRIVER(cuCtxDestroy(context));  // it was pushed by creation; destroy pops it
    });
    const double coldRetain = medianMicroseconds(runs, [device] {
        CUcontext context = nullptr;
        CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    });
    CUcontext keeper = nullptr;  // one reference held across the warm runs
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&keeper, device));
    const double warmRetain = medianMicroseconds(runs, [device] {
        CUcontext context = nullptr;
        CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    });
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("cuCtxCreate + cuCtxDestroy: %.1f us\n", createDestroy);
    std::printf("retain + release, cold (activates and tears down): %.1f us\n", coldRetain);
    std::printf("retain + release, warm (already active): %.1f us\n", warmRetain);
    if (bench) {
        std::printf("bench: cuCtxCreate+cuCtxDestroy = %.1f us\n", createDestroy);
        std::printf("bench: primary retain+release cold = %.1f us\n", coldRetain);
        std::printf("bench: primary retain+release warm = %.2f us\n", warmRetain);
    }
    // A timing check, so medians and a margin. Had a reference been held during the cold
    // runs (or none during the warm ones), both would measure the same thing and this fails.
    std::printf("cold must take at least: %.0f times warm (medians)\n", kColdOverWarm);
    verdict.check("cold retain slower than warm by the margin", coldRetain >= kColdOverWarm * warmRetain);

    // Step 3: every retain was released, so nothing is left active.
    course::printStep(3, "check");
    verdict.check("inactive after the timing runs",
                  lesson04::showPrimaryState(device, "after the timing runs").active == 0);
    return verdict.finish();
}
