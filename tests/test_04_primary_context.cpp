#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "04-primary-context";

bool startsWith(const std::optional<std::string>& value, const std::string& prefix) {
    return value && value->rfind(prefix, 0) == 0;
}

// The primary context's state as the driver reports it.
struct PrimaryState {
    unsigned int flags = 0;
    int active = -1;
};

PrimaryState primaryState(CUdevice device) {
    PrimaryState state;
    DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxGetState)(device, &state.flags, &state.active);
    return state;
}

CUcontext currentContext() {
    CUcontext current = nullptr;
    DRIVER_FUNCTION(driver(), cuCtxGetCurrent)(&current);
    return current;
}

CUdevice firstDevice() {
    CUdevice device = 0;
    DRIVER_FUNCTION(driver(), cuDeviceGet)(&device, 0);
    return device;
}

// Every check each program prints, by name ("check NAME: ok"). A check printed once per
// worker thread appears twice in the output.
const std::map<std::string, std::vector<std::string>> kChecks = {
    {"retain_release",
     {"primary context inactive at start", "nothing current at start", "flags recorded before activation",
      "setting the flags does not activate it", "active after retain", "retain leaves the current context unchanged",
      "primary current after cuCtxSetCurrent", "context created with the flags set before activation",
      "second retain returns the same handle", "still active with one reference left",
      "the context and its allocation outlive a release that is not the last",
      "the value written before the release is still there", "nothing current before the last release",
      "inactive after the last release", "flags back at their start value after the last release"}},
    {"shared_by_threads",
     {"active after the main thread's retain", "every driver call on the worker thread succeeded",
      "a new thread starts with nothing current", "the thread's retain returns the main thread's handle",
      "the context is current on the thread while it uses it", "the main thread's reference keeps it active",
      "one primary context per device", "inactive after the main thread's release"}},
    {"context_costs",
     {"primary context inactive at start", "cold retain slower than warm by the margin",
      "inactive after the timing runs"}},
    {"reset",
     {"active before the reset", "reset deactivates it while a reference is held", "release after the reset succeeds",
      "inactive at the end", "nothing current at the end"}},
};

}  // namespace

// ---------------------------------------------------------------------------
// The lesson's output: four programs, run in this order by make run-04.

const std::vector<std::string> kPrograms = {"retain_release", "shared_by_threads", "context_costs", "reset"};

TEST_CASE("Lesson 04 runs its four programs in order", "[cpu][lesson04]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Lesson 04's programs print each of their named checks, all held, and no others", "[gpu][lesson04]") {
    requireGpu();
    for (const auto& program : kPrograms) {
        INFO(program);
        const RunResult r = defaultRun(kLesson, program);
        attachToReport(r);
        CHECK(r.exitCode == 0);
        CHECK(contains(r.out, "Result = PASS"));
        CHECK_FALSE(contains(r.out, ": FAIL"));
        // Exactly the named checks, each held.
        std::set<std::string> printed;
        for (const auto& line : lines(r.out))
            if (line.rfind("check ", 0) == 0) printed.insert(line.substr(6, line.rfind(": ") - 6));
        const std::vector<std::string> expected = kChecks.at(program);
        CHECK(printed == std::set<std::string>(expected.begin(), expected.end()));
        for (const auto& check : expected) {
            INFO("check " << check);
            const auto values = valuesOf(r.out, "check " + check);
            CHECK_FALSE(values.empty());
            for (const auto& value : values) CHECK(value == "ok");
        }
    }
    // The two worker threads each report their own checks.
    const RunResult threads = defaultRun(kLesson, "shared_by_threads");
    CHECK(valuesOf(threads.out, "check every driver call on the worker thread succeeded").size() == 2);
}

TEST_CASE("Lesson 04 gets the same primary context from two retains and from two threads", "[gpu][lesson04]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "retain_release");
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "second retain") == "same handle");
    const RunResult threads = defaultRun(kLesson, "shared_by_threads");
    CHECK(threads.exitCode == 0);
    CHECK(contains(threads.out, "Result = PASS"));
    for (const std::string thread : {"thread 1", "thread 2"}) {
        INFO(thread);
        CHECK(valueOf(threads.out, thread + " current context at start") == "none");
        CHECK(startsWith(valueOf(threads.out, thread + " handle"), "same as the main thread's"));
        CHECK(valueOf(threads.out, thread + " current context while using it") == "primary");
        CHECK(valueOf(threads.out, thread + " first failed driver call") == "none");
    }
}

