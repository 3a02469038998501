#include <catch2/catch_test_macros.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "05-memory-alloc/pcie_link.h"
#include "common/course_util.h"
#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "05-memory-alloc";
const std::vector<std::string> kPrograms = {"device_memory", "pinned_memory", "async_copies", "streams_and_events",
                                            "bandwidth"};
// A fake sysfs tree: one PCI device per case (see its README.md).
std::string fakeSysfs() {
    return repoRoot() + "/tests/fixtures/sysfs-pcie";
}
constexpr long long kPageBytes = 2LL << 20;  // the driver's allocation page on current GPUs
constexpr size_t kOnePebibyte = size_t{1} << 50;

// The integer a labelled line starts with ("85362475008 bytes" -> 85362475008).
long long leadingNumber(const std::optional<std::string>& value) {
    REQUIRE(value);
    return std::stoll(*value);
}

// The cells of the bandwidth table's row for `size` ("| 16 MiB | 1.00 GB/s | ... |"), without the size.
std::vector<double> tableRow(const std::string& out, const std::string& size) {
    for (const auto& line : lines(out)) {
        if (line.rfind("| " + size + " |", 0) != 0) continue;
        std::vector<double> cells;
        size_t at = line.find('|', 2);
        while (at != std::string::npos && at + 1 < line.size()) {
            cells.push_back(std::strtod(line.c_str() + at + 1, nullptr));
            at = line.find('|', at + 1);
        }
        return cells;
    }
    return {};
}

// Every "check NAME: ..." line must say ok, and each name in `names` must be among them.
void checkAllHeld(const RunResult& r, const std::vector<std::string>& names) {
    for (const auto& line : lines(r.out)) {
        if (line.rfind("check ", 0) != 0) continue;
        INFO(line);
        CHECK(line.size() > 4);
        CHECK(line.substr(line.size() - 4) == ": ok");
    }
    for (const auto& name : names) {
        INFO(name);
        CHECK(valueOf(r.out, "check " + name) == "ok");
    }
    CHECK(contains(r.out, "Result = PASS"));
}

size_t freeDeviceMemory() {
    auto getInfo = DRIVER_FUNCTION(driver(), cuMemGetInfo);
    REQUIRE(getInfo);
    size_t freeBytes = 0;
    size_t totalBytes = 0;
    REQUIRE(getInfo(&freeBytes, &totalBytes) == CUDA_SUCCESS);
    return freeBytes;
}

}  // namespace

// ---------------------------------------------------------------------------
// CPU: no driver needed.

TEST_CASE("Lesson 05 rejects a --size that is not a positive multiple of 4 with a usage line and exit 2",
          "[cpu][lesson05]") {
    // Arguments are checked before cuInit; the stub driver only lets the program load.
    for (const char* size : {"abc", "0", "-4096", "6", "12MiB"}) {
        checkRefusesArguments(kLesson, {"--size", size}, "device_memory");
    }
    checkRefusesArguments(kLesson, {"--size"}, "device_memory");
}

TEST_CASE("Lesson 05 runs its five programs in order, each rejecting an unknown argument", "[cpu][lesson05]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
    for (const auto& program : kPrograms) {
        for (const std::vector<std::string>& args : {std::vector<std::string>{"--bogus"}, {"--device", "x"}})
            checkRefusesArguments(kLesson, args, program);
    }
    // --size belongs to device_memory, --bench to bandwidth.
    CHECK(runAgainstStub(kLesson, {"--size", "4096"}, "pinned_memory").exitCode == 2);
    CHECK(runAgainstStub(kLesson, {"--bench"}, "device_memory").exitCode == 2);
}

TEST_CASE("Lesson 05's programs decide PASS only through course::Verdict checks", "[cpu][lesson05]") {
    for (const auto& program : kPrograms) {
        INFO(program);
        const auto source = course::readFile(repoRoot() + "/" + kLesson + "/" + program + ".cpp");
        REQUIRE(source);
        CHECK(contains(*source, "course::Verdict verdict;"));
        CHECK(contains(*source, "return verdict.finish();"));
        CHECK(contains(*source, "verdict.check(\""));
        CHECK_FALSE(contains(*source, "Result = "));     // no hand-made Result line beside the verdict's
        CHECK_FALSE(contains(*source, "%p\", device"));  // a CUdeviceptr is printed as 0x%llx
    }
}

TEST_CASE("A PCIe bus id as CUDA writes it names the sysfs folder", "[cpu][lesson05]") {
    CHECK(pcie::sysfsDeviceName("00000000:19:00.0") == "0000:19:00.0");
    CHECK(pcie::sysfsDeviceName("0000:19:00.0") == "0000:19:00.0");
    CHECK(pcie::sysfsDeviceName("0001:AB:00.0") == "0001:ab:00.0");
    CHECK(pcie::sysfsDeviceName("00010000:3B:00.0") == "10000:3b:00.0");
}

