#include <cuda.h>
#include <catch2/catch_test_macros.hpp>

#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "17-green-contexts";
const std::vector<std::string> kPrograms = {"partitions", "isolation"};

// The integer a labelled value starts with ("8 SMs" -> 8).
unsigned long leadingNumber(const std::optional<std::string>& value) {
    REQUIRE(value);
    return std::stoul(*value);
}

// Skips (with the reason) where the driver has no green contexts.
void requireGreenContexts() {
    if (driver().driverVersion() < 12040) SKIP("green contexts need a CUDA 12.4 driver");
    if (CUDA_VERSION < 12040) SKIP("the tests were built with CUDA headers older than 12.4");
}

}  // namespace

// ---------------------------------------------------------------------------
// CPU: no driver needed.

TEST_CASE("Lesson 17 runs its two programs in order", "[cpu][lesson17]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Lesson 17 rejects unknown or incomplete arguments with a usage line and exit 2", "[cpu][lesson17]") {
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {"partitions", {"--bench"}},  // only isolation has a benchmark
        {"partitions", {"--device"}},
        {"isolation", {"--samples", "9"}},
        {"isolation", {"--device", "one"}},
    };
    for (const auto& [program, args] : cases) checkRefusesArguments(kLesson, args, program);
}

// ---------------------------------------------------------------------------
// GPU: the lesson's own checks, read from its output.

TEST_CASE("Lesson 17 partitions passes and every granted size follows the driver's alignment rule", "[gpu][lesson17]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "partitions");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    const unsigned long sms = leadingNumber(valueOf(r.out, "SMs (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)"));
    CHECK(leadingNumber(valueOf(r.out, "SM resource of the device")) == sms);
    // The rule: the driver's own fields where the headers have them, else the documented one.
    unsigned long minimum = 0;
    unsigned long multiple = 0;
    if (const auto reported = valueOf(r.out, "co-scheduled alignment (smCoscheduledAlignment)")) {
        minimum = leadingNumber(valueOf(r.out, "minimum partition size (minSmPartitionSize)"));
        multiple = leadingNumber(reported);
    } else {
        const std::regex documented("at least ([0-9]+) SMs, a multiple of ([0-9]+)");
        std::smatch m;
        const std::string text = r.out;
        REQUIRE(std::regex_search(text, m, documented));
        minimum = std::stoul(m[1]);
        multiple = std::stoul(m[2]);
    }
    REQUIRE(multiple > 0);
    CHECK(leadingNumber(valueOf(r.out, "smallest partition granted (minCount 1)")) == minimum);
    // "split, request R SMs: G groups of S SMs, remainder M SMs (...)"
    const std::regex split("split, minCount ([0-9]+): ([0-9]+) groups of ([0-9]+) SMs, remainder ([0-9]+) SMs.*");
    int splits = 0;
    for (const auto& line : lines(r.out)) {
        std::smatch m;
        if (!std::regex_match(line, m, split)) continue;
        INFO(line);
        const unsigned long request = std::stoul(m[1]);
        const unsigned long groups = std::stoul(m[2]);
        const unsigned long size = std::stoul(m[3]);
        const unsigned long remainder = std::stoul(m[4]);
        CHECK(groups >= 1);
        CHECK(size >= request);
        CHECK(size >= minimum);
        CHECK(size % multiple == 0);
        CHECK(groups * size + remainder == sms);
        ++splits;
    }
    CHECK(splits == 5);
    CHECK(checkOk(r.out, "the SM resource matches the SM count"));
    CHECK(checkOk(r.out, "every split follows the rule and adds up"));
    if (contains(r.out, "IGNORE_SM_COSCHEDULING"))
        CHECK(checkOk(r.out, "ignoring co-scheduling grants smaller groups"));
}