TEST_CASE("Lesson 04's primary context goes from inactive to active and back as it is retained and released",
          "[gpu][lesson04]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "retain_release");
    CHECK(r.exitCode == 0);
    CHECK(valueOf(r.out, "active at start") == "0");
    CHECK(valueOf(r.out, "active after cuDevicePrimaryCtxSetFlags") == "0");
    CHECK(valueOf(r.out, "active after retain") == "1");
    CHECK(valueOf(r.out, "active after second retain") == "1");
    CHECK(valueOf(r.out, "active after one release") == "1");
    // A release that is not the last leaves the very context: it still owns step 4's buffer, and
    // every word of it keeps its value. (Being current would hold after a reset too: not asserted.)
    CHECK(valueOf(r.out, "CU_POINTER_ATTRIBUTE_CONTEXT of the buffer after one release") == "primary");
    CHECK(valueOf(r.out, "words still holding 0x4c0ffee after one release") == "262144 of 262144");
    CHECK(valueOf(r.out, "active after final release") == "0");
    const RunResult threads = defaultRun(kLesson, "shared_by_threads");
    CHECK(threads.exitCode == 0);
    CHECK(valueOf(threads.out, "active after retain") == "1");
    CHECK(valueOf(threads.out, "active after the threads released") == "1");
    CHECK(valueOf(threads.out, "active at the end") == "0");
    const RunResult costs = defaultRun(kLesson, "context_costs");
    CHECK(costs.exitCode == 0);
    CHECK(valueOf(costs.out, "active at start") == "0");
    CHECK(valueOf(costs.out, "active after the timing runs") == "0");
    const RunResult reset = defaultRun(kLesson, "reset");
    CHECK(reset.exitCode == 0);
    CHECK(valueOf(reset.out, "active at the end") == "0");
}

TEST_CASE("Lesson 04 shows that retaining leaves the current context unchanged", "[gpu][lesson04]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "retain_release");
    CHECK(r.exitCode == 0);
    CHECK(valueOf(r.out, "current context at start") == "none");
    CHECK(valueOf(r.out, "current context before retain") == "none");
    CHECK(valueOf(r.out, "current context after retain") == "none");
    CHECK(valueOf(r.out, "check retain leaves the current context unchanged") == "ok");
    CHECK(valueOf(r.out, "current context after cuCtxSetCurrent") == "primary");
    CHECK(valueOf(r.out, "current context after cuCtxSetCurrent(NULL)") == "none");
    const RunResult reset = defaultRun(kLesson, "reset");
    CHECK(reset.exitCode == 0);
    CHECK(valueOf(reset.out, "current context at the end") == "none");
}

TEST_CASE("Lesson 04's primary context starts with the flags set before activation", "[gpu][lesson04]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "retain_release");
    CHECK(r.exitCode == 0);
    CHECK(startsWith(valueOf(r.out, "flags after cuDevicePrimaryCtxSetFlags"), "0x4 (CU_CTX_SCHED_BLOCKING_SYNC"));
    CHECK(startsWith(valueOf(r.out, "flags after retain"), "0x4 (CU_CTX_SCHED_BLOCKING_SYNC"));
    CHECK(contains(valueOf(r.out, "cuCtxGetFlags in the primary context").value_or(""), "CU_CTX_SCHED_BLOCKING_SYNC"));
    // The last release resets the context, flags included: back to what they were at the start.
    CHECK(valueOf(r.out, "flags after final release") == valueOf(r.out, "flags at start"));
}

TEST_CASE("Lesson 04 resets the primary context and may still release it afterwards", "[gpu][lesson04]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "reset");
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "active before reset") == "1");
    CHECK(valueOf(r.out, "active after reset") == "0");
    CHECK(valueOf(r.out, "cuDevicePrimaryCtxRelease after reset") == "CUDA_SUCCESS");
}