TEST_CASE("PCIe link speed and width text parse as the kernel writes them, and nothing else does", "[cpu][lesson05]") {
    CHECK(pcie::parseLinkSpeed("32.0 GT/s PCIe") == 32.0);
    CHECK(pcie::parseLinkSpeed("8 GT/s") == 8.0);
    CHECK(pcie::parseLinkSpeed("2.5 GT/s") == 2.5);
    for (const char* bad : {"Unknown", "Unknown speed", "", "fast", "32.0", "32.0 GB/s", "-8 GT/s"}) {
        INFO(bad);
        CHECK(pcie::parseLinkSpeed(bad) == 0.0);
    }
    CHECK(pcie::parseLinkWidth("16") == 16);
    CHECK(pcie::parseLinkWidth("1") == 1);
    for (const char* bad : {"x16", "", "0", "16 lanes", "-1"}) {
        INFO(bad);
        CHECK(pcie::parseLinkWidth(bad) == 0);
    }
}

TEST_CASE("The PCIe link's theoretical rate is GT/s x lanes x encoding / 8 for each generation", "[cpu][lesson05]") {
    struct Case {
        double gigaTransfers;
        int generation;
        const char* encoding;
        double x16;  // GB/s per direction at 16 lanes
    };
    for (const Case& c :
         {Case{2.5, 1, "8b/10b", 4.0}, Case{5.0, 2, "8b/10b", 8.0}, Case{8.0, 3, "128b/130b", 8.0 * 16 * 128 / 130 / 8},
          Case{16.0, 4, "128b/130b", 16.0 * 16 * 128 / 130 / 8}, Case{32.0, 5, "128b/130b", 32.0 * 16 * 128 / 130 / 8},
          Case{64.0, 6, "FLIT 242/256", 64.0 * 16 * 242 / 256 / 8}}) {
        INFO(c.gigaTransfers << " GT/s");
        const pcie::Link link = pcie::linkRate(c.gigaTransfers, 16);
        REQUIRE(link.known);
        CHECK(link.generation == c.generation);
        CHECK(std::string(link.encoding) == c.encoding);
        CHECK(std::fabs(link.gigabytesPerSecond - c.x16) < 1e-9);
    }
    CHECK(std::fabs(pcie::linkRate(32.0, 16).gigabytesPerSecond - 63.015) < 0.001);
    CHECK(std::fabs(pcie::linkRate(16.0, 8).gigabytesPerSecond - 15.754) < 0.001);
    CHECK_FALSE(pcie::linkRate(7.0, 16).known);
    CHECK_FALSE(pcie::linkRate(32.0, 0).known);
}

TEST_CASE("The PCIe link is read from a sysfs tree: gen4 x16, gen5 x16, gen1 x16", "[cpu][lesson05]") {
    const pcie::Link gen4 = pcie::readLink(fakeSysfs(), "00000000:17:00.0");
    REQUIRE(gen4.known);
    CHECK(gen4.device == "0000:17:00.0");
    CHECK(gen4.generation == 4);
    CHECK(gen4.lanes == 16);
    CHECK(std::fabs(gen4.gigabytesPerSecond - 31.508) < 0.001);

    const pcie::Link gen5 = pcie::readLink(fakeSysfs(), "0000:19:00.0");
    REQUIRE(gen5.known);
    CHECK(gen5.generation == 5);
    CHECK(std::string(gen5.encoding) == "128b/130b");
    CHECK(std::fabs(gen5.gigabytesPerSecond - 63.015) < 0.001);
    const pcie::Link gen5Max = pcie::readLink(fakeSysfs(), "0000:19:00.0", "max");
    REQUIRE(gen5Max.known);
    CHECK(gen5Max.gigabytesPerSecond == gen5.gigabytesPerSecond);

    const pcie::Link gen1 = pcie::readLink(fakeSysfs(), "0000:1C:00.0");
    REQUIRE(gen1.known);
    CHECK(gen1.generation == 1);
    CHECK(std::string(gen1.encoding) == "8b/10b");
    CHECK(gen1.gigabytesPerSecond == 4.0);
}

TEST_CASE("A missing, garbled or down PCIe link gives no rate and says why", "[cpu][lesson05]") {
    const pcie::Link missing = pcie::readLink(fakeSysfs(), "0000:1a:00.0");
    CHECK_FALSE(missing.known);
    CHECK(contains(missing.reason, "cannot read"));
    CHECK(contains(missing.reason, "current_link_speed"));
    CHECK_FALSE(pcie::readLink(fakeSysfs(), "0000:1a:00.0", "max").known);

    const pcie::Link garbage = pcie::readLink(fakeSysfs(), "0000:1b:00.0");
    CHECK_FALSE(garbage.known);
    CHECK(contains(garbage.reason, "'fast'"));

    const pcie::Link down = pcie::readLink(fakeSysfs(), "0000:1d:00.0");
    CHECK_FALSE(down.known);
    CHECK(contains(down.reason, "'Unknown'"));

    const pcie::Link absent = pcie::readLink(fakeSysfs(), "0000:99:00.0");
    CHECK_FALSE(absent.known);
    CHECK(contains(absent.reason, "cannot read"));
    CHECK(pcie::readLink("/nonexistent-sysfs", "0000:19:00.0").reason.size() > 0);
}

