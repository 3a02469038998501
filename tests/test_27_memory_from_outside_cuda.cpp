// Lesson 27: memory from outside CUDA — Vulkan buffers, images and timeline semaphores imported
// into CUDA, device memory exported as a dma-buf, and an OpenGL buffer and texture (headless,
// through EGL) mapped into CUDA.
#include <cuda.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch_test_macros.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/course_util.h"
#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "27-memory-from-outside-cuda";
const std::vector<std::string> kVulkanPrograms = {"vulkan_buffer", "vulkan_image_and_graph"};
const std::string kNoHeaders =
    "Result = SKIP (Vulkan headers were not found at build time: apt-get install libvulkan-dev)";
const std::string kNoLoader = "Result = SKIP (Vulkan loader libvulkan.so.1 not found: install libvulkan1)";
// dma_buf's check of the import back, and the reason it SKIPs where the driver refuses the import.
const std::string kImportCheckName = "the dma-buf imported back reads as the words written";
const std::string kImportCheck = "check " + kImportCheckName;
// The end of the SKIP reason, after the code the refused import returned.
const std::string kTegraOnly =
    "cuda.h: importing a dma_buf is supported only on Tegra Jetson platforms, from the Thor series on)";
const std::string kNoDriver =
    "Result = SKIP (no Vulkan driver found: vkCreateInstance returned VK_ERROR_INCOMPATIBLE_DRIVER; NVIDIA's ships "
    "with the NVIDIA driver (nvidia_icd.json), and VK_DRIVER_FILES can point the loader at it)";

// Whether the course's build compiled the lesson without the Vulkan headers (setup.sh decided so).
bool builtWithoutVulkan() {
    return contains(readText(buildDir() + "/setup/vulkan.cflags"), "COURSE_NO_VULKAN");
}

// Whether this machine has the Vulkan loader the programs open.
bool vulkanLoaderPresent() {
    void* loader = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (loader != nullptr) dlclose(loader);
    return loader != nullptr;
}

// The UUID of a CUDA device in nvidia-smi's form, as the driver gives it to the test.
std::string deviceUuid(int ordinal) {
    auto deviceGet = DRIVER_FUNCTION(driver(), cuDeviceGet);
    auto getUuid = DRIVER_FUNCTION(driver(), cuDeviceGetUuid);
    REQUIRE(deviceGet);
    REQUIRE(getUuid);
    CUdevice device = 0;
    REQUIRE(deviceGet(&device, ordinal) == CUDA_SUCCESS);
    CUuuid uuid{};
    REQUIRE(getUuid(&uuid, device) == CUDA_SUCCESS);
    const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
    char text[64];
    std::snprintf(text, sizeof(text), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                  b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return text;
}

// The first word of a value ("1" of "1 of 2 (...)").
std::string firstWord(const std::string& value) {
    return value.substr(0, value.find(' '));
}

int deviceZeroAttribute(CUdevice_attribute attribute) {
    auto deviceGet = DRIVER_FUNCTION(driver(), cuDeviceGet);
    auto getAttribute = DRIVER_FUNCTION(driver(), cuDeviceGetAttribute);
    REQUIRE(deviceGet);
    REQUIRE(getAttribute);
    CUdevice device = 0;
    REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);
    int value = 0;
    REQUIRE(getAttribute(&value, attribute, device) == CUDA_SUCCESS);
    return value;
}

// A machine without the Vulkan headers, not root, offline (as tests/test_setup.cpp plays one):
// COURSE_SETUP_ROOT makes setup.sh look for the headers under an empty folder.
std::string machineWithoutVulkan() {
    const std::string dir = buildDir() + "/tests/machines/no-vulkan-not-root";
    REQUIRE(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "/bin' '" + dir + "/root'").c_str()) == 0);
    REQUIRE(writeFile(dir + "/bin/id",
                      "#!/bin/sh\n[ \"$1\" = -u ] && { echo 1000; exit 0; }\nexec /usr/bin/id \"$@\"\n", 0755));
    REQUIRE(writeFile(dir + "/bin/apt-get",
                      "#!/bin/sh\necho 'E: Unable to locate package libvulkan-dev' >&2\nexit 100\n", 0755));
    return dir;
}

}  // namespace

