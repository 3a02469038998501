#include <cuda.h>
#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch_test_macros.hpp>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <regex>
#include <string>

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

// Processes (other than the caller) whose executable is `binary`.
int processesRunning(const std::string& binary) {
    char wanted[PATH_MAX] = {};
    if (realpath(binary.c_str(), wanted) == nullptr) return -1;
    int count = 0;
    DIR* proc = opendir("/proc");
    if (proc == nullptr) return -1;
    for (dirent* entry = readdir(proc); entry != nullptr; entry = readdir(proc)) {
        char target[PATH_MAX] = {};
        const std::string link = std::string("/proc/") + entry->d_name + "/exe";
        const ssize_t length = readlink(link.c_str(), target, sizeof(target) - 1);
        if (length > 0 && std::string(target, static_cast<size_t>(length)) == wanted) ++count;
    }
    closedir(proc);
    return count;
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
          "[cpu][lesson13][13]") {
    for (const auto& args : {std::vector<std::string>{"--fork"}, std::vector<std::string>{"--child", "socket"},
                             std::vector<std::string>{"--child"}})
        checkRefusesArguments(kLesson, args);
}

TEST_CASE("Lesson 13 started as a child with no parent says so and exits 1 before it touches the driver",
          "[cpu][lesson13][13]") {
    const RunResult r = runAgainstStub(kLesson, {"--child", "99"});
    CHECK(r.exitCode == 1);
    CHECK(contains(r.err, "child: no request from a parent on fd 99"));
    CHECK_FALSE(contains(r.err, "CUDA_ERROR_STUB_LIBRARY"));
}

TEST_CASE("Lesson 13 against the stub driver fails at cuInit before it starts any child", "[cpu][lesson13][13]") {
    const RunResult r = runAgainstStub(kLesson);
    CHECK(r.exitCode == 1);
    CHECK(contains(r.err, "cuInit(0)"));
    CHECK_FALSE(contains(r.out, "child"));
}

TEST_CASE("A descriptor sent over the lesson's socket arrives as a working duplicate and leaks nothing",
          "[cpu][lesson13][13]") {
    const auto before = ipc::openFds();
    int ends[2] = {-1, -1};
    REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) == 0);
    int pipeEnds[2] = {-1, -1};
    REQUIRE(pipe(pipeEnds) == 0);

    ipc::Message sent;
    sent.request = ipc::Request::Vmm;
    sent.bytes = 12345;
    REQUIRE(ipc::sendMessage(ends[0], sent, pipeEnds[1]));
    close(pipeEnds[1]);  // the message holds its own reference to the pipe's write end
    ipc::Message received;
    int fd = -1;
    REQUIRE(ipc::receiveMessage(ends[1], received, &fd));
    CHECK(received.request == ipc::Request::Vmm);
    CHECK(received.bytes == 12345);
    REQUIRE(fd >= 0);
    // The received number is a new descriptor for the same pipe: what goes in comes out.
    REQUIRE(write(fd, "ipc", 3) == 3);
    char back[4] = {};
    REQUIRE(read(pipeEnds[0], back, 3) == 3);
    CHECK(std::string(back) == "ipc");
    CHECK(ipc::leakedFds(before) == 4);  // two socket ends, the pipe's read end, the received one
    close(fd);
    close(pipeEnds[0]);
    // Once the other end is gone, the receiver sees EOF, not an error or a hang.
    close(ends[0]);
    CHECK_FALSE(ipc::receiveMessage(ends[1], received, &fd));
    CHECK(fd == -1);
    close(ends[1]);
    CHECK(ipc::leakedFds(before) == 0);
}

// ---------------------------------------------------------------------------
// GPU: the lesson's output.

TEST_CASE("Lesson 13 passes and the parent reads the child's pattern back in all three ways", "[gpu][lesson13][13]") {
    requireGpu();
    const RunResult& r = defaultRun(kLesson, kProgram);
    attachToReport(r);
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    for (const char* way : {"legacy", "vmm", "pool"}) {
        INFO(way);
        // "<way>: exported ..." comes first; the verification is the way's last line.
        const auto values = valuesOf(r.out, way);
        REQUIRE_FALSE(values.empty());
        CHECK(allWordsCarryPattern(values.back()));
        CHECK(valueOf(r.out, std::string(way) + " child") == "exit code 0");
    }
    CHECK_FALSE(contains(r.out, ": SKIP ("));
}