TEST_CASE("Lesson 04 prints its three timings and walks every device", "[gpu][lesson04]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "context_costs");
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "runs per measurement") == "10 (median)");
    // The one timing check is decided with a stated margin, on medians.
    CHECK(valueOf(r.out, "cold must take at least") == "10 times warm (medians)");
    CHECK(valueOf(r.out, "check cold retain slower than warm by the margin") == "ok");
    // Timings vary from run to run: no figure is required, but each is a positive number of
    // microseconds, and the printed medians must agree with the verdict printed beside them
    // (a program that printed one median under another's label, or decided on other numbers
    // than it printed, fails here).
    std::vector<double> medians;
    for (const std::string label : {"cuCtxCreate + cuCtxDestroy", "retain + release, cold (activates and tears down)",
                                    "retain + release, warm (already active)"}) {
        INFO(label);
        const auto value = valueOf(r.out, label);
        REQUIRE(value);
        REQUIRE(value->size() > 3);
        CHECK(value->substr(value->size() - 3) == " us");
        medians.push_back(std::stod(value->substr(0, value->size() - 3)));
        CHECK(medians.back() > 0.0);
    }
    // Printed with one decimal: a warm median below 0.05 us prints as 0.0, which any cold one passes.
    CHECK(medians[1] >= 10.0 * medians[2]);
    const RunResult threads = defaultRun(kLesson, "shared_by_threads");
    CHECK(threads.exitCode == 0);
    const int count = driver().deviceCount();
    CHECK(valueOf(threads.out, "device count") == std::to_string(count));
    for (int d = 0; d < count; ++d) {
        INFO("device " << d);
        CHECK(contains(valueOf(threads.out, "device " + std::to_string(d) + " primary context").value_or(""),
                       "active while retained: 1"));
    }
    if (count == 1) {
        CHECK(valueOf(threads.out, "primary contexts of different devices") == "n/a (one device on this machine)");
    } else {
        CHECK(valueOf(threads.out, "primary contexts of different devices") == "all distinct");
    }
}

TEST_CASE("Lesson 04 --bench prints bench lines for make bench", "[gpu][lesson04]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench"};
    const RunResult r = runLesson(kLesson, options, "context_costs");
    CHECK(r.exitCode == 0);
    CHECK(valueOf(r.out, "runs per measurement") == "20 (median)");
    CHECK(contains(r.out, "bench: cuCtxCreate+cuCtxDestroy = "));
    CHECK(contains(r.out, "bench: primary retain+release cold = "));
    CHECK(contains(r.out, "bench: primary retain+release warm = "));
    CHECK(valueOf(r.out, "check cold retain slower than warm by the margin") == "ok");
    // Each bench line carries the median printed above it (the same run, the same number).
    const auto printed = [&r](const std::string& label) {
        const std::string value = valueOf(r.out, label).value_or("-1 us");
        return std::stod(value.substr(0, value.find(' ')));
    };
    const double create = benchValue(r.out, "cuCtxCreate+cuCtxDestroy");
    const double cold = benchValue(r.out, "primary retain+release cold");
    const double warm = benchValue(r.out, "primary retain+release warm");
    CHECK(create == printed("cuCtxCreate + cuCtxDestroy"));
    CHECK(cold == printed("retain + release, cold (activates and tears down)"));
    // The warm bench line has two decimals, the plain line one: they agree to within rounding.
    CHECK(std::abs(warm - printed("retain + release, warm (already active)")) <= 0.051);
    CHECK(cold >= 10.0 * warm);
}

TEST_CASE("Lesson 04 rejects an unknown argument with a usage line and exit 2", "[cpu][lesson04]") {
    // Arguments are parsed before any driver call; the stub only lets the program load.
    const std::vector<std::vector<std::string>> badCommandLines = {{"--bogus"}, {"--device"}, {"--device", "one"}};
    for (const auto& program : kPrograms) {
        for (const auto& args : badCommandLines) {
            const RunResult r = checkRefusesArguments(kLesson, args, program);
            CHECK(contains(r.err, "--device N"));
            if (program == "context_costs") CHECK(contains(r.err, "--bench"));
        }
    }
    // --bench belongs to the timing program only.
    CHECK(runAgainstStub(kLesson, {"--bench"}, "retain_release").exitCode == 2);
}