// ---------------------------------------------------------------------------
// CPU: no GPU needed.

TEST_CASE("Lesson 27 runs its four programs in order", "[cpu][lesson27]") {
    CHECK(lessonPrograms(kLesson) ==
          std::vector<std::string>{"vulkan_buffer", "vulkan_image_and_graph", "dma_buf", "gl_interop"});
}

TEST_CASE("Lesson 27's Vulkan and dma-buf programs reject unknown or incomplete arguments with exit 2",
          "[cpu][lesson27]") {
    for (const std::string program : {"vulkan_buffer", "vulkan_image_and_graph", "dma_buf"}) {
        INFO(program);
        checkRefusesArguments(kLesson, {"--no-such-flag"}, program);
        checkRefusesArguments(kLesson, {"--device"}, program);
        checkRefusesArguments(kLesson, {"--device", "one"}, program);
    }
}

TEST_CASE("Without a Vulkan driver the Vulkan programs say what is missing and exit 77 before any CUDA call",
          "[cpu][lesson27]") {
    // The loader is pointed at a driver list that does not exist, so no machine has a Vulkan driver
    // here; the stub libcuda fails every CUDA call, so a CUDA call would show.
    const std::string expected = builtWithoutVulkan() ? kNoHeaders : (vulkanLoaderPresent() ? kNoDriver : kNoLoader);
    for (const std::string& program : kVulkanPrograms) {
        INFO(program);
        RunOptions options;
        options.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();
        options.setEnv["VK_DRIVER_FILES"] = "/nonexistent/lesson27_icd.json";
        options.setEnv["VK_ICD_FILENAMES"] = "/nonexistent/lesson27_icd.json";
        options.unsetEnv = {"VK_ADD_DRIVER_FILES"};
        const RunResult r = run(lessonBinary(kLesson, program), options);
        attachToReport(r);
        CHECK(r.exitCode == 77);
        REQUIRE_FALSE(lines(r.out).empty());
        CHECK(lines(r.out).back() == expected);
        CHECK_FALSE(contains(r.err, "CUDA driver call failed"));
    }
}

TEST_CASE(
    "Without the Vulkan, OpenGL and EGL headers and without root, lesson 27 still builds and its Vulkan and OpenGL "
    "programs say what to install",
    "[cpu][setup][lesson27]") {
    const std::string machine = machineWithoutVulkan();
    const std::string build = machine + "/build";
    RunOptions options;
    options.args = {"-s", "-C", repoRoot(), "BUILD=" + build, "WERROR=1", "build-27"};
    options.setEnv["PATH"] =
        machine + "/bin:" + std::string(std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin");
    options.setEnv["COURSE_SETUP_ROOT"] = machine + "/root";
    options.unsetEnv = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "CATCH2_PREFIX", "DEBIAN_MIRROR"};
    options.timeoutSeconds = 600;
    const RunResult made = run("make", options);
    attachToReport(made);
    REQUIRE(made.exitCode == 0);
    CHECK(contains(made.err, "the Vulkan programs of lesson 27 are built without Vulkan: this user is not root"));
    CHECK(contains(made.err, "apt-get install libvulkan-dev"));
    CHECK(contains(readText(build + "/setup/vulkan.cflags"), "-DCOURSE_NO_VULKAN"));

    // Every program of the lesson is built; each Vulkan program runs, before any driver call, as
    // "not applicable here" with the package to install.
    for (const auto& program : lessonPrograms(kLesson)) {
        INFO("program " << program);
        CHECK(access((build + "/" + kLesson + "/" + program).c_str(), X_OK) == 0);
    }
    for (const std::string& program : kVulkanPrograms) {
        INFO(program);
        RunOptions stub;
        stub.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();
        const RunResult r = run(build + "/" + kLesson + "/" + program, stub);
        CHECK(r.exitCode == course::kExitNotApplicable);
        CHECK(r.out == kNoHeaders + "\n");
        CHECK(r.err.empty());
    }

    // gl_interop, built on the same machine without the OpenGL and EGL headers; against the stub
    // driver every driver call fails: exit 77 and an empty stderr show that none was made.
    CHECK(contains(made.err, "the OpenGL programs of lesson 27 are built without OpenGL: this user is not root"));
    CHECK(contains(made.err, "the EGL programs of lessons 10 and 27 are built without EGL: this user is not root"));
    RunOptions stub;
    stub.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();
    const RunResult gl = run(build + "/" + kLesson + "/gl_interop", stub);
    attachToReport(gl);
    CHECK(gl.exitCode == course::kExitNotApplicable);
    CHECK(gl.out ==
          "Result = SKIP (the OpenGL and EGL headers were not found at build time: apt-get install libgl-dev "
          "libopengl-dev libegl-dev)\n");
    CHECK(gl.err.empty());
}

