#include <cuda.h>
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "common/cuda_compat.h"
#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "24-streams-and-events";
const std::vector<std::string> kPrograms = {"priorities", "stream_info",  "host_work",   "mem_ops",
                                            "events",     "green_events", "wake_latency"};
// wake_latency's four ways, as it names them.
const char* const kWays[] = {"cuEventSynchronize, CU_EVENT_BLOCKING_SYNC event",
                             "cuEventSynchronize, default (spinning) event", "cuLaunchHostFunc",
                             "host polls a cuStreamWriteValue32 word"};

// "stream priority range: 0 (least) to -5 (greatest)" -> {0, -5}.
std::pair<int, int> priorityRange(const std::string& out) {
    const std::regex range("stream priority range: (-?[0-9]+) \\(least\\) to (-?[0-9]+) \\(greatest\\)");
    std::smatch m;
    REQUIRE(std::regex_search(out, m, range));
    return {std::stoi(m[1]), std::stoi(m[2])};
}

// "12.5 us" -> 12.5; -1 when the text is not a number of microseconds.
double microseconds(const std::optional<std::string>& text) {
    const std::regex us("([0-9]+\\.[0-9]) us");
    std::smatch m;
    if (!text || !std::regex_match(*text, m, us)) return -1.0;
    return std::stod(m[1]);
}

// "median 4.6 us, 90th percentile 6.0 us" after "<way>: " -> 4.6; -1 when there is no such line.
double wayMedian(const std::string& out, const std::string& way) {
    const std::regex figures("median ([0-9]+\\.[0-9]) us, 90th percentile ([0-9]+\\.[0-9]) us");
    const std::string line = valueOf(out, way).value_or("");
    std::smatch m;
    if (!std::regex_match(line, m, figures)) return -1.0;
    return std::stod(m[1]);
}

// What cuStreamGetPriority answered for the stream asked with `what` ("the least", ...).
int priorityGot(const std::string& out, const std::string& what) {
    const std::regex line("asked -?[0-9]+ \\(" + what + "\\): cuStreamGetPriority (-?[0-9]+)");
    std::smatch m;
    REQUIRE(std::regex_search(out, m, line));
    return std::stoi(m[1]);
}

}  // namespace

// ---------------------------------------------------------------------------
// CPU: no driver needed.

TEST_CASE("Lesson 24 runs its seven programs in order", "[cpu][lesson24]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Lesson 24 programs reject unknown or incomplete arguments with a usage line and exit 2", "[cpu][lesson24]") {
    for (const auto& program : kPrograms) {
        INFO(program);
        checkRefusesArguments(kLesson, {"--no-such-flag"}, program);
        checkRefusesArguments(kLesson, {"--device"}, program);
        checkRefusesArguments(kLesson, {"--device", "one"}, program);
    }
    // Only the two programs that time something have a benchmark mode.
    for (const char* program : {"stream_info", "host_work", "mem_ops", "events", "green_events"})
        checkRefusesArguments(kLesson, {"--bench"}, program);
}

TEST_CASE("Every lesson 24 program fails fast at cuInit against the stub driver, naming the call", "[cpu][lesson24]") {
    for (const auto& program : kPrograms) {
        INFO(program);
        const RunResult r = runAgainstStub(kLesson, {}, program);
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA driver call failed: cuInit(0)"));
        CHECK(contains(r.err, "CUDA_ERROR_STUB_LIBRARY"));
        CHECK_FALSE(contains(r.out, "Result = PASS"));
    }
    for (const char* program : {"priorities", "wake_latency"})  // --bench parsed, then cuInit
        CHECK(runAgainstStub(kLesson, {"--bench"}, program).exitCode == 1);
}

// ---------------------------------------------------------------------------
// GPU: the programs' output.