TEST_CASE("std::bit_cast gives 555.0f's IEEE-754 bits, the value the lesson hands to cuMemsetD32", "[cpu][lesson05]") {
    // Derive the bits from the number itself: 555 = 0.5419921875 * 2^10, so the biased
    // exponent is 10 - 1 + 127 and the fraction is (2 * 0.5419921875 - 1) * 2^23.
    int exponent = 0;
    const double mantissa = std::frexp(555.0, &exponent);
    const auto expected = static_cast<std::uint32_t>((exponent - 1 + 127) << 23) |
                          static_cast<std::uint32_t>((2.0 * mantissa - 1.0) * (1 << 23));
    CHECK(std::bit_cast<std::uint32_t>(555.0f) == expected);
    std::uint32_t viaMemcpy = 0;
    const float value = 555.0f;
    std::memcpy(&viaMemcpy, &value, sizeof(value));
    CHECK(viaMemcpy == expected);
}

// ---------------------------------------------------------------------------
// GPU: the lesson's output.

TEST_CASE("Lesson 05 passes and reads every memset pattern back exactly", "[gpu][lesson05]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "device_memory");
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    // The default size is 4 MiB: 1048576 floats, 2097152 halves, 4194304 bytes.
    CHECK(valueOf(r.out, "cuMemsetD32 555.0f") == "1048576 of 1048576 floats read back as 555.0f (bits 0x440ac000)");
    CHECK(valueOf(r.out, "cuMemsetD16 0x3c00 (1.0 in fp16)") == "2097152 of 2097152 halves read back as 0x3c00");
    CHECK(valueOf(r.out, "cuMemsetD8 0xa5") == "4194304 of 4194304 bytes read back as 0xa5");
    CHECK(valueOf(r.out, "partial cuMemsetD32 on elements [262144, 786432)") ==
          "524288 of 524288 set to 555.0f, 2097152 of 2097152 bytes outside still 0xa5");
    CHECK(valueOf(r.out, "memory type of the cuMemAlloc buffer") == "CU_MEMORYTYPE_DEVICE");
    checkAllHeld(r, {"cuMemsetD32 fills every float", "cuMemsetD16 fills every half", "cuMemsetD8 fills every byte",
                     "partial cuMemsetD32 sets its range and nothing else", "round trip returns the source",
                     "free memory back after cuMemFree", "driver no longer knows the freed buffers"});
    // A CUdeviceptr is an integer: printed as 0x%llx, never with %p (which prints "(nil)" or
    // a pointer's format and is undefined for an integer).
    for (const char* buffer : {"device buffer A", "device buffer B"}) {
        INFO(buffer);
        const auto value = valueOf(r.out, buffer);
        REQUIRE(value);
        CHECK(std::regex_match(*value, std::regex("0x[0-9a-f]+ \\(4194304 bytes\\)")));
    }
}

TEST_CASE("Lesson 05 runs its memset and copy checks at the size given with --size", "[gpu][lesson05]") {
    requireGpu();
    RunOptions options;
    options.args = {"--size", "1000004"};  // not a power of two: 250001 floats
    const RunResult r = runLesson(kLesson, options, "device_memory");
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "cuMemsetD32 555.0f") == "250001 of 250001 floats read back as 555.0f (bits 0x440ac000)");
    CHECK(valueOf(r.out, "cuMemsetD16 0x3c00 (1.0 in fp16)") == "500002 of 500002 halves read back as 0x3c00");
    CHECK(valueOf(r.out, "cuMemsetD8 0xa5") == "1000004 of 1000004 bytes read back as 0xa5");
    CHECK(valueOf(r.out, "round trip HtoD -> DtoD -> DtoH") == "equal (1000004 bytes)");
    // Smaller than one 2 MiB page: only an exact comparison would see such a buffer leak.
    CHECK(valueOf(r.out, "free memory difference (end - start)") == "0 bytes (allowed: 0)");
    CHECK(valueOf(r.out, "check free memory back after cuMemFree") == "ok");
    CHECK(contains(r.out, "Result = PASS"));
}

TEST_CASE("Lesson 05's host-device round trips come back equal", "[gpu][lesson05]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "device_memory");
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "round trip HtoD -> DtoD -> DtoH") == "equal (4194304 bytes)");
    const RunResult async = defaultRun(kLesson, "async_copies");
    REQUIRE(async.exitCode == 0);
    CHECK(contains(async.out, "Result = PASS"));
    CHECK(valueOf(async.out, "async round trip write-combined -> device -> pinned") == "equal (4194304 bytes)");
    CHECK(valueOf(async.out, "download to pageable memory") == "equal to the source");
    checkAllHeld(async,
                 {"round trip through pinned memory returns the source", "pageable download returns the source"});
}

TEST_CASE("Lesson 05 shows a pinned async download queued, not run, when its call returns", "[gpu][lesson05]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "async_copies");
    REQUIRE(r.exitCode == 0);
    if (contains(r.out, "section held stream: SKIP ("))
        SKIP("cuStreamWaitValue32 on host memory is not supported here");
    // Deterministic, no clock: the stream is held by cuStreamWaitValue32 until the host opens it.
    CHECK(valueOf(r.out, "cuStreamQuery right after the call") == "CUDA_ERROR_NOT_READY");
    CHECK(valueOf(r.out, "pinned destination while the stream is held") == "still all zero");
    CHECK(valueOf(r.out, "pinned destination after cuStreamSynchronize") == "equal to the source");
    checkAllHeld(r, {"pinned download not run when its call returns", "pinned download lands once the stream runs"});
}