// ---------------------------------------------------------------------------
// GPU.

TEST_CASE("The Vulkan programs pick the Vulkan device whose UUID is the CUDA device's", "[gpu][lesson27]") {
    requireGpu();
    const std::string uuid = deviceUuid(0);
    for (const std::string& program : kVulkanPrograms) {
        INFO(program);
        const RunResult r = defaultRun(kLesson, program);
        requireRan(r);
        CHECK(valueOf(r.out, "CUDA device 0 UUID") == uuid);
        CHECK(valueOf(r.out, "Vulkan device UUID") == uuid);
        // A program that ran past step 3 took a device alone in its device group (it SKIPs otherwise).
        CHECK(valueOf(r.out, "physical devices in its Vulkan device group") == "1");
        CHECK(valueOf(r.out, "timeline semaphore interop") == "yes");
    }
}

TEST_CASE("What Vulkan writes CUDA reads, and back, ordered only by timeline semaphores", "[gpu][lesson27]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "vulkan_buffer");
    requireRan(r);
    CHECK(r.exitCode == 0);
    // What the program passed to cuImportExternalMemory is the whole VkDeviceMemory, which has room
    // for the 1 MiB buffer twice unless the driver wanted it dedicated; the mapping is all of it, and
    // the range the driver reports for the mapped pointer is at least that large.
    const auto allocation = valueOf(r.out, "allocation size");
    const auto imported = valueOf(r.out, "import size (CUDA_EXTERNAL_MEMORY_HANDLE_DESC::size)");
    REQUIRE(allocation);
    REQUIRE(imported);
    CHECK(firstWord(*imported) == firstWord(*allocation));
    if (contains(*allocation, "dedicated: no")) CHECK(std::stoull(*allocation) >= 2 * 1048576ull);
    CHECK(checkOk(r.out, "CUDA imported the whole allocation"));
    CHECK(valueOf(r.out, "mapped into CUDA") ==
          firstWord(*allocation) + " bytes from offset 0, the buffer its first 1048576");
    const auto range = valueOf(r.out, "mapped range (cuMemGetAddressRange)");
    REQUIRE(range);
    CHECK(std::stoull(*range) >= std::stoull(*allocation));
    CHECK(valueOf(r.out, "elements CUDA read as Vulkan wrote them") == "262144 of 262144");
    CHECK(valueOf(r.out, "elements Vulkan read back as 3 * value + 7") == "262144 of 262144");
    // Each side was held at the gate while the other had not signalled: neither ran early.
    CHECK(valueOf(r.out, "CUDA's kernel 200 ms after queuing, gate at 0") == "not run");
    CHECK(valueOf(r.out, "Vulkan's read-back 200 ms after CUDA's kernel, gate at 1") == "not run");
    // ... and ran once the other side's value came, within the host's limit.
    CHECK(valueOf(r.out, "CUDA's kernel once the gate is at 1, within 10 s") == "ran");
    CHECK(valueOf(r.out, "Vulkan's read-back once the gate is at 2, within 10 s") == "ran");
    CHECK(valueOf(r.out, "timeline value at the end") == "2");
}