TEST_CASE("Lesson 24 priorities: in-range priorities come back, out-of-range ones are clamped to the ends",
          "[gpu][lesson24]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "priorities");
    attachToReport(r);
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    requireChecksHeld(r);
    const auto [least, greatest] = priorityRange(r.out);
    CHECK(least > greatest);  // lower numbers are greater priorities
    // cuda.h: out of the range, "clamped to the lowest or the highest number in the range".
    CHECK(priorityGot(r.out, "the least") == least);
    CHECK(priorityGot(r.out, "the greatest") == greatest);
    CHECK(priorityGot(r.out, "10 beyond the least") == least);
    CHECK(priorityGot(r.out, "10 beyond the greatest") == greatest);
    // cuda.h names no priority for a cuStreamCreate stream; NVIDIA's Programming Guide (2.5.9.1): 0.
    CHECK(valueOf(r.out, "cuStreamCreate, no priority given") == "cuStreamGetPriority 0");
    CHECK(checkOk(r.out, "a cuStreamCreate stream has the default priority 0"));
    CHECK_FALSE(contains(r.out, "bench:"));
    if (contains(r.out, "section latency: SKIP")) return;  // a tool that runs one kernel at a time
    // The latencies mean something only with the flood at the least priority, and (a) with no
    // flood pending: both are checks of the program, required here to have run.
    CHECK(checkOk(r.out, "the flood's stream has the least priority"));
    CHECK(checkOk(r.out, "no flood was pending when the short kernel ran alone"));
    // The latencies are printed for this GPU, never compared with a figure: the medians are of 15
    // samples, each a number of microseconds, and the printed ratio is the one of (b) and (c).
    CHECK(valueOf(r.out, "samples") == "15 of each, medians, host clock from the launch to cuStreamSynchronize");
    CHECK(microseconds(valueOf(r.out, "(a) short kernel alone")) >= 0.0);  // -1: not "N.N us"
    const double b = microseconds(valueOf(r.out, "(b) beside the flood, same priority as the flood"));
    const double c = microseconds(valueOf(r.out, "(c) beside the flood, the greatest priority"));
    REQUIRE(b >= 0.0);
    REQUIRE(c > 0.05);  // the bound below divides by c - 0.05 (c, the short kernel's time, spins 10 us)
    const std::regex ratioLine("([0-9]+\\.[0-9]) x");
    std::smatch m;
    const std::string ratioText = valueOf(r.out, "(b) / (c)").value_or("");
    REQUIRE(std::regex_match(ratioText, m, ratioLine));
    // b, c and the ratio are each rounded to 0.05 either way: b / c of the printed values moves by
    // at most 0.05 (b + c) / (c (c - 0.05)) from the ratio of the medians, which was rounded.
    const double ratio = std::stod(m[1]);
    const double rounding = 0.05 + 0.05 * (b + c) / (c * (c - 0.05)) + 1e-9;
    CHECK(std::abs(ratio - b / c) <= rounding);
}

TEST_CASE("Lesson 24 priorities --bench prints the three latencies as bench lines", "[gpu][lesson24]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench"};
    const RunResult r = runLesson(kLesson, options, "priorities");
    attachToReport(r);
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    if (contains(r.out, "section latency: SKIP")) SKIP("a tool that runs one kernel at a time is attached");
    // Each bench line is the median the same run printed for its case (-1 on either side: missing).
    const double alone = microseconds(valueOf(r.out, "(a) short kernel alone"));
    const double same = microseconds(valueOf(r.out, "(b) beside the flood, same priority as the flood"));
    const double greatest = microseconds(valueOf(r.out, "(c) beside the flood, the greatest priority"));
    REQUIRE(alone >= 0.0);
    REQUIRE(same >= 0.0);
    REQUIRE(greatest >= 0.0);
    CHECK(benchValue(r.out, "short kernel latency, alone") == alone);
    CHECK(benchValue(r.out, "short kernel latency beside a flood, same priority") == same);
    CHECK(benchValue(r.out, "short kernel latency beside a flood, greatest priority") == greatest);
}

TEST_CASE("Lesson 24 stream_info: flags as created, distinct ids, the creating context, attributes set and copied",
          "[gpu][lesson24]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "stream_info");
    attachToReport(r);
    REQUIRE(r.exitCode == 0);
    requireChecksHeld(r);
    CHECK(valueOf(r.out, "cuStreamGetFlags, cuStreamCreate(CU_STREAM_DEFAULT)") == "0x0 (CU_STREAM_DEFAULT)");
    CHECK(valueOf(r.out, "cuStreamGetFlags, cuStreamCreate(CU_STREAM_NON_BLOCKING)") == "0x1 (CU_STREAM_NON_BLOCKING)");
    CHECK(valueOf(r.out, "stream made while the second context was current, asked from the primary") ==
          "the second context");
    CHECK(valueOf(r.out, "NULL stream, asked while the second context is current") == "the second context");
    CHECK(valueOf(r.out, "after cuStreamCopyAttributes(destination, source)") ==
          "source CU_SYNC_POLICY_BLOCKING_SYNC, destination CU_SYNC_POLICY_BLOCKING_SYNC");
    if (driver().driverVersion() >= 12000 && CUDA_VERSION >= 12000)
        CHECK(checkOk(r.out, "every stream created here has an id of its own"));
}