TEST_CASE("Lesson 17 partitions' green contexts get what the split granted and keep their kernels on their SMs",
          "[gpu][lesson17]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "partitions");
    attachToReport(r);
    requireRan(r);
    const std::regex granted("requested 12 SMs, granted ([0-9]+) SMs");
    std::smatch m;
    const std::string value = valueOf(r.out, "green context A").value_or("");
    REQUIRE(std::regex_match(value, m, granted));
    const unsigned long smsA = std::stoul(m[1]);
    const unsigned long smsB = leadingNumber(valueOf(r.out, "green context B (the remainder)"));
    CHECK(smsA >= 12);
    CHECK(smsA + smsB == leadingNumber(valueOf(r.out, "SM resource of the device")));
    CHECK(leadingNumber(valueOf(r.out, "A as a CUcontext (cuCtxFromGreenCtx, cuCtxGetDevResource)")) == smsA);
    CHECK(valueOf(r.out, "stream A belongs to green context A (cuStreamGetGreenCtx)") == "yes");
    const std::string blocks = std::to_string(4 * (smsA + smsB));
    CHECK(leadingNumber(valueOf(r.out, "kernel of " + blocks + " blocks on green context A ran on")) <= smsA);
    CHECK(leadingNumber(valueOf(r.out, "kernel of " + blocks + " blocks on green context B ran on")) <= smsB);
    CHECK(valueOf(r.out, "SMs used by both A and B") == "0");
    CHECK(leadingNumber(valueOf(r.out, "SMs of A that the primary context's kernel used")) > 0);
    for (const char* name :
         {"green context A got at least the SMs requested", "green contexts A and B together hold every SM",
          "A as a CUcontext has A's SMs", "stream A belongs to green context A",
          "A's kernel ran on no more SMs than A was granted", "B's kernel ran on no more SMs than B was granted",
          "A's and B's kernels shared no SM", "the primary context's kernel also ran on A's SMs"}) {
        INFO(name);
        CHECK(checkOk(r.out, name));
    }
#if CUDA_VERSION >= 12090  // the ids: cuGreenCtxGetId came with CUDA 12.9
    CHECK(checkOk(r.out, "green contexts A and B have different ids"));
    CHECK(checkOk(r.out, "popping gives back A's CUcontext"));
    CHECK(checkOk(r.out, "cuGreenCtxGetId(NULL) names the current green context"));
    CHECK(valueOf(r.out, "green context ids (cuGreenCtxGetId)") ==
          "A and B differ: yes; NULL with A current gives A's: yes");
    // Whether the two ids agree is printed as observed; only that the line is there.
    CHECK(valueOf(r.out, "cuCtxGetId of A as a CUcontext equals A's green id"));
#endif
    CHECK(valueOf(r.out, "green contexts and primary context") == "released");
}

TEST_CASE(
    "Lesson 17 isolation shows the contention in one context, and the short kernel near its latency alone "
    "in green contexts",
    "[gpu][lesson17]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "isolation");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "(a) short kernel latency, alone"));
    CHECK(valueOf(r.out, "(b) short kernel latency, beside the long kernel in one context"));
    CHECK(valueOf(r.out, "(c) short kernel latency, beside the long kernel in separate green contexts"));
    const std::regex granted("requested 8 SMs, granted ([0-9]+) SMs");
    std::smatch m;
    const std::string value = valueOf(r.out, "short kernel's green context").value_or("");
    REQUIRE(std::regex_match(value, m, granted));
    CHECK(std::stoul(m[1]) >= 8);
    CHECK(checkOk(r.out, "the short kernel's green context got at least the SMs requested"));
    CHECK(checkOk(r.out, "the long kernel's green context got the remainder"));
    // Where (c) ran is checked; the latencies are observations (concurrency is not guaranteed).
    CHECK(checkOk(r.out, "in (c) the long kernel ran on no more SMs than its green context holds"));
    CHECK(checkOk(r.out, "in (c) the two kernels shared no SM"));
    const std::regex used("short kernel ([0-9]+), long kernel ([0-9]+), both 0");
    const std::string sms = valueOf(r.out, "(c) SMs used").value_or("");
    REQUIRE(std::regex_match(sms, m, used));
    CHECK(std::stoul(m[1]) >= 1);
    CHECK(std::stoul(m[1]) <= 8);  // eight blocks
    CHECK(std::stoul(m[2]) >= 1);
    if (!contains(r.out, "observation latencies: not measured")) {
        CHECK(contains(r.out, "observation contention in one context"));
        CHECK(contains(r.out, "observation short kernel near alone in green contexts"));
    }
    CHECK_FALSE(contains(r.out, "check contention visible"));
}

TEST_CASE("Lesson 17 isolation --bench: the three latencies are printed; their order is observed, not promised",
          "[gpu][lesson17]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench"};
    const RunResult r = runLesson(kLesson, options, "isolation");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    auto benchValue = [&](const std::string& metric) {
        const std::string prefix = "bench: " + metric + " = ";
        for (const auto& line : lines(r.out))
            if (line.rfind(prefix, 0) == 0) return std::stod(line.substr(prefix.size()));
        return -1.0;
    };
    const double alone = benchValue("short kernel latency, alone");
    const double shared = benchValue("short kernel latency, beside the long kernel, one context");
    const double green = benchValue("short kernel latency, beside the long kernel, green contexts");
    // Printed, not judged: NVIDIA's Programming Guide (section 4.6.1) does not guarantee concurrent
    // execution of independent work, so no order of the three latencies is required.
    CHECK(alone > 0.0);
    CHECK(shared > 0.0);
    CHECK(green > 0.0);
    CHECK(contains(r.out, "Result = PASS"));
}