TEST_CASE("A Vulkan image reads in CUDA as an array; semaphore graph nodes take their values from where they were set",
          "[gpu][lesson27]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "vulkan_image_and_graph");
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(valueOf(r.out, "CUDA's array, level 0") == "256 x 128, depth 0, 4 channels of CU_AD_FORMAT_UNSIGNED_INT8");
    // CUDA's copy was queued before Vulkan's work was submitted: it waited, then ran.
    CHECK(valueOf(r.out, "CUDA's copy 200 ms after queuing, Vulkan's work not submitted") == "not run");
    CHECK(valueOf(r.out, "CUDA's copy once Vulkan's work is submitted, within 10 s") == "ran");
    // 256 x 128 texels, 128 x 64 of them copied.
    CHECK(valueOf(r.out, "texels outside the rectangle with the clear colour") == "24576 of 24576");
    CHECK(valueOf(r.out, "texels inside the rectangle as Vulkan copied them") == "8192 of 8192");
    CHECK(valueOf(r.out, "launch, 200 ms with go at 1") == "still waiting");
    CHECK(valueOf(r.out, "launch, 200 ms with go at 2") == "still waiting");
    CHECK(valueOf(r.out, "launch, once go is 2, within 10 s") == "finished");
    CHECK(valueOf(r.out, "launch, once go is 3, within 10 s") == "finished");
    // While each launch waits for go, done still holds the value from before it: the signal node comes last.
    CHECK(valuesOf(r.out, "done while the launch waits, as Vulkan reads it") == std::vector<std::string>{"0", "2"});
    CHECK(checkOk(r.out, "the signal node did not signal while the launch was held"));
    CHECK(valuesOf(r.out, "done, as Vulkan reads it") == std::vector<std::string>{"2", "3"});
    CHECK(valueOf(r.out, "counter elements at 2 after two launches") == "4096 of 4096");
    CHECK(valueOf(r.out, "graph's wait node now") == "1 semaphore, go >= 2");
    CHECK(valueOf(r.out, "graph's signal node now") == "1 semaphore, done = 2");
}

TEST_CASE("dma_buf exports a range the kernel sees at its size, and says where it cannot import it back",
          "[gpu][lesson27]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "dma_buf");
#if CUDA_VERSION >= 11070
    if (deviceZeroAttribute(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) == 0) {
        CHECK(r.exitCode == 77);
        CHECK(contains(r.out, "Result = SKIP (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0 on this device)"));
        return;
    }
#endif
    requireRan(r);
    CHECK(r.exitCode == 0);
    // The kernel's own count of the dma-buf's bytes, where its fdinfo lists one: the 4 MiB exported.
    const auto listed = valueOf(r.out, "size (fdinfo)");
    REQUIRE(listed);
    if (*listed != "(not listed) bytes") CHECK(*listed == "4194304 bytes");
    const auto importVerdict = valueOf(r.out, kImportCheck);
    REQUIRE(importVerdict);
#if CUDA_VERSION >= 13000
    const auto imported = valueOf(r.out, "cuImportExternalMemory(CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD)");
    REQUIRE(imported);
    if (*imported == "CUDA_SUCCESS") {
        CHECK(*importVerdict == "ok");
        CHECK(valueOf(r.out, "words read through the second mapping as written through the first") ==
              "1048576 of 1048576");
    } else {
        // cuda.h names no code for "not supported here": any refusal SKIPs, with the code it returned.
        CHECK(*importVerdict == "SKIP (" + *imported + "; " + kTegraOnly);
    }
    // cuda.h: importing a dma_buf is supported only on Tegra Jetson, Thor and later; not on a discrete GPU.
    if (deviceZeroAttribute(CU_DEVICE_ATTRIBUTE_INTEGRATED) == 0) {
        CHECK(importVerdict->starts_with("SKIP ("));
        CHECK(importVerdict->ends_with(kTegraOnly));
    }
    // The descriptor, still the program's after the import (cuda.h transfers none for a dma-buf), closed:
    // none left on the dma-buf.
    CHECK(valueOf(r.out, "descriptors of this process still on the dma-buf") == "0");
#else
    CHECK(*importVerdict == "SKIP (built with CUDA " + course::formatCudaVersion(CUDA_VERSION) +
                                " headers; the course imports a dma-buf only with 13.0 headers on (13.0's cuda.h has "
                                "CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD; 12.4's and 11.8's do not))");
#endif
    const bool flushes = (deviceZeroAttribute(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS) &
                          CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST) != 0;
    if (flushes)
        CHECK(valueOf(r.out, "cuFlushGPUDirectRDMAWrites(CURRENT_CTX, TO_OWNER)") == "CUDA_SUCCESS");
    else
        CHECK(contains(r.out, "section cuFlushGPUDirectRDMAWrites: SKIP ("));
}

