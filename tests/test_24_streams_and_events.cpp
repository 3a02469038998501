#include <cuda.h>
#include <catch2/catch_test_macros.hpp>

#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "24-streams-and-events";
const std::vector<std::string> kPrograms = {"priorities", "stream_info",  "host_work",   "mem_ops",
                                            "events",     "green_events", "wake_latency"};

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
    // What a cuStreamCreate stream reports is printed only: cuda.h names no priority for it.
    CHECK_FALSE(contains(r.out, "bench:"));
    if (contains(r.out, "section latency: SKIP")) return;  // a tool that runs one kernel at a time
    // The latencies are printed for this GPU, never compared: each is a number of microseconds,
    // and the medians are of 15 samples.
    CHECK(valueOf(r.out, "samples") == "15 of each, medians, host clock from the launch to cuStreamSynchronize");
    CHECK(microseconds(valueOf(r.out, "(a) short kernel alone")) > 0.0);
    CHECK(microseconds(valueOf(r.out, "(b) beside the flood, same priority as the flood")) > 0.0);
    CHECK(microseconds(valueOf(r.out, "(c) beside the flood, the greatest priority")) > 0.0);
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
    CHECK(benchValue(r.out, "short kernel latency, alone") > 0.0);
    CHECK(benchValue(r.out, "short kernel latency beside a flood, same priority") > 0.0);
    CHECK(benchValue(r.out, "short kernel latency beside a flood, greatest priority") > 0.0);
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
    const auto refused = valueOf(r.out, "cuStreamAddCallback inside a capture");
    REQUIRE(refused);
    CHECK(*refused != "CUDA_SUCCESS");
    CHECK(contains(r.err, "cuStreamAddCallback(stream, streamCallback, &neverCalled, 0)"));  // REPORT_DRIVER named it
}

TEST_CASE("Lesson 24 mem_ops: a 64-bit write on one stream releases the other's wait; a batch keeps its order",
          "[gpu][lesson24]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "mem_ops");
    attachToReport(r);
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    requireChecksHeld(r);
    if (valueOf(r.out, "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS") == "1") {
        CHECK(valueOf(r.out, "flag after both streams") == "0x100000007");
        CHECK(valueOf(r.out, "seen word while the flag still held 0x7").value_or("").rfind("always 0 (", 0) == 0);
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
    requireChecksHeldOrSkipped(r, {"a stream waiting on the graph's event ran after the kernel before the record node",
                                   "work in another context after cuCtxWaitEvent saw both streams' writes"});
    CHECK(contains(valueOf(r.out, "captured with cuEventRecord").value_or(""), "0 of them event record nodes"));
    CHECK(contains(valueOf(r.out, "captured with CU_EVENT_RECORD_EXTERNAL").value_or(""),
                   "1 of them event record nodes"));
    CHECK(valueOf(r.out, "stream waiting on the graph's event read the first kernel's word") ==
          "1 (1 = that kernel had finished)");
    // The ordering check says SKIP exactly when its control read 1 too.
    const bool controlRead1 =
        valueOf(r.out, "stream 2 before the wait read the first kernel's word").value_or("").rfind("1 ", 0) == 0;
    const auto verdictLine =
        valueOf(r.out, "check a stream waiting on the graph's event ran after the kernel before the record node");
    CHECK(verdictLine.value_or("").rfind(controlRead1 ? "SKIP (" : "ok", 0) == 0);
}

TEST_CASE("Lesson 24 events: cuCtxWaitEvent holds another context's work until both streams are done",
          "[gpu][lesson24]") {
    requireGpu();
    if (driver().driverVersion() < 12050 || CUDA_VERSION < 12050) SKIP("cuCtxRecordEvent needs CUDA 12.5");
    const RunResult r = defaultRun(kLesson, "events");
    REQUIRE(r.exitCode == 0);
    if (valueOf(r.out, "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING") == "0") SKIP("the device has no unified addressing");
    const std::regex both("1 from the [0-9]+ ms stream, 1 from the [0-9]+ ms stream \\(1 = finished\\)");
    CHECK(std::regex_match(valueOf(r.out, "second context's kernels read").value_or(""), both));
    // ok where the control (a read queued before cuCtxWaitEvent) read 0, SKIP where it read 1.
    const auto control = valueOf(r.out, "second context's read queued before cuCtxWaitEvent (the control)");
    REQUIRE(control);
    const auto verdictLine = valueOf(r.out, "check work in another context after cuCtxWaitEvent saw both streams' writes");
    CHECK(verdictLine.value_or("").rfind(control->rfind("1 ", 0) == 0 ? "SKIP (" : "ok", 0) == 0);
}

TEST_CASE("Lesson 24 green_events: green context B's kernel waits for green context A's event", "[gpu][lesson24]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "green_events");
    attachToReport(r);
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    const std::string ordering = "B's kernel, queued after cuGreenCtxWaitEvent, read what A's kernel wrote";
    requireChecksHeldOrSkipped(r, {ordering});
    CHECK(valueOf(r.out, "B's kernel after cuGreenCtxWaitEvent read") == "1 (1 = A's kernel had finished)");
    // The control decides between ok and SKIP: ok only where B's kernel without the wait read 0.
    const auto control = valueOf(r.out, "B's kernel without the wait read");
    REQUIRE(control);
    CHECK(valueOf(r.out, "check " + ordering).value_or("").rfind(control->rfind("1 ", 0) == 0 ? "SKIP (" : "ok", 0) ==
          0);
}

TEST_CASE("Lesson 24 wake_latency: no way wakes the host before the gate opens, each way is measured",
          "[gpu][lesson24]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "wake_latency");
    attachToReport(r);
    REQUIRE(r.exitCode == 0);
    requireChecksHeld(r);
    // Every way that ran prints a median no greater than its 90th percentile, both positive.
    const std::regex figures("median ([0-9]+\\.[0-9]) us, 90th percentile ([0-9]+\\.[0-9]) us");
    for (const char* way : {"cuEventSynchronize, CU_EVENT_BLOCKING_SYNC event",
                            "cuEventSynchronize, default (spinning) event", "cuLaunchHostFunc",
                            "host polls a cuStreamWriteValue32 word"}) {
        INFO(way);
        if (contains(r.out, std::string("section ") + way + ": SKIP (")) continue;  // headers or driver before 11.7
        const std::string line = valueOf(r.out, way).value_or("");
        std::smatch m;
        REQUIRE(std::regex_match(line, m, figures));
        CHECK(std::stod(m[1]) > 0.0);
        CHECK(std::stod(m[1]) <= std::stod(m[2]));
    }
    CHECK_FALSE(contains(r.out, "bench:"));
}

TEST_CASE("Lesson 24 wake_latency --bench prints one bench line per way", "[gpu][lesson24]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench"};
    const RunResult r = runLesson(kLesson, options, "wake_latency");
    attachToReport(r);
    REQUIRE(r.exitCode == 0);
    CHECK(benchValue(r.out, "gate to wake, cuEventSynchronize, CU_EVENT_BLOCKING_SYNC event") > 0.0);
    CHECK(benchValue(r.out, "gate to wake, cuEventSynchronize, default (spinning) event") > 0.0);
    CHECK(benchValue(r.out, "gate to wake, cuLaunchHostFunc") > 0.0);
    if (!contains(r.out, "section host polls a cuStreamWriteValue32 word: SKIP ("))
        CHECK(benchValue(r.out, "gate to wake, host polls a cuStreamWriteValue32 word") > 0.0);
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
