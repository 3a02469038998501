#include <cuda.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <regex>
#include <string>
#include <utility>

#include "tests/harness.h"
// The lesson's socket plumbing has no CUDA calls: its CPU tests compile it in directly.
#include "13-ipc/ipc_channel.cpp"

using namespace harness;

namespace {

const std::string kLesson = "13-ipc";
// The lesson's one program, named after it. Passed as a named string: the default argument
// would be a temporary, and GCC 13+ warns that the returned reference may dangle.
const std::string kProgram = "13-ipc";

// "N of N words carry the child's pattern" with both numbers equal and above zero.
bool allWordsCarryPattern(const std::optional<std::string>& value) {
    static const std::regex line("([1-9][0-9]*) of ([1-9][0-9]*) words carry the child's pattern");
    std::smatch match;
    return value && std::regex_match(*value, match, line) && match[1] == match[2];
}

// The program printed "check NAME: ok".
bool checkHeld(const RunResult& r, const std::string& name) {
    return contains(r.out, "check " + name + ": ok\n");
}

int deviceAttribute(CUdevice_attribute which) {
    auto deviceGet = DRIVER_FUNCTION(driver(), cuDeviceGet);
    auto getAttribute = DRIVER_FUNCTION(driver(), cuDeviceGetAttribute);
    REQUIRE(deviceGet);
    REQUIRE(getAttribute);
    CUdevice device = 0;
    REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);
    int value = 0;
    REQUIRE(getAttribute(&value, which, device) == CUDA_SUCCESS);
    return value;
}

// What the lesson decides for the legacy way (older headers lack the IPC attribute).
bool legacyIpcSupported() {
#if CUDA_VERSION >= 12000
    return deviceAttribute(CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED) != 0;
#else
    return deviceAttribute(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) != 0;
#endif
}


}  // namespace

// ---------------------------------------------------------------------------
// CPU: no driver needed.

TEST_CASE("Lesson 13 rejects an unknown argument and a malformed --child with a usage line and exit 2",
          "[cpu][lesson13]") {
    for (const auto& args : {std::vector<std::string>{"--fork"}, std::vector<std::string>{"--child", "socket"},
                             std::vector<std::string>{"--child"}})
        checkRefusesArguments(kLesson, args);
}

TEST_CASE("Lesson 13 started as a child with no parent says so and exits 1 before it touches the driver",
          "[cpu][lesson13]") {
    const RunResult r = runAgainstStub(kLesson, {"--child", "99"});
    CHECK(r.exitCode == 1);
    CHECK(contains(r.err, "child: no request from a parent on fd 99"));
    CHECK_FALSE(contains(r.err, "CUDA_ERROR_STUB_LIBRARY"));
}

TEST_CASE("Lesson 13 against the stub driver fails at cuInit before it starts any child", "[cpu][lesson13]") {
    const RunResult r = runAgainstStub(kLesson);
    CHECK(r.exitCode == 1);
    CHECK(contains(r.err, "cuInit(0)"));
    CHECK_FALSE(contains(r.out, "child"));
}