#if CUDA_VERSION >= 11070
TEST_CASE("cuMemGetHandleForAddressRange gives a dma-buf descriptor of the range's size", "[gpu][lesson27]") {
    requireGpu();
    if (deviceZeroAttribute(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) == 0)
        SKIP("CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0 on device 0");
    CurrentPrimaryContext context;
    auto alloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
    auto getHandle = DRIVER_FUNCTION(driver(), cuMemGetHandleForAddressRange);
    REQUIRE(alloc);
    REQUIRE(memFree);
    REQUIRE(getHandle);
    // 2 MiB, exported whole where it starts on a page boundary; else the page-aligned 2 MiB
    // window of an allocation one page larger (cuda.h asks for page-aligned start and size).
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t bytes = 2u << 20;
    CUdeviceptr allocation = 0;
    REQUIRE(alloc(&allocation, bytes) == CUDA_SUCCESS);
    if (allocation % page != 0) {
        REQUIRE(memFree(allocation) == CUDA_SUCCESS);
        REQUIRE(alloc(&allocation, bytes + page) == CUDA_SUCCESS);
    }
    Cleanup freeBack([&] { return memFree(allocation); });
    const CUdeviceptr start = (allocation + page - 1) / page * page;
    int fd = -1;
    REQUIRE(getHandle(&fd, start, bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) == CUDA_SUCCESS);
    Cleanup closeBack([&] { close(fd); });
    std::string size;
    std::ifstream info("/proc/self/fdinfo/" + std::to_string(fd));
    for (std::string line; std::getline(info, line);)
        if (line.rfind("size:", 0) == 0) size = line.substr(line.find_first_not_of(" \t", 5));
    if (size.empty()) {  // a kernel whose dma-buf fdinfo lists no size: fstat's
        struct stat status {};
        REQUIRE(fstat(fd, &status) == 0);
        size = std::to_string(status.st_size);
    }
    CHECK(size == std::to_string(bytes));
}
#endif

TEST_CASE("Lesson 27's Vulkan and dma-buf programs decide PASS through named checks, and every one held",
          "[gpu][lesson27]") {
    requireGpu();
    for (const std::string program : {"vulkan_buffer", "vulkan_image_and_graph", "dma_buf"}) {
        INFO(program);
        const RunResult r = defaultRun(kLesson, program);
        if (r.exitCode == 77) continue;
        // dma_buf's import-back check SKIPs where the import is not supported (the test above requires why).
        if (program == "dma_buf")
            requireChecksHeldOrSkipped(r, {kImportCheckName});
        else
            requireChecksHeld(r);
    }
}

TEST_CASE("With --device 1 the Vulkan programs take the Vulkan device of the second GPU, not the first listed",
          "[gpu][lesson27]") {
    requireGpu();
    if (driver().deviceCount() < 2) SKIP("this machine has one CUDA device: --device 1 needs a second GPU");
    const std::string uuid = deviceUuid(1);
    REQUIRE(uuid != deviceUuid(0));
    RunOptions second;
    second.args = {"--device", "1"};
    for (const std::string& program : kVulkanPrograms) {
        INFO(program);
        const RunResult r = runLesson(kLesson, second, program);
        attachToReport(r);
        requireRan(r);
        CHECK(r.exitCode == 0);
        CHECK(valueOf(r.out, "CUDA device 1 UUID") == uuid);  // the program took the device asked for
        CHECK(valueOf(r.out, "Vulkan device UUID") == uuid);
        // Two GPUs, two UUIDs: the Vulkan devices taken for CUDA devices 0 and 1 must differ, so the
        // program did not take the first one listed (or any one fixed index) for both.
        const RunResult first = defaultRun(kLesson, program);
        requireRan(first);
        const auto takenFirst = valueOf(first.out, "Vulkan device taken");
        const auto takenSecond = valueOf(r.out, "Vulkan device taken");
        REQUIRE(takenFirst);
        REQUIRE(takenSecond);
        CHECK(firstWord(*takenFirst) != firstWord(*takenSecond));
    }
}