TEST_CASE("Lesson 05 orders stream B after an event of stream A, times a copy and waits on a blocking event",
          "[gpu][lesson05]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "streams_and_events");
    REQUIRE(r.exitCode == 0);
    // Timing is printed, never compared with a figure: only its checks, which no clock can break
    // (the upload's bound is the link's theoretical rate, which no copy can beat).
    const auto upload = valueOf(r.out, "upload of 64 MiB between the events");
    REQUIRE(upload);
    CHECK(std::regex_match(*upload, std::regex("[0-9]+\\.[0-9]{3} ms \\([0-9]+\\.[0-9]{2} GB/s\\)")));
    CHECK(valueOf(r.out, "cuStreamGetFlags(A)") == "0x1 (NON_BLOCKING)");
    CHECK(valueOf(r.out, "cuStreamGetFlags(B)") == "0x1 (NON_BLOCKING)");
    CHECK(valueOf(r.out, "cuEventQuery(blocking) after cuEventSynchronize") == "CUDA_SUCCESS");
    CHECK(valueOf(r.out, "cuStreamQuery(B) after cuEventSynchronize") == "CUDA_SUCCESS");
    CHECK(valueOf(r.out, "words downloaded that hold the uploaded value 0x5ca1ab1e") == "16777216 of 16777216");
    checkAllHeld(
        r, {"streams A and B are non-blocking", "event time is positive", "event time within the host clock around it",
            "blocking event complete after cuEventSynchronize",
            "stream B has nothing left once the blocking event completed", "download returns the timed upload"});
    // The upload is compared with the PCIe link only where sysfs gives the link's rate.
    if (!contains(r.out, "section upload vs link: SKIP ("))
        checkAllHeld(r, {"upload, with the timer's resolution allowed for, within the link's theoretical maximum"});
    if (contains(r.out, "section held stream: SKIP ("))
        SKIP("cuStreamWaitValue32 on host memory is not supported here");
    // Deterministic, no clock: stream A is held by the gate, and B waits for A's event.
    CHECK(valueOf(r.out, "cuStreamQuery(B) while A is held, watched for 50 ms") == "CUDA_ERROR_NOT_READY");
    CHECK(valueOf(r.out, "words B copied back that hold A's value 0x600dcafe") == "16777216 of 16777216");
    checkAllHeld(r, {"stream B waits for A's event", "B's copy reads A's memset", "ready keeps no timestamp"});
    // The error cuda.h names for an event created with CU_EVENT_DISABLE_TIMING.
    CHECK(valueOf(r.out, "cuEventElapsedTime(ready, stop)") == "CUDA_ERROR_INVALID_HANDLE");
    // The probe stream is given 1 s; where it ran in that time, A's memset had not.
    if (!contains(r.out, "section probe: SKIP (")) checkAllHeld(r, {"buffer still zero while A is held"});
}

TEST_CASE("Lesson 05 writes pinned memory through the address cuMemHostGetDevicePointer gives", "[gpu][lesson05]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "pinned_memory");
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "unified addressing") == "yes");
    CHECK(valueOf(r.out, "cuMemsetD32 through the mapped buffer's device address") ==
          "1048576 of 1048576 words on the host read 0xcafef00d");
    CHECK(valueOf(r.out, "cuMemsetD32 through the registered buffer's device address") ==
          "1048576 of 1048576 words on the host read 0x600df00d");
    CHECK(valueOf(r.out, "CU_POINTER_ATTRIBUTE_DEVICE_POINTER agrees with cuMemHostGetDevicePointer") == "yes");
    checkAllHeld(r, {"every pinned buffer is host memory to the driver",
                     "cuMemHostGetFlags returns the flags given to cuMemHostAlloc",
                     "both ways of asking give the same device address",
                     "device address equals host address where unified addressing promises it",
                     "GPU memset reaches every word of the mapped buffer",
                     "GPU memset reaches every word of the registered buffer",
                     "driver no longer knows the freed pinned buffers"});
    for (const char* kind : {"cuMemAllocHost buffer", "cuMemHostAlloc(PORTABLE|DEVICEMAP) buffer",
                             "cuMemHostAlloc(WRITECOMBINED|DEVICEMAP) buffer"}) {
        INFO(kind);
        CHECK(valueOf(r.out, std::string("cuMemHostGetFlags on the freed ") + kind) == "CUDA_ERROR_INVALID_VALUE");
    }
    if (valueOf(r.out, "pageable memory access") == "no")
        CHECK(valueOf(r.out, "check driver no longer knows the unregistered vector") == "ok");
    for (const char* kind : {"cuMemAllocHost buffer", "cuMemHostAlloc(PORTABLE|DEVICEMAP) buffer",
                             "cuMemHostAlloc(WRITECOMBINED|DEVICEMAP) buffer", "cuMemHostRegister buffer"}) {
        INFO(kind);
        CHECK(valueOf(r.out, std::string("memory type of the ") + kind) == "CU_MEMORYTYPE_HOST");
    }
    // With unified addressing the docs promise host address == device address for these two.
    CHECK(contains(r.out, "cuMemAllocHost buffer (CU_POINTER_ATTRIBUTE_DEVICE_POINTER): host "));
    for (const auto& line : lines(r.out)) {
        if (line.rfind("cuMemAllocHost buffer (", 0) == 0 ||
            line.rfind("cuMemHostAlloc(PORTABLE|DEVICEMAP) buffer (", 0) == 0) {
            INFO(line);
            CHECK(contains(line, "(same address)"));
        }
    }
}