TEST_CASE("Lesson 24 host_work: host function and callback each run between the kernels around them",
          "[gpu][lesson24]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "host_work");
    attachToReport(r);
    REQUIRE(r.exitCode == 0);
    requireChecksHeld(r);
    // While the first kernel was held by its gate, nothing queued behind it had run.
    CHECK(valueOf(r.out, "host function while the first kernel was held") == "not called, no word written");
    CHECK(valueOf(r.out, "callback while the first kernel was held") == "not called, no word written");
    CHECK(valueOf(r.out, "host function") == "calls 1, read the first kernel's word: 1 (1 = that kernel had finished)");
    CHECK(valueOf(r.out, "second kernel, after the host function") == "read 2 (2 = the host function had run)");
    CHECK(valueOf(r.out, "callback") == "calls 1, read the first kernel's word: 1 (1 = that kernel had finished)");
    CHECK(valueOf(r.out, "second kernel, after the callback") == "read 2 (2 = the callback had run)");
    CHECK(valueOf(r.out, "callback's arguments") == "status CUDA_SUCCESS, stream the stream it was added to");
}

TEST_CASE("Lesson 24 host_work: a capture records cuLaunchHostFunc as a host node and refuses cuStreamAddCallback",
          "[gpu][lesson24]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "host_work");
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "captured") == "1 node(s), the first a host node; calls while recording: 0");
    CHECK(valueOf(r.out, "host node calls after two graph launches") == "2");
    // The two codes cuda.h gives for it: its return list's CUDA_ERROR_NOT_SUPPORTED, and the code
    // for an operation "not permitted when the stream is capturing".
    const auto refused = valueOf(r.out, "cuStreamAddCallback inside a capture");
    REQUIRE(refused);
    CHECK((*refused == "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED" || *refused == "CUDA_ERROR_NOT_SUPPORTED"));
    CHECK(contains(r.err, "cuStreamAddCallback(stream, streamCallback, &neverCalled, 0)"));  // REPORT_DRIVER named it
}

TEST_CASE("Lesson 24 mem_ops: a 64-bit write on one stream releases the other's wait; a batch keeps its order",
          "[gpu][lesson24]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "mem_ops");
    attachToReport(r);
    if (r.exitCode == course::kExitNotApplicable) {
        // Exit 77 only where headers or driver predate the v2 memory operations, or where the
        // device has neither section's feature: no 64-bit operations (asked of the driver here)
        // and a batch the driver refused.
        const bool tooOld = CUDA_VERSION < 11070 || driver().driverVersion() < 11070;
        bool lacks = false;
#if CUDA_VERSION >= 11070
        auto deviceGet = DRIVER_FUNCTION(driver(), cuDeviceGet);
        auto attribute = DRIVER_FUNCTION(driver(), cuDeviceGetAttribute);
        REQUIRE((deviceGet && attribute));
        CUdevice device = 0;
        int can64 = -1;
        REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);
        REQUIRE(attribute(&can64, course::kCanUse64BitMemOps, device) == CUDA_SUCCESS);
        lacks = can64 == 0 && contains(r.out, "section batch: SKIP (");
#endif
        REQUIRE((tooOld || lacks));
        requireRan(r);  // SKIPs, with the program's reason
    }
    REQUIRE(r.exitCode == 0);
    requireChecksHeld(r);
    if (valueOf(r.out, "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS") == "1") {
        // The control: a 32-bit wait on the flag's low half passes while the writer is held.
        CHECK(valueOf(r.out, "32-bit wait on the flag's low half, writer held (the control)") == "passed");
        CHECK(valueOf(r.out, "writer's event while the writer was held") == "CUDA_ERROR_NOT_READY");
        CHECK(valueOf(r.out, "flag after both streams") == "0x100000007");
        CHECK(valueOf(r.out, "seen word while the flag still held 0x7") == "always 0 (read by the host)");
        CHECK(valueOf(r.out, "seen word after both streams") == "1 (1 = the waiter wrote it)");
        CHECK(valueOf(r.out, "waiter's kernel read the payload") == "42 (42 = it ran after the writer's kernel)");
        CHECK(valueOf(r.out, "wait released by") == "the writer stream");
    }
    if (!contains(r.out, "section batch: SKIP")) {
        CHECK(valueOf(r.out, "cuStreamQuery meanwhile") == "CUDA_ERROR_NOT_READY");
        CHECK(valueOf(r.out, "ack word after the host opened the gate") == "1");
    }
}