TEST_CASE("A descriptor sent over the lesson's socket arrives as a working duplicate, beside the child's answer",
          "[cpu][lesson13]") {
    int ends[2] = {-1, -1};
    REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) == 0);
    int pipeEnds[2] = {-1, -1};
    REQUIRE(pipe(pipeEnds) == 0);
    int fd = -1;
    const Cleanup closeAll([&] {
        for (const int d : {ends[0], ends[1], pipeEnds[0], pipeEnds[1], fd})
            if (d >= 0) close(d);
    });

    ipc::Message sent;
    sent.request = ipc::Request::Written;
    sent.bytes = 12345;
    sent.result = CUDA_ERROR_INVALID_VALUE;  // a child's answer: its first failed call
    std::snprintf(sent.failedCall, sizeof(sent.failedCall), "%s", "cuMemMap");
    REQUIRE(ipc::sendMessage(ends[0], sent, pipeEnds[1]));
    close(pipeEnds[1]);  // the message holds its own reference to the pipe's write end
    pipeEnds[1] = -1;
    ipc::Message received;
    REQUIRE(ipc::receiveMessage(ends[1], received, &fd));
    CHECK(received.request == ipc::Request::Written);
    CHECK(received.bytes == 12345);
    CHECK(received.result == CUDA_ERROR_INVALID_VALUE);
    CHECK(std::string(received.failedCall) == "cuMemMap");
    REQUIRE(fd >= 0);
    // The received number is a new descriptor for the same pipe: what goes in comes out.
    REQUIRE(write(fd, "ipc", 3) == 3);
    char back[4] = {};
    REQUIRE(read(pipeEnds[0], back, 3) == 3);
    CHECK(std::string(back) == "ipc");
    // Once the other end is gone, the receiver sees EOF, not an error or a hang.
    close(ends[0]);
    ends[0] = -1;
    int none = -1;
    CHECK_FALSE(ipc::receiveMessage(ends[1], received, &none));
    CHECK(none == -1);
}

TEST_CASE("A tracked descriptor counts as open until it is closed, even when its number is reused",
          "[cpu][lesson13]") {
    const int openBefore = ipc::descriptorsStillOpen();  // what earlier tests in this process left
    const size_t trackedBefore = ipc::descriptorsTracked();
    int pipeEnds[2] = {-1, -1};
    REQUIRE(pipe(pipeEnds) == 0);
    int reused = -1;
    const Cleanup closeAll([&] {
        for (const int d : {pipeEnds[0], pipeEnds[1], reused})
            if (d >= 0) close(d);
    });
    ipc::trackDescriptor(pipeEnds[0], "a pipe's read end (test)");
    ipc::trackDescriptor(pipeEnds[1], "a pipe's write end (test)");
    CHECK(ipc::descriptorsTracked() == trackedBefore + 2);
    CHECK(ipc::descriptorsStillOpen() == openBefore + 2);  // the leak the lesson's check must see

    const int closedNumber = pipeEnds[1];
    close(pipeEnds[1]);
    pipeEnds[1] = -1;
    CHECK(ipc::descriptorsStillOpen() == openBefore + 1);
    // A new descriptor takes the lowest free number, here the one just closed. That file is
    // not the tracked one (it has no owner mark) and must not count as still open.
    reused = open("/dev/null", O_RDONLY | O_CLOEXEC);
    REQUIRE(reused >= 0);
    INFO("closed fd " << closedNumber << ", /dev/null opened as fd " << reused);
    CHECK(ipc::descriptorsStillOpen() == openBefore + 1);
    close(pipeEnds[0]);
    pipeEnds[0] = -1;
    CHECK(ipc::descriptorsStillOpen() == openBefore);
}

// ---------------------------------------------------------------------------
// GPU: the lesson's output.

TEST_CASE("Lesson 13 passes and the parent reads the child's pattern back in all three ways", "[gpu][lesson13]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, kProgram);
    attachToReport(r);
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK_FALSE(contains(r.out, ": FAIL\n"));
    for (const char* way : {"legacy", "vmm", "pool"}) {
        INFO(way);
        const std::string name(way);
        // "<way>: exported ..." comes first; the verification is the way's last such line.
        const auto values = valuesOf(r.out, name);
        REQUIRE_FALSE(values.empty());
        CHECK(allWordsCarryPattern(values.back()));
        CHECK(valueOf(r.out, name + " child's driver calls") == "all succeeded");
        CHECK(valueOf(r.out, name + " child") == "exit code 0");
        CHECK(checkHeld(r, name + " child's driver calls succeeded"));
        CHECK(checkHeld(r, name + " parent reads the child's pattern"));
        CHECK(checkHeld(r, name + " child exits cleanly"));
    }
    // The legacy handle shares the driver's whole block: a 2 MiB-multiple size shares nothing else.
    CHECK(valueOf(r.out, "legacy: the allocation the driver reports") == "2097152 bytes, starting at the buffer: yes");
    CHECK(checkHeld(r, "legacy shares a whole allocation of a 2 MiB-multiple size"));
    CHECK_FALSE(contains(r.out, ": SKIP ("));
}