TEST_CASE("Lesson 05 gives device memory back: free memory ends where it started", "[gpu][lesson05]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "device_memory");
    REQUIRE(r.exitCode == 0);
    const long long atStart = leadingNumber(valueOf(r.out, "device free memory at start"));
    const long long atEnd = leadingNumber(valueOf(r.out, "device free memory at end"));
    INFO("start " << atStart << " bytes, end " << atEnd << " bytes");
    CHECK(atEnd == atStart);
    // While buffer A was allocated, free memory was lower by at least its size.
    const long long withA = leadingNumber(valueOf(r.out, "device free memory after cuMemAlloc"));
    CHECK(atStart - withA >= 4LL << 20);
    CHECK(contains(r.out, "primary context: released"));
    for (const auto& program : kPrograms) {
        INFO(program);
        const RunResult run = defaultRun(kLesson, program);
        CHECK(contains(run.out, "primary context: released"));
    }
}

TEST_CASE("Lesson 05's bandwidth: pinned beats pageable and no rate exceeds the link", "[gpu][lesson05]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "bandwidth");
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "| size | H2D pageable | H2D pinned | D2H pageable | D2H pinned |"));
    for (const char* size : {"64 KiB", "1 MiB", "16 MiB"}) {
        INFO(size);
        CHECK(tableRow(r.out, size).size() == 4);
    }
    // The program's own checks decide on the rates (with the margin it prints); the test only
    // reads their verdict, or the section's SKIP and its reason.
    if (!contains(r.out, "section pinned vs pageable: SKIP ("))
        checkAllHeld(r, {"pinned upload faster than pageable", "pinned download faster than pageable"});
    if (!contains(r.out, "section rates vs link: SKIP (")) {
        checkAllHeld(r, {"the resolution allowance lowers every rate",
                         "every rate, with the timer's resolution allowed for, within the link's theoretical maximum"});
        // The check allows for the event timer's resolution (cuda.h: "around 0.5 microseconds"):
        // "F GB/s (A GB/s with each interval 0.5 us longer); ...". The allowance lengthens each
        // interval, so the figure it compares, A, is at most the printed fastest rate F (equal
        // only where rounding to two decimals hides the difference).
        const std::string fastestLine = valueOf(r.out, "fastest rate of the table").value_or("");
        const size_t bracket = fastestLine.find(" GB/s (");
        REQUIRE(bracket != std::string::npos);
        CHECK(contains(fastestLine, " GB/s with each interval 0.5 us longer)"));
        const double printedFastest = std::strtod(fastestLine.c_str(), nullptr);
        const double withAllowance = std::strtod(fastestLine.c_str() + bracket + 7, nullptr);
        CHECK(printedFastest > 0.0);
        CHECK(withAllowance > 0.0);
        CHECK(withAllowance <= printedFastest);
    }
    CHECK(contains(r.out, "Result = PASS"));
    // The default run binds the thread near the GPU as --bench does, and puts it back.
    CHECK(valueOf(r.out, "host thread bound to the GPU's local CPUs"));
    const auto restored = valueOf(r.out, "host thread affinity restored");
    REQUIRE(restored);
    CHECK((*restored == "yes" || *restored == "nothing to restore"));
    // Pinned copies against the PCIe link's rate: a percentage, or n/a with the reason.
    for (const char* ratio : {"H2D pinned 16 MiB vs PCIe link", "D2H pinned 16 MiB vs PCIe link"}) {
        INFO(ratio);
        const auto value = valueOf(r.out, ratio);
        REQUIRE(value);
        CHECK((value->rfind("n/a (", 0) == 0 || contains(*value, " x its theoretical rate")));
    }
    CHECK(valueOf(r.out, "PCIe theoretical rate per direction"));
    // The call-time lines are printed for all four combinations, each with what the reference documents.
    const RunResult async = defaultRun(kLesson, "async_copies");
    REQUIRE(async.exitCode == 0);
    for (const char* call : {"cuMemcpyHtoDAsync from pinned memory", "cuMemcpyHtoDAsync from pageable memory",
                             "cuMemcpyDtoHAsync to pinned memory", "cuMemcpyDtoHAsync to pageable memory"})
        CHECK(valueOf(async.out, call));
    CHECK(valuesOf(async.out, "  documented").size() == 4);
}

TEST_CASE("Lesson 05's PCIe link rate is what sysfs says for the GPU's bus id", "[gpu][lesson05]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "bandwidth");
    REQUIRE(r.exitCode == 0);
    const auto busId = valueOf(r.out, "PCI bus id");
    REQUIRE(busId);
    char fromDriver[32] = {};
    auto getBusId = DRIVER_FUNCTION(driver(), cuDeviceGetPCIBusId);
    REQUIRE(getBusId);
    REQUIRE(getBusId(fromDriver, sizeof(fromDriver), 0) == CUDA_SUCCESS);
    CHECK(*busId == fromDriver);
    CHECK(valueOf(r.out, "sysfs device") == "/sys/bus/pci/devices/" + pcie::sysfsDeviceName(fromDriver));
    // The width and generation the device and slot allow do not change with power states.
    const pcie::Link atMost = pcie::readLink("/sys", fromDriver, "max");
    const auto printed = valueOf(r.out, "PCIe link at most (max_link_*)");
    REQUIRE(printed);
    if (atMost.known) {
        CHECK(contains(*printed, "x" + std::to_string(atMost.lanes) + " (gen" + std::to_string(atMost.generation)));
    } else {
        CHECK(printed->rfind("n/a (", 0) == 0);
    }
}