TEST_CASE("Lesson 13 prints what each way needs as the driver reports it", "[gpu][lesson13][13]") {
    requireGpu();
    const RunResult& r = defaultRun(kLesson, kProgram);
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
    CHECK(valueOf(r.out, "integrated (Tegra) GPU") == (deviceAttribute(CU_DEVICE_ATTRIBUTE_INTEGRATED) ? "yes" : "no"));
}

TEST_CASE("Lesson 13 reports a child that dies before it maps, reaps it, and gets its memory back",
          "[gpu][lesson13][13][fault]") {
    requireGpu();
    const RunResult& r = defaultRun(kLesson, kProgram);
    requireRan(r);
    CHECK(contains(r.out, "child: received the descriptor, exiting with code 3 before it maps anything"));
    CHECK(valueOf(r.out, "fault child dies before mapping") == "no answer, the socket reported EOF");
    CHECK(valueOf(r.out, "fault child dies before mapping, child") == "exit code 3");
    const auto memory = valueOf(r.out, "fault child dies before mapping, device memory after release");
    REQUIRE(memory);
    CHECK(memory->rfind("back to its start", 0) == 0);
}

TEST_CASE("Lesson 13 names the driver's errors for a closed descriptor and a legacy handle opened by its exporter",
          "[gpu][lesson13][13][fault]") {
    requireGpu();
    const RunResult& r = defaultRun(kLesson, kProgram);
    requireRan(r);
    // Which error a closed descriptor gives is the driver's choice (driver 580: CUDA_ERROR_UNKNOWN).
    const auto closedFd = valueOf(r.out, "fault closed fd");
    REQUIRE(closedFd);
    CHECK(closedFd->rfind("cuMemImportFromShareableHandle returned CUDA_ERROR_", 0) == 0);
    CHECK(contains(r.err, "cuMemImportFromShareableHandle("));
    // The runtime's name for the same code is cudaErrorDeviceUninitialized ("invalid device context").
    CHECK(valueOf(r.out, "fault same process") == "cuIpcOpenMemHandle returned CUDA_ERROR_INVALID_CONTEXT");
    CHECK(contains(r.err, "cuIpcOpenMemHandle("));
}

TEST_CASE("Lesson 13 leaks no descriptor and leaves no child process behind", "[gpu][lesson13][13]") {
    requireGpu();
    const RunResult& r = defaultRun(kLesson, kProgram);
    requireRan(r);
    CHECK(valueOf(r.out, "open fds leaked") == "0");
    CHECK(valueOf(r.out, "child processes not reaped") == "none (waitpid reports ECHILD)");
    // Every child the lesson started has ended with it: none is still running (or a zombie).
    CHECK(processesRunning(lessonBinary(kLesson)) == 0);
}

// ---------------------------------------------------------------------------
// GPU: the driver's behaviour, checked directly.

TEST_CASE("cuIpcOpenMemHandle refuses a handle in the process that exported it", "[gpu][lesson13][13][fault]") {
    requireGpu();
    CurrentPrimaryContext primary;
    auto alloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    auto free = DRIVER_FUNCTION(driver(), cuMemFree);
    auto getHandle = DRIVER_FUNCTION(driver(), cuIpcGetMemHandle);
    auto openHandle = DRIVER_FUNCTION(driver(), cuIpcOpenMemHandle);
    REQUIRE((alloc && free && getHandle && openHandle));
    if (!legacyIpcSupported()) SKIP("the driver reports no IPC support");
    CUdeviceptr buffer = 0;
    REQUIRE(alloc(&buffer, 1 << 20) == CUDA_SUCCESS);
    CUipcMemHandle handle{};
    CHECK(getHandle(&handle, buffer) == CUDA_SUCCESS);
    CUdeviceptr opened = 0;
    const CUresult result = openHandle(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    INFO(driver().nameOf(result));
    CHECK(result == CUDA_ERROR_INVALID_CONTEXT);
    CHECK(free(buffer) == CUDA_SUCCESS);
}

TEST_CASE("cuMemExportToShareableHandle makes a new descriptor at every call, each the caller's to close",
          "[gpu][lesson13][13]") {
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
    CHECK(exportHandle(&first, allocation, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS);
    CHECK(exportHandle(&second, allocation, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS);
    CHECK(first >= 0);
    CHECK(second >= 0);
    CHECK(first != second);
    // Both are open descriptors of this process until it closes them.
    CHECK(close(first) == 0);
    CHECK(close(second) == 0);
    CHECK(release(allocation) == CUDA_SUCCESS);
}