TEST_CASE("Lesson 13 prints what each way needs as the driver reports it", "[gpu][lesson13]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, kProgram);
    requireRan(r);
    CHECK(valueOf(r.out, "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING") ==
          std::to_string(deviceAttribute(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)));
#if CUDA_VERSION >= 12000
    CHECK(valueOf(r.out, "CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED") ==
          std::to_string(deviceAttribute(CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED)));
#else
    CHECK(valueOf(r.out, "CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED") == "not in this toolkit's cuda.h (CUDA < 12.0)");
#endif
    CHECK(valueOf(r.out, "CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED") ==
          std::to_string(deviceAttribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)));
    CHECK(valueOf(r.out, "CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED") ==
          std::to_string(deviceAttribute(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)));
    CHECK(valueOf(r.out, "CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES") ==
          std::to_string(deviceAttribute(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES)));
    CHECK(valueOf(r.out, "integrated (Tegra) GPU") == (deviceAttribute(CU_DEVICE_ATTRIBUTE_INTEGRATED) ? "yes" : "no"));
    // The driver's version is asked before any attribute that an older driver would not know.
    auto driverGetVersion = DRIVER_FUNCTION(driver(), cuDriverGetVersion);
    REQUIRE(driverGetVersion);
    int version = 0;
    REQUIRE(driverGetVersion(&version) == CUDA_SUCCESS);
    const auto printed = valueOf(r.out, "driver version");
    REQUIRE(printed);
    CHECK(contains(*printed, "(cuDriverGetVersion = " + std::to_string(version) + ")"));
}

TEST_CASE("Lesson 13 reports a child that dies before it maps, reaps it, and gets its memory back",
          "[gpu][lesson13][fault]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, kProgram);
    requireRan(r);
    CHECK(contains(r.out, "child: received the descriptor, exiting with code 3 before it maps anything"));
    CHECK(valueOf(r.out, "fault child dies before mapping") == "no answer, the socket reported EOF");
    CHECK(valueOf(r.out, "fault child dies before mapping, child") == "exit code 3");
    CHECK(checkHeld(r, "parent sees end of file when the child dies"));
    CHECK(checkHeld(r, "waitpid reports the dead child's exit code"));
    // The program compares what came back with half the allocation (several granules), so a
    // release that frees nothing cannot pass as "back".
    CHECK(checkHeld(r, "cuMemRelease gives the shared allocation back"));
    CHECK(valueOf(r.out, "fault child dies before mapping, allocation").has_value());
}

TEST_CASE("Lesson 13 names the driver's errors for a closed descriptor and a legacy handle opened by its exporter",
          "[gpu][lesson13][fault]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, kProgram);
    requireRan(r);
    // Which error a descriptor that names nothing gives is the driver's choice: cuda.h names none.
    const auto closedFd = valueOf(r.out, "fault closed fd");
    REQUIRE(closedFd);
    CHECK(closedFd->rfind("cuMemImportFromShareableHandle returned CUDA_ERROR_", 0) == 0);
    CHECK(contains(r.err, "cuMemImportFromShareableHandle("));
    CHECK(checkHeld(r, "import of a descriptor that names nothing fails"));
    // The runtime's name for the same code is cudaErrorDeviceUninitialized ("invalid device context").
    CHECK(valueOf(r.out, "fault same process") == "cuIpcOpenMemHandle returned CUDA_ERROR_INVALID_CONTEXT");
    CHECK(contains(r.err, "cuIpcOpenMemHandle("));
    CHECK(checkHeld(r, "cuIpcOpenMemHandle refuses the exporting process"));
}