TEST_CASE("Lesson 05 --bench prints the 256 MiB figures and the ratio to the PCIe link", "[gpu][lesson05][bench]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench"};
    options.timeoutSeconds = 300;
    const RunResult r = runLesson(kLesson, options, "bandwidth");
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    for (const char* metric : {"bench: H2D pinned 256 MiB", "bench: D2H pinned 256 MiB", "bench: H2D pageable 256 MiB",
                               "bench: D2H pageable 256 MiB"}) {
        INFO(metric);
        bool found = false;
        for (const auto& line : lines(r.out)) {
            const std::string prefix = std::string(metric) + " = ";
            if (line.rfind(prefix, 0) != 0) continue;
            found = true;
            CHECK(std::strtod(line.c_str() + prefix.size(), nullptr) > 0.0);
            CHECK(contains(line, " GB/s"));
        }
        CHECK(found);
    }
    // The ratio divides two figures of this run: no constant from another machine.
    CHECK_FALSE(contains(r.out, "nvbandwidth ="));
    CHECK(contains(r.out, "bench: H2D pinned vs PCIe link = "));
    CHECK(contains(r.out, "bench: D2H pinned vs PCIe link = "));
    // The bench line repeats the ratio step 3 printed for the largest size.
    auto benchValue = [&](const std::string& metric) -> std::optional<std::string> {
        for (const auto& line : lines(r.out))
            if (line.rfind("bench: " + metric + " = ", 0) == 0) return line.substr(metric.size() + 10);
        return std::nullopt;
    };
    for (const std::string direction : {"H2D", "D2H"}) {
        INFO(direction);
        const auto percent = benchValue(direction + " pinned vs PCIe link");
        const auto ratio = valueOf(r.out, direction + " pinned 256 MiB vs PCIe link");
        REQUIRE(percent);
        REQUIRE(ratio);
        if (percent->rfind("n/a (", 0) == 0) {
            CHECK(*percent == *ratio);
        } else {
            CHECK(percent->substr(percent->size() - 2) == " %");
            CHECK(std::fabs(std::strtod(percent->c_str(), nullptr) / 100.0 - std::strtod(ratio->c_str(), nullptr)) <
                  0.001);
        }
    }
    CHECK(tableRow(r.out, "256 MiB").size() == 4);
}

TEST_CASE("Lesson 05 asked for 1 PiB shows CUDA_ERROR_OUT_OF_MEMORY through the check macro and leaks nothing",
          "[gpu][lesson05][fault]") {
    requireGpu();
    RunOptions options;
    options.args = {"--size", std::to_string(kOnePebibyte)};
    const RunResult r = runLesson(kLesson, options, "device_memory");
    CHECK(r.exitCode == 1);
    CHECK(contains(r.err, "CUDA driver call failed: cuMemAlloc(&deviceA, bytes)"));
    CHECK(contains(r.err, "CUDA_ERROR_OUT_OF_MEMORY (code 2)"));
    CHECK(contains(r.err, "05-memory-alloc/device_memory.cpp:"));
    CHECK(contains(r.err, "hint:"));
    CHECK(contains(r.out, "nothing was allocated"));
    CHECK(valueOf(r.out, "check free memory unchanged after the failed cuMemAlloc") == "ok");
    CHECK(valueOf(r.out, "check device buffer of the requested size allocated") == "FAIL");
    const long long atStart = leadingNumber(valueOf(r.out, "device free memory at start"));
    const long long atEnd = leadingNumber(valueOf(r.out, "device free memory at end"));
    CHECK(atEnd == atStart);
    CHECK(contains(r.out, "Result = FAIL"));
}

// ---------------------------------------------------------------------------
// GPU: the same driver behaviour, checked directly through the driver.