// ---------------------------------------------------------------------------
// The same driver behaviour, checked directly. Other tests in this process may hold
// the primary context too, so states are compared with what they were before.

TEST_CASE("Retaining the primary context twice gives one handle, active until the last release", "[gpu][lesson04]") {
    requireGpu();
    auto retain = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxRetain);
    auto release = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxRelease);
    REQUIRE(retain);
    REQUIRE(release);
    const CUdevice device = firstDevice();
    const PrimaryState before = primaryState(device);
    INFO("active before this test: " << before.active);

    CUcontext first = nullptr;
    CUcontext second = nullptr;
    REQUIRE(retain(&first, device) == CUDA_SUCCESS);
    CHECK(primaryState(device).active == 1);
    REQUIRE(retain(&second, device) == CUDA_SUCCESS);
    CHECK(first != nullptr);
    CHECK(second == first);
    REQUIRE(release(device) == CUDA_SUCCESS);
    CHECK(primaryState(device).active == 1);  // one reference left
    REQUIRE(release(device) == CUDA_SUCCESS);
    // Back to where it was: inactive, when this test held the only references.
    CHECK(primaryState(device).active == before.active);
}

TEST_CASE("A retain and release that are not the last keep the primary context, its memory and its contents",
          "[gpu][lesson04]") {
    requireGpu();
    auto retain = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxRetain);
    auto release = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxRelease);
    auto setCurrent = DRIVER_FUNCTION(driver(), cuCtxSetCurrent);
    auto memAlloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
    auto memsetD32 = DRIVER_FUNCTION(driver(), cuMemsetD32);
    auto copyDtoH = DRIVER_FUNCTION(driver(), cuMemcpyDtoH);
    auto pointerAttribute = DRIVER_FUNCTION(driver(), cuPointerGetAttribute);
    REQUIRE((retain && release && setCurrent && memAlloc && memFree && memsetD32 && copyDtoH && pointerAttribute));
    const CUdevice device = firstDevice();
    constexpr unsigned int kPattern = 0x04c0ffee;
    constexpr size_t kWords = 1024;
    // A direct test of the driver, not of the lesson: it calls the driver itself, so no mutant
    // of the lesson can make it fail. On a thread of its own, so that this test process's
    // current context stays as it was; the worker records, this thread asserts. The thread's
    // current context is not asserted: a release never pops, so it would hold after a reset too.
    CUcontext primary = nullptr;
    CUcontext again = nullptr;
    CUcontext owner = nullptr;
    CUresult ownerResult = CUDA_ERROR_UNKNOWN;
    CUresult readResult = CUDA_ERROR_UNKNOWN;
    CUresult freeResult = CUDA_ERROR_UNKNOWN;
    std::vector<unsigned int> words(kWords, 0);
    bool prepared = false;
    std::thread([&] {
        if (retain(&primary, device) != CUDA_SUCCESS) return;
        CUdeviceptr buffer = 0;
        if (setCurrent(primary) == CUDA_SUCCESS && memAlloc(&buffer, kWords * sizeof(unsigned int)) == CUDA_SUCCESS) {
            prepared = memsetD32(buffer, kPattern, kWords) == CUDA_SUCCESS;
            // Three pairs, none of them the last release: this thread's first reference stays,
            // and nothing else allocates here, so the pointer query can tell.
            for (int i = 0; i < 3 && prepared; ++i)
                prepared = retain(&again, device) == CUDA_SUCCESS && release(device) == CUDA_SUCCESS;
            ownerResult = pointerAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, buffer);
            if (ownerResult == CUDA_SUCCESS && owner == primary)
                readResult = copyDtoH(words.data(), buffer, kWords * sizeof(unsigned int));
            freeResult = memFree(buffer);
        }
        setCurrent(nullptr);
        release(device);
    }).join();
    REQUIRE(prepared);
    CHECK(again == primary);
    CHECK(ownerResult == CUDA_SUCCESS);
    CHECK(owner == primary);
    CHECK(readResult == CUDA_SUCCESS);
    CHECK(std::count(words.begin(), words.end(), kPattern) == static_cast<std::ptrdiff_t>(kWords));
    CHECK(freeResult == CUDA_SUCCESS);
}