TEST_CASE("With --device 1 gl_interop opens the EGL device that EGL_NV_device_cuda names for the second GPU",
          "[gpu][lesson27]") {
    requireGpu();
    if (driver().deviceCount() < 2) SKIP("this machine has one CUDA device: --device 1 needs a second GPU");
    RunOptions second;
    second.args = {"--device", "1"};
    const RunResult r = runLesson(kLesson, second, "gl_interop");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    const auto eglDevice = valueOf(r.out, "EGL device of CUDA device 1");
    REQUIRE(eglDevice);
    CHECK(contains(*eglDevice, "(EGL_NV_device_cuda)"));
    CHECK(contains(valueOf(r.out, "CUDA devices of the GL context").value_or(""), "device 1"));
    CHECK(checkOk(r.out, "the GL context runs on the chosen CUDA device"));
    // Not the EGL device CUDA device 0 gets: each GPU its own.
    const RunResult first = defaultRun(kLesson, "gl_interop");
    requireRan(first);
    CHECK(valueOf(first.out, "EGL device of CUDA device 0") != eglDevice);
}

// gl_interop

TEST_CASE("gl_interop refuses an unknown argument with exit 2, before any driver call", "[cpu][lesson27]") {
    checkRefusesArguments(kLesson, {"--bogus"}, "gl_interop");
}

TEST_CASE("gl_interop: CUDA writes a GL buffer and a GL texture, and GL reads back every element and pixel",
          "[gpu][lesson27]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "gl_interop");
    attachToReport(r);
    // Exit 77 where this machine gives no OpenGL on this GPU through EGL (no libEGL.so.1, no NVIDIA
    // EGL vendor library, no EGL device for this CUDA device): the SKIP line says which.
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    requireChecksHeld(r);
    for (const char* name :
         {"the OpenGL context is current on this thread", "the GL context runs on the chosen CUDA device",
          "the mapped pointer covers the GL buffer, no more, no less", "GL reads back every element the kernel wrote",
          "GL reads back every pixel CUDA copied into the texture", "no GL call raised an error",
          "the GL context was let go from this thread before it was destroyed"}) {
        INFO(name);
        CHECK(checkOk(r.out, name));
    }
    CHECK(contains(valueOf(r.out, "EGL device of CUDA device 0").value_or(""), "(EGL_NV_device_cuda)"));
    CHECK(contains(valueOf(r.out, "CUDA devices of the GL context").value_or(""), "device 0"));
    CHECK(valueOf(r.out, "mapped buffer") == "1048576 bytes (GL_BUFFER_SIZE 1048576, glBufferData asked for 1048576)");
    CHECK(valueOf(r.out, "GL buffer read back with glGetBufferSubData") ==
          "262144 of 262144 elements as the kernel wrote them");
    CHECK(valueOf(r.out, "framebuffer with the texture attached") == "GL_FRAMEBUFFER_COMPLETE");
    CHECK(valueOf(r.out, "texture read back with glReadPixels") == "6144 of 6144 pixels as CUDA copied them");
    CHECK(valueOf(r.out, "GL errors after the calls made through GL_CHECK") == "0");
    CHECK(r.err.empty());  // no EGL, GL or driver call reported a failure
}

TEST_CASE("The CUDA-OpenGL entry points gl_interop reports are the ones the driver gives", "[gpu][lesson27]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "gl_interop");
    attachToReport(r);
    if (!valueOf(r.out, "driver entry point cuGLGetDevices")) requireRan(r);  // skipped before step 2
    for (const char* symbol : {"cuGraphicsGLRegisterBuffer", "cuGraphicsGLRegisterImage", "cuGLGetDevices"}) {
        INFO(symbol);
        const bool found = driver().get<void*>(symbol) != nullptr;
        CHECK(valueOf(r.out, std::string("driver entry point ") + symbol) == (found ? "found" : "not found"));
    }
}