TEST_CASE("cuMemsetD8, D16 and D32 count elements and leave bytes outside the range alone", "[gpu][lesson05]") {
    requireGpu();
    CurrentPrimaryContext context;
    auto memAlloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
    auto memsetD8 = DRIVER_FUNCTION(driver(), cuMemsetD8);
    auto memsetD16 = DRIVER_FUNCTION(driver(), cuMemsetD16);
    auto memsetD32 = DRIVER_FUNCTION(driver(), cuMemsetD32);
    auto copyDtoH = DRIVER_FUNCTION(driver(), cuMemcpyDtoH);
    REQUIRE((memAlloc && memFree && memsetD8 && memsetD16 && memsetD32 && copyDtoH));

    constexpr size_t kBytes = 4096;
    CUdeviceptr buffer = 0;
    REQUIRE(memAlloc(&buffer, kBytes) == CUDA_SUCCESS);
    // Bytes [0, 4096) = 0x11; D16 0x3c00 on halves [64, 96) = bytes [128, 192);
    // D32 555.0f on words [100, 116) = bytes [400, 464).
    REQUIRE(memsetD8(buffer, 0x11, kBytes) == CUDA_SUCCESS);
    REQUIRE(memsetD16(buffer + 128, 0x3c00, 32) == CUDA_SUCCESS);
    REQUIRE(memsetD32(buffer + 400, std::bit_cast<std::uint32_t>(555.0f), 16) == CUDA_SUCCESS);
    std::vector<unsigned char> host(kBytes);
    REQUIRE(copyDtoH(host.data(), buffer, kBytes) == CUDA_SUCCESS);
    CHECK(memFree(buffer) == CUDA_SUCCESS);

    int wrong = 0;
    for (size_t i = 0; i < kBytes; ++i) {
        unsigned char expected = 0x11;
        if (i >= 128 && i < 192) expected = (i % 2 == 0) ? 0x00 : 0x3c;  // little-endian 0x3c00
        if (i >= 400 && i < 464) {
            std::uint32_t word = 0;
            std::memcpy(&word, host.data() + (i - i % 4), 4);
            if (word != std::bit_cast<std::uint32_t>(555.0f)) ++wrong;
            continue;
        }
        if (host[i] != expected) ++wrong;
    }
    CHECK(wrong == 0);
}

TEST_CASE("cuMemsetD32 on an address that is not 4-byte aligned is refused", "[gpu][lesson05][fault]") {
    requireGpu();
    CurrentPrimaryContext context;
    auto memAlloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
    auto memsetD32 = DRIVER_FUNCTION(driver(), cuMemsetD32);
    REQUIRE((memAlloc && memFree && memsetD32));
    CUdeviceptr buffer = 0;
    REQUIRE(memAlloc(&buffer, 4096) == CUDA_SUCCESS);
    const CUresult misaligned = memsetD32(buffer + 2, 0u, 16);
    CHECK(memFree(buffer) == CUDA_SUCCESS);
    CHECK(driver().nameOf(misaligned) == "CUDA_ERROR_INVALID_VALUE");
}

TEST_CASE("A buffer copied host -> device -> device -> host comes back unchanged", "[gpu][lesson05]") {
    requireGpu();
    CurrentPrimaryContext context;
    auto memAlloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
    auto copyHtoD = DRIVER_FUNCTION(driver(), cuMemcpyHtoD);
    auto copyDtoD = DRIVER_FUNCTION(driver(), cuMemcpyDtoD);
    auto copyDtoH = DRIVER_FUNCTION(driver(), cuMemcpyDtoH);
    REQUIRE((memAlloc && memFree && copyHtoD && copyDtoD && copyDtoH));
    constexpr size_t kBytes = (1 << 20) + 12;
    std::vector<unsigned char> source(kBytes);
    std::vector<unsigned char> back(kBytes, 0);
    for (size_t i = 0; i < kBytes; ++i) source[i] = static_cast<unsigned char>(i * 7 + (i >> 11));
    CUdeviceptr a = 0;
    CUdeviceptr b = 0;
    REQUIRE(memAlloc(&a, kBytes) == CUDA_SUCCESS);
    REQUIRE(memAlloc(&b, kBytes) == CUDA_SUCCESS);
    CHECK(copyHtoD(a, source.data(), kBytes) == CUDA_SUCCESS);
    CHECK(copyDtoD(b, a, kBytes) == CUDA_SUCCESS);
    CHECK(copyDtoH(back.data(), b, kBytes) == CUDA_SUCCESS);
    CHECK(memFree(b) == CUDA_SUCCESS);
    CHECK(memFree(a) == CUDA_SUCCESS);
    CHECK(back == source);
}