TEST_CASE("Retaining the primary context leaves the calling thread's current context unchanged", "[gpu][lesson04]") {
    requireGpu();
    auto retain = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxRetain);
    auto release = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxRelease);
    auto setCurrent = DRIVER_FUNCTION(driver(), cuCtxSetCurrent);
    REQUIRE(retain);
    REQUIRE(release);
    REQUIRE(setCurrent);
    const CUdevice device = firstDevice();
    // On a new thread nothing is current; the worker records, this thread asserts.
    CUcontext beforeRetain = reinterpret_cast<CUcontext>(1);
    CUcontext afterRetain = reinterpret_cast<CUcontext>(1);
    CUcontext afterSet = nullptr;
    CUcontext primary = nullptr;
    CUresult retained = CUDA_ERROR_UNKNOWN;
    std::thread([&] {
        beforeRetain = currentContext();
        retained = retain(&primary, device);
        if (retained != CUDA_SUCCESS) return;
        afterRetain = currentContext();
        setCurrent(primary);
        afterSet = currentContext();
        setCurrent(nullptr);
        release(device);
    }).join();
    REQUIRE(retained == CUDA_SUCCESS);
    CHECK(beforeRetain == nullptr);
    CHECK(afterRetain == nullptr);
    CHECK(afterSet == primary);
}

TEST_CASE("Two threads retaining the primary context get the same handle", "[gpu][lesson04]") {
    requireGpu();
    auto retain = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxRetain);
    auto release = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxRelease);
    REQUIRE(retain);
    REQUIRE(release);
    const CUdevice device = firstDevice();
    CUcontext handles[2] = {nullptr, nullptr};
    CUresult results[2] = {CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN};
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
        threads.emplace_back([&, i] {
            results[i] = retain(&handles[i], device);
            if (results[i] == CUDA_SUCCESS) release(device);
        });
    }
    for (std::thread& thread : threads) thread.join();
    CHECK(results[0] == CUDA_SUCCESS);
    CHECK(results[1] == CUDA_SUCCESS);
    CHECK(handles[0] != nullptr);
    CHECK(handles[0] == handles[1]);
}

TEST_CASE("The primary context starts with the flags set before its activation", "[gpu][lesson04]") {
    requireGpu();
    auto setFlags = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxSetFlags);
    auto retain = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxRetain);
    auto release = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxRelease);
    auto push = DRIVER_FUNCTION(driver(), cuCtxPushCurrent);
    auto pop = DRIVER_FUNCTION(driver(), cuCtxPopCurrent);
    auto getFlags = DRIVER_FUNCTION(driver(), cuCtxGetFlags);
    REQUIRE(setFlags);
    REQUIRE(getFlags);
    const CUdevice device = firstDevice();
    const PrimaryState before = primaryState(device);
    if (before.active != 0) SKIP("another test in this process holds the primary context active");

    REQUIRE(setFlags(device, CU_CTX_SCHED_BLOCKING_SYNC) == CUDA_SUCCESS);
    CHECK((primaryState(device).flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC);
    CUcontext primary = nullptr;
    REQUIRE(retain(&primary, device) == CUDA_SUCCESS);
    unsigned int flags = 0;
    CHECK(push(primary) == CUDA_SUCCESS);
    CHECK(getFlags(&flags) == CUDA_SUCCESS);
    CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC);
    CUcontext popped = nullptr;
    CHECK(pop(&popped) == CUDA_SUCCESS);
    CHECK(release(device) == CUDA_SUCCESS);
    CHECK(primaryState(device).active == 0);
    // Leave the process's primary context as this test found it.
    CHECK(setFlags(device, before.flags) == CUDA_SUCCESS);
}