TEST_CASE("Lesson 24 events: an external record becomes a graph node that another stream waits for",
          "[gpu][lesson24]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "events");
    attachToReport(r);
    REQUIRE(r.exitCode == 0);
    // Every check ok, none SKIP: the graph's kernels are held by the host until the control has
    // read, so on a GPU that runs the two streams' kernels side by side the order is shown.
    requireChecksHeld(r);
    CHECK(contains(valueOf(r.out, "captured with cuEventRecord").value_or(""), "0 of them event record nodes"));
    CHECK(contains(valueOf(r.out, "captured with CU_EVENT_RECORD_EXTERNAL").value_or(""),
                   "1 of them event record nodes"));
    CHECK(valueOf(r.out, "stream 2 before the wait read the first kernel's word") ==
          "0 (the control: 0 = not finished yet)");
    CHECK(valueOf(r.out, "stream waiting on the graph's event read the first kernel's word") ==
          "1 (1 = that kernel had finished)");
    CHECK(valueOf(r.out, "and the second kernel's word") ==
          "0 (0 = the graph was still running), read while that kernel was held");
    CHECK(checkOk(r.out, "a stream waiting on the graph's event ran after the kernel before the record node"));
    CHECK(checkOk(r.out, "the graph's event did not wait for the kernel after the record node"));
}

TEST_CASE("Lesson 24 events: cuCtxWaitEvent holds another context's work until both streams are done",
          "[gpu][lesson24]") {
    requireGpu();
    if (driver().driverVersion() < 12050 || CUDA_VERSION < 12050) SKIP("cuCtxRecordEvent needs CUDA 12.5");
    const RunResult r = defaultRun(kLesson, "events");
    REQUIRE(r.exitCode == 0);
    if (valueOf(r.out, "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING") == "0") SKIP("the device has no unified addressing");
    // Both rounds: whichever stream's kernel the host released first, the second context's reads
    // after cuCtxWaitEvent waited for the other one too, and the control read 0.
    CHECK(valueOf(r.out, "stream 1 released first") ==
          "control read 0; reads after cuCtxWaitEvent while stream 2 was held: not run; then they read 1 and 1 (1 = "
          "finished)");
    CHECK(valueOf(r.out, "stream 2 released first") ==
          "control read 0; reads after cuCtxWaitEvent while stream 1 was held: not run; then they read 1 and 1 (1 = "
          "finished)");
    CHECK(checkOk(r.out, "work in another context after cuCtxWaitEvent saw both streams' writes"));
}

TEST_CASE("Lesson 24 green_events: green context B's kernel waits for green context A's event", "[gpu][lesson24]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "green_events");
    attachToReport(r);
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    requireChecksHeld(r);  // none SKIP: the control ran while A's kernel was held
    CHECK(contains(valueOf(r.out, "SMs a kernel of 4 blocks per SM ran on").value_or(""), ", in both 0"));
    CHECK(checkOk(r.out, "each green context's kernel ran on no more SMs than cuGreenCtxGetDevResource reports"));
    CHECK(valueOf(r.out, "B's kernel before cuGreenCtxWaitEvent read") == "0 (the control: 0 = A's kernel was held)");
    CHECK(valueOf(r.out, "B's kernel after cuGreenCtxWaitEvent read") == "1 (1 = A's kernel had finished)");
    CHECK(checkOk(r.out, "B's kernel, queued after cuGreenCtxWaitEvent, read what A's kernel wrote"));
}