TEST_CASE("A memset through cuMemHostGetDevicePointer's address lands in the pinned host buffer", "[gpu][lesson05]") {
    requireGpu();
    CurrentPrimaryContext context;
    auto hostAlloc = DRIVER_FUNCTION(driver(), cuMemHostAlloc);
    auto freeHost = DRIVER_FUNCTION(driver(), cuMemFreeHost);
    auto getDevicePointer = DRIVER_FUNCTION(driver(), cuMemHostGetDevicePointer);
    auto memsetD32 = DRIVER_FUNCTION(driver(), cuMemsetD32);
    auto synchronize = DRIVER_FUNCTION(driver(), cuCtxSynchronize);
    auto getAttribute = DRIVER_FUNCTION(driver(), cuPointerGetAttribute);
    REQUIRE((hostAlloc && freeHost && getDevicePointer && memsetD32 && synchronize && getAttribute));

    constexpr size_t kWords = 1 << 16;
    void* mapped = nullptr;
    REQUIRE(hostAlloc(&mapped, kWords * 4, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS);
    std::memset(mapped, 0, kWords * 4);
    CUdeviceptr device = 0;
    REQUIRE(getDevicePointer(&device, mapped, 0) == CUDA_SUCCESS);
    CHECK(memsetD32(device, 0x12345678u, kWords) == CUDA_SUCCESS);
    CHECK(synchronize() == CUDA_SUCCESS);
    const auto* words = static_cast<const std::uint32_t*>(mapped);
    size_t set = 0;
    for (size_t i = 0; i < kWords; ++i) set += words[i] == 0x12345678u;
    unsigned int memoryType = 0;
    CHECK(getAttribute(&memoryType, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(mapped)) ==
          CUDA_SUCCESS);
    CHECK(freeHost(mapped) == CUDA_SUCCESS);
    CHECK(set == kWords);
    CHECK(memoryType == CU_MEMORYTYPE_HOST);
}

TEST_CASE("The driver classifies device, pinned and registered memory, and knows nothing of plain pageable memory",
          "[gpu][lesson05]") {
    requireGpu();
    CurrentPrimaryContext context;
    auto memAlloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
    auto allocHost = DRIVER_FUNCTION(driver(), cuMemAllocHost);
    auto freeHost = DRIVER_FUNCTION(driver(), cuMemFreeHost);
    auto hostRegister = DRIVER_FUNCTION(driver(), cuMemHostRegister);
    auto hostUnregister = DRIVER_FUNCTION(driver(), cuMemHostUnregister);
    auto getAttribute = DRIVER_FUNCTION(driver(), cuPointerGetAttribute);
    auto deviceAttribute = DRIVER_FUNCTION(driver(), cuDeviceGetAttribute);
    REQUIRE((memAlloc && memFree && allocHost && freeHost && hostRegister && hostUnregister && getAttribute &&
             deviceAttribute));
    auto typeOf = [&](CUdeviceptr address, unsigned int& type) {
        return getAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address);
    };

    CUdeviceptr device = 0;
    REQUIRE(memAlloc(&device, 1 << 20) == CUDA_SUCCESS);
    void* pinned = nullptr;
    REQUIRE(allocHost(&pinned, 1 << 20) == CUDA_SUCCESS);
    std::vector<unsigned char> pageable(1 << 20, 0);
    unsigned int deviceType = 0;
    unsigned int pinnedType = 0;
    unsigned int registeredType = 0;
    CHECK(typeOf(device, deviceType) == CUDA_SUCCESS);
    CHECK(typeOf(reinterpret_cast<CUdeviceptr>(pinned), pinnedType) == CUDA_SUCCESS);

    int pageableAccess = 0;
    REQUIRE(deviceAttribute(&pageableAccess, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, context.device()) ==
            CUDA_SUCCESS);
    if (pageableAccess == 0) {
        // Memory the driver neither allocated nor registered: the documented answer is INVALID_VALUE.
        unsigned int pageableType = 0;
        CHECK(driver().nameOf(typeOf(reinterpret_cast<CUdeviceptr>(pageable.data()), pageableType)) ==
              "CUDA_ERROR_INVALID_VALUE");
    }
    REQUIRE(hostRegister(pageable.data(), pageable.size(), 0) == CUDA_SUCCESS);
    CHECK(typeOf(reinterpret_cast<CUdeviceptr>(pageable.data()), registeredType) == CUDA_SUCCESS);
    CHECK(hostUnregister(pageable.data()) == CUDA_SUCCESS);
    CHECK(freeHost(pinned) == CUDA_SUCCESS);
    CHECK(memFree(device) == CUDA_SUCCESS);

    CHECK(deviceType == CU_MEMORYTYPE_DEVICE);
    CHECK(pinnedType == CU_MEMORYTYPE_HOST);
    CHECK(registeredType == CU_MEMORYTYPE_HOST);
}

TEST_CASE("Freeing device memory brings cuMemGetInfo back to its starting figure", "[gpu][lesson05]") {
    requireGpu();
    const MachineToMyself alone;  // free device memory is the whole machine's figure
    CurrentPrimaryContext context;
    auto memAlloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
    REQUIRE((memAlloc && memFree));
    const size_t before = freeDeviceMemory();
    CUdeviceptr a = 0;
    CUdeviceptr b = 0;
    REQUIRE(memAlloc(&a, 64 << 20) == CUDA_SUCCESS);
    REQUIRE(memAlloc(&b, 3 << 20) == CUDA_SUCCESS);
    const size_t during = freeDeviceMemory();
    CHECK(memFree(b) == CUDA_SUCCESS);
    CHECK(memFree(a) == CUDA_SUCCESS);
    const size_t after = freeDeviceMemory();
    INFO("free before " << before << ", during " << during << ", after " << after << " bytes");
    CHECK(static_cast<long long>(before) - static_cast<long long>(during) >= 67LL << 20);
    CHECK(std::llabs(static_cast<long long>(after) - static_cast<long long>(before)) <= kPageBytes);
}

TEST_CASE("cuMemAlloc of 1 PiB fails with CUDA_ERROR_OUT_OF_MEMORY and takes no memory", "[gpu][lesson05][fault]") {
    requireGpu();
    CurrentPrimaryContext context;
    auto memAlloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    REQUIRE(memAlloc);
    const size_t before = freeDeviceMemory();
    CUdeviceptr impossible = 0;
    const CUresult result = memAlloc(&impossible, kOnePebibyte);
    const size_t after = freeDeviceMemory();
    CHECK(driver().nameOf(result) == "CUDA_ERROR_OUT_OF_MEMORY");
    CHECK(std::llabs(static_cast<long long>(after) - static_cast<long long>(before)) <= kPageBytes);
}