// ---------------------------------------------------------------------------
// GPU: the same driver behaviour, checked directly through the driver.

#if CUDA_VERSION >= 12040
TEST_CASE("A split of the device's SMs is granted in the driver's units, and a green context gets exactly its group",
          "[gpu][lesson17]") {
    requireGpu();
    requireGreenContexts();
    CurrentPrimaryContext context;
    auto getResource = DRIVER_FUNCTION(driver(), cuDeviceGetDevResource);
    auto split = DRIVER_FUNCTION(driver(), cuDevSmResourceSplitByCount);
    auto generateDesc = DRIVER_FUNCTION(driver(), cuDevResourceGenerateDesc);
    auto create = DRIVER_FUNCTION(driver(), cuGreenCtxCreate);
    auto destroy = DRIVER_FUNCTION(driver(), cuGreenCtxDestroy);
    auto greenResource = DRIVER_FUNCTION(driver(), cuGreenCtxGetDevResource);
    REQUIRE((getResource && split && generateDesc && create && destroy && greenResource));
    CUdevResource all{};
    REQUIRE(getResource(context.device(), &all, CU_DEV_RESOURCE_TYPE_SM) == CUDA_SUCCESS);
    CHECK(all.type == CU_DEV_RESOURCE_TYPE_SM);
    CHECK(all.sm.smCount > 0);
    // Counting mode: no result array, only the number of groups.
    unsigned int groups = 0;
    REQUIRE(split(nullptr, &groups, &all, nullptr, 0, 1) == CUDA_SUCCESS);
    CHECK(groups >= 1);
    // One group of the smallest size, the rest as remainder.
    CUdevResource group{};
    CUdevResource remainder{};
    unsigned int one = 1;
    REQUIRE(split(&group, &one, &all, &remainder, 0, 1) == CUDA_SUCCESS);
    CHECK(one == 1);
    CHECK(group.sm.smCount + remainder.sm.smCount == all.sm.smCount);
#if CUDA_VERSION >= 13000
    CHECK(group.sm.smCount == all.sm.minSmPartitionSize);
    // cuda.h calls smCount "a multiple of" the alignment; the H100's 132 SMs are not a multiple
    // of 8, so only the groups a split makes are checked against it.
    CHECK(all.sm.smCoscheduledAlignment > 0);
    CHECK(group.sm.smCount % all.sm.smCoscheduledAlignment == 0);
#endif
    CUdevResourceDesc desc = nullptr;
    REQUIRE(generateDesc(&desc, &group, 1) == CUDA_SUCCESS);
    CUgreenCtx green = nullptr;
    REQUIRE(create(&green, desc, context.device(), CU_GREEN_CTX_DEFAULT_STREAM) == CUDA_SUCCESS);
    CUdevResource granted{};
    CHECK(greenResource(green, &granted, CU_DEV_RESOURCE_TYPE_SM) == CUDA_SUCCESS);
    CHECK(granted.sm.smCount == group.sm.smCount);
    CHECK(destroy(green) == CUDA_SUCCESS);
}

#if CUDA_VERSION >= 13000
TEST_CASE(
    "IGNORE_SM_COSCHEDULING splits into smaller groups than the default rule allows (cuda.h: it lowers the "
    "minimum)",
    "[gpu][lesson17]") {
    requireGpu();
    requireGreenContexts();
    CurrentPrimaryContext context;
    auto getResource = DRIVER_FUNCTION(driver(), cuDeviceGetDevResource);
    auto split = DRIVER_FUNCTION(driver(), cuDevSmResourceSplitByCount);
    REQUIRE((getResource && split));
    CUdevResource all{};
    REQUIRE(getResource(context.device(), &all, CU_DEV_RESOURCE_TYPE_SM) == CUDA_SUCCESS);
    auto smallestGroup = [&](unsigned int flags) {
        unsigned int groups = 0;
        REQUIRE(split(nullptr, &groups, &all, nullptr, flags, 1) == CUDA_SUCCESS);
        REQUIRE(groups >= 1);
        std::vector<CUdevResource> result(groups);
        CUdevResource remainder{};
        REQUIRE(split(result.data(), &groups, &all, &remainder, flags, 1) == CUDA_SUCCESS);
        CHECK(groups * result.front().sm.smCount + remainder.sm.smCount == all.sm.smCount);
        return result.front().sm.smCount;
    };
    const unsigned int coscheduled = smallestGroup(0);
    const unsigned int loose = smallestGroup(CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING);
    CHECK(coscheduled == all.sm.minSmPartitionSize);
    CHECK(loose >= 1);
    CHECK(loose < coscheduled);
}
#endif
#endif