TEST_CASE("Lesson 13 leaks no descriptor and leaves no child process behind", "[gpu][lesson13]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, kProgram);
    requireRan(r);
    if (!contains(r.out, ": SKIP (")) {
        // Three exports (vmm, pool, the dying child's) and the parent's end of four socket pairs.
        CHECK(valueOf(r.out, "descriptors to close (driver exports, socket ends)") == "7");
        CHECK(valueOf(r.out, "child processes started") == "4");
    }
    CHECK(valueOf(r.out, "descriptors still open") == "0");
    CHECK(checkHeld(r, "every exported descriptor and socket end is closed"));
    // The program asks waitpid about each child's own pid: ECHILD means reaped.
    CHECK(valueOf(r.out, "child processes not reaped") == "0");
    CHECK(checkHeld(r, "every child process was reaped"));
}

// ---------------------------------------------------------------------------
// GPU: the driver's behaviour, checked directly.

TEST_CASE("cuIpcOpenMemHandle refuses a handle in the process that exported it", "[gpu][lesson13][fault]") {
    requireGpu();
    CurrentPrimaryContext primary;
    auto alloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    auto free = DRIVER_FUNCTION(driver(), cuMemFree);
    auto getHandle = DRIVER_FUNCTION(driver(), cuIpcGetMemHandle);
    auto openHandle = DRIVER_FUNCTION(driver(), cuIpcOpenMemHandle);
    auto closeHandle = DRIVER_FUNCTION(driver(), cuIpcCloseMemHandle);
    REQUIRE((alloc && free && getHandle && openHandle && closeHandle));
    if (!legacyIpcSupported()) SKIP("the driver reports no IPC support");
    CUdeviceptr buffer = 0;
    REQUIRE(alloc(&buffer, 1 << 20) == CUDA_SUCCESS);
    CUdeviceptr opened = 0;
    const Cleanup release([&] {
        if (opened != 0) closeHandle(opened);
        free(buffer);
    });
    CUipcMemHandle handle{};
    REQUIRE(getHandle(&handle, buffer) == CUDA_SUCCESS);
    const CUresult result = openHandle(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    INFO(driver().nameOf(result));
    if (result != CUDA_SUCCESS) opened = 0;
    CHECK(result == CUDA_ERROR_INVALID_CONTEXT);
}

TEST_CASE("cuMemExportToShareableHandle makes a new descriptor at every call, each the caller's to close",
          "[gpu][lesson13]") {
    requireGpu();
    CurrentPrimaryContext primary;
    if (deviceAttribute(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) == 0)
        SKIP("the driver reports no POSIX fd handles");
    auto granularityOf = DRIVER_FUNCTION(driver(), cuMemGetAllocationGranularity);
    auto create = DRIVER_FUNCTION(driver(), cuMemCreate);
    auto exportHandle = DRIVER_FUNCTION(driver(), cuMemExportToShareableHandle);
    auto release = DRIVER_FUNCTION(driver(), cuMemRelease);
    REQUIRE((granularityOf && create && exportHandle && release));
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = primary.device();
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t granularity = 0;
    REQUIRE(granularityOf(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
    CUmemGenericAllocationHandle allocation = 0;
    REQUIRE(create(&allocation, granularity, &prop, 0) == CUDA_SUCCESS);
    int first = -1;
    int second = -1;
    const Cleanup releaseAll([&] {
        if (first >= 0) close(first);
        if (second >= 0) close(second);
        release(allocation);
    });
    CHECK(exportHandle(&first, allocation, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS);
    CHECK(exportHandle(&second, allocation, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS);
    CHECK(first >= 0);
    CHECK(second >= 0);
    CHECK(first != second);
    // Both are open descriptors of this process until it closes them.
    CHECK(fcntl(first, F_GETFD) != -1);
    CHECK(fcntl(second, F_GETFD) != -1);
}