TEST_CASE("Lesson 24 wake_latency: no way wakes the host before the gate opens, each way is measured",
          "[gpu][lesson24]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "wake_latency");
    attachToReport(r);
    REQUIRE(r.exitCode == 0);
    requireChecksHeld(r);
    // Every way that ran prints its median and 90th percentile (printed only: timings).
    for (const char* way : kWays) {
        INFO(way);
        if (contains(r.out, std::string("section ") + way + ": SKIP (")) continue;  // headers or driver before 11.7
        CHECK(wayMedian(r.out, way) >= 0.0);  // -1: no "median N.N us, 90th percentile N.N us" line
    }
    // The blocking event's waiter left the CPU (its check); each share is a whole percentage.
    const std::regex share("[0-9]+ % of the wait");
    CHECK(std::regex_match(valueOf(r.out, "on a CPU while waiting, CU_EVENT_BLOCKING_SYNC event").value_or(""), share));
    CHECK(std::regex_match(valueOf(r.out, "on a CPU while waiting, default (spinning) event").value_or(""), share));
    CHECK(checkOk(r.out, "the thread waiting on the CU_EVENT_BLOCKING_SYNC event left the CPU"));
    CHECK_FALSE(contains(r.out, "bench:"));
}

TEST_CASE("Lesson 24 wake_latency --bench prints one bench line per way", "[gpu][lesson24]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench"};
    const RunResult r = runLesson(kLesson, options, "wake_latency");
    attachToReport(r);
    REQUIRE(r.exitCode == 0);
    // Each bench line is the median the same run printed for its way.
    for (const char* way : kWays) {
        INFO(way);
        if (contains(r.out, std::string("section ") + way + ": SKIP (")) continue;  // headers or driver before 11.7
        const double median = wayMedian(r.out, way);
        REQUIRE(median >= 0.0);
        CHECK(benchValue(r.out, std::string("gate to wake, ") + way) == median);
    }
}

// ---------------------------------------------------------------------------
// GPU: the driver itself, without the lesson.

TEST_CASE("The driver clamps a stream priority beyond either end of the range and reports the clamped value",
          "[gpu][lesson24]") {
    requireGpu();
    CurrentPrimaryContext context;
    auto range = DRIVER_FUNCTION(driver(), cuCtxGetStreamPriorityRange);
    auto create = DRIVER_FUNCTION(driver(), cuStreamCreateWithPriority);
    auto priority = DRIVER_FUNCTION(driver(), cuStreamGetPriority);
    auto destroy = DRIVER_FUNCTION(driver(), cuStreamDestroy);
    REQUIRE((range && create && priority && destroy));
    int least = 0;
    int greatest = 0;
    REQUIRE(range(&least, &greatest) == CUDA_SUCCESS);
    if (least == greatest) SKIP("the device has no stream priorities");
    for (const auto& [asked, expected] : {std::pair{least + 100, least}, std::pair{greatest - 100, greatest}}) {
        INFO("asked " << asked);
        CUstream stream = nullptr;
        REQUIRE(create(&stream, CU_STREAM_NON_BLOCKING, asked) == CUDA_SUCCESS);
        const Cleanup destroyStream([&] { return destroy(stream); });
        int got = 0;
        CHECK(priority(stream, &got) == CUDA_SUCCESS);
        CHECK(got == expected);
    }
}

TEST_CASE("The driver gives a stream the flags it was created with", "[gpu][lesson24]") {
    requireGpu();
    CurrentPrimaryContext context;
    auto create = DRIVER_FUNCTION(driver(), cuStreamCreate);
    auto flagsOf = DRIVER_FUNCTION(driver(), cuStreamGetFlags);
    auto destroy = DRIVER_FUNCTION(driver(), cuStreamDestroy);
    REQUIRE((create && flagsOf && destroy));
    for (unsigned int flags :
         {static_cast<unsigned int>(CU_STREAM_DEFAULT), static_cast<unsigned int>(CU_STREAM_NON_BLOCKING)}) {
        INFO("flags " << flags);
        CUstream stream = nullptr;
        REQUIRE(create(&stream, flags) == CUDA_SUCCESS);
        const Cleanup destroyStream([&] { return destroy(stream); });
        unsigned int got = 99;
        CHECK(flagsOf(stream, &got) == CUDA_SUCCESS);
        CHECK(got == flags);
    }
}
