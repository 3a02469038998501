#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "09-tegra-memory/meminfo_estimate.h"
#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "09-tegra-memory";
const std::vector<std::string> kPrograms = {"memory_attributes",  "image_pipeline", "matrix_attach",
                                            "allocatable_memory", "upgrade_check",  "tegra_features"};



std::string fixture(const std::string& name) {
    std::ifstream in(repoRoot() + "/tests/fixtures/" + name);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

constexpr std::uint64_t kKiB = 1024;

// The attribute lines lesson 09 prints, with the enum each label names.
const std::map<std::string, CUdevice_attribute> kAttributes = {
    {"CU_DEVICE_ATTRIBUTE_INTEGRATED", CU_DEVICE_ATTRIBUTE_INTEGRATED},
    {"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
    {"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
    {"CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED", CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED},
    {"CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM",
     CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM},
    {"CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS", CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS},
    {"CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS", CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS},
    {"CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY", CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY},
    {"CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY", CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY},
    {"CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING", CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING},
    {"CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED", CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED},
};

int deviceAttribute(CUdevice_attribute attribute) {
    auto deviceGet = DRIVER_FUNCTION(driver(), cuDeviceGet);
    auto getAttribute = DRIVER_FUNCTION(driver(), cuDeviceGetAttribute);
    REQUIRE(deviceGet);
    REQUIRE(getAttribute);
    CUdevice device = 0;
    REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);
    int value = -1;
    REQUIRE(getAttribute(&value, attribute, device) == CUDA_SUCCESS);
    return value;
}

// "12.345 ms" -> 12.345 (the number before the unit).
double milliseconds(const std::string& value) {
    return std::stod(value);
}

}  // namespace

// ---------------------------------------------------------------------------
// The /proc/meminfo estimator (pure function, runs anywhere).

TEST_CASE("The meminfo estimate keeps only device allocations out when host memory fits in free swap",
          "[cpu][lesson09]") {
    // MemTotal 7999328, MemFree 5000000, SwapFree 3999660, NvMapMemUsed 1000000 (kB).
    const meminfo::Result result = meminfo::estimateAllocatable(fixture("meminfo-jetson-below-swap.txt"));
    REQUIRE(result.estimate);
    CHECK(result.reason.empty());
    const meminfo::Estimate& e = *result.estimate;
    CHECK(e.nvMapPresent);
    CHECK(e.deviceAllocatedBytes == 1000000 * kKiB);
    CHECK(e.usedPhysicalBytes == (7999328 - 5000000) * kKiB);
    CHECK(e.hostAllocatedBytes == (7999328 - 5000000 - 1000000) * kKiB);
    CHECK(e.freeSwapBytes == 3999660 * kKiB);
    // host allocated (1999328) < free swap (3999660): allocatable = MemTotal - device allocated.
    CHECK(e.branch == meminfo::Branch::HostBelowFreeSwap);
    CHECK(e.allocatableBytes == (7999328 - 1000000) * kKiB);
    CHECK(std::string(meminfo::branchName(e.branch)) == "host allocated < free swap");
}

TEST_CASE("The meminfo estimate subtracts what swap cannot absorb when host memory exceeds free swap",
          "[cpu][lesson09]") {
    // MemTotal 7999328, MemFree 1000000, SwapFree 500000, NvMapMemUsed 2000000 (kB).
    const meminfo::Result result = meminfo::estimateAllocatable(fixture("meminfo-jetson-above-swap.txt"));
    REQUIRE(result.estimate);
    const meminfo::Estimate& e = *result.estimate;
    const std::uint64_t host = 7999328 - 1000000 - 2000000;  // 4999328 kB > 500000 kB of free swap
    CHECK(e.hostAllocatedBytes == host * kKiB);
    CHECK(e.branch == meminfo::Branch::HostAtOrAboveFreeSwap);
    CHECK(e.allocatableBytes == (7999328 - (host - 500000)) * kKiB);
    CHECK(std::string(meminfo::branchName(e.branch)) == "host allocated >= free swap");
}

TEST_CASE("Without NvMapMemUsed the meminfo estimate counts no device allocations", "[cpu][lesson09]") {
    // An x86 host: no nvmap, no swap. All used memory counts as host memory and none
    // of it can move to swap, so the estimate degenerates to MemFree.
    const meminfo::Result result = meminfo::estimateAllocatable(fixture("meminfo-x86-no-nvmap.txt"));
    REQUIRE(result.estimate);
    const meminfo::Estimate& e = *result.estimate;
    CHECK_FALSE(e.nvMapPresent);
    CHECK(e.deviceAllocatedBytes == 0);
    CHECK(e.freeSwapBytes == 0);
    CHECK(e.branch == meminfo::Branch::HostAtOrAboveFreeSwap);
    CHECK(e.allocatableBytes == 120004512 * kKiB);
}

TEST_CASE("The meminfo estimate carries MemAvailable beside it when the kernel reports it", "[cpu][lesson09]") {
    const meminfo::Result jetson = meminfo::estimateAllocatable(fixture("meminfo-jetson-below-swap.txt"));
    REQUIRE(jetson.estimate);
    CHECK(jetson.estimate->availableBytes == 5912344 * kKiB);
    const meminfo::Result old = meminfo::estimateAllocatable("MemTotal: 100 kB\nMemFree: 10 kB\nSwapFree: 0 kB\n");
    REQUIRE(old.estimate);
    CHECK_FALSE(old.estimate->availableBytes);
}

TEST_CASE("A meminfo text without SwapFree gives no estimate and names the missing field", "[cpu][lesson09]") {
    const meminfo::Result result = meminfo::estimateAllocatable(fixture("meminfo-missing-swapfree.txt"));
    CHECK_FALSE(result.estimate);
    CHECK(result.reason == "missing field SwapFree");
}

TEST_CASE("The meminfo parser matches whole keys and rejects values without their kB unit", "[cpu][lesson09]") {
    // "MemFreeX" and "HugeMemFree" are not "MemFree".
    const std::string prefixOnly = "MemTotal: 100 kB\nMemFreeX: 10 kB\nHugeMemFree: 10 kB\nSwapFree: 0 kB\n";
    const meminfo::Result missing = meminfo::estimateAllocatable(prefixOnly);
    CHECK_FALSE(missing.estimate);
    CHECK(missing.reason == "missing field MemFree");

    const meminfo::Result noUnit = meminfo::estimateAllocatable("MemTotal: 100\nMemFree: 10 kB\nSwapFree: 0 kB\n");
    CHECK_FALSE(noUnit.estimate);
    CHECK(noUnit.reason.rfind("malformed field MemTotal", 0) == 0);

    const meminfo::Result freeTooBig =
        meminfo::estimateAllocatable("MemTotal: 100 kB\nMemFree: 200 kB\nSwapFree: 0 kB\n");
    CHECK_FALSE(freeTooBig.estimate);
    CHECK(freeTooBig.reason == "MemFree is larger than MemTotal");

    const meminfo::Field field = meminfo::findField("A: 1 kB\nSwapFree:\t 42 kB\r\n", "SwapFree");
    CHECK(field.present);
    CHECK(field.kib == 42u);
}

TEST_CASE("Lesson 09 rejects an unknown argument with a usage line and exit 2", "[cpu][lesson09]") {
    for (const std::string& program : kPrograms) {
        INFO(program);
        const RunResult r = runAgainstStub(kLesson, {"--bogus"}, program);
        CHECK(r.exitCode == 2);
        CHECK(contains(r.err, "usage:"));
    }
}

TEST_CASE("Lesson 09's programs against NVIDIA's stub libcuda stop at cuInit", "[cpu][lesson09][fault]") {
    for (const std::string& program : kPrograms) {
        INFO(program);
        const RunResult r = runAgainstStub(kLesson, {}, program);
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA driver call failed: cuInit(0)"));
        CHECK_FALSE(contains(r.out, "Result = PASS"));
    }
}

// ---------------------------------------------------------------------------
// On a GPU.

TEST_CASE("Lesson 09's three image pipelines agree with each other and the CPU", "[gpu][lesson09]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "image_pipeline");
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "dGPU way matches the CPU reference") == "yes");
    CHECK(valueOf(r.out, "pipelines agree") == "yes");
    if (deviceAttribute(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) == 1) {
        CHECK(valueOf(r.out, "Tegra way matches the CPU reference") == "yes");
        CHECK(valueOf(r.out, "Tegra way output checksum") == valueOf(r.out, "dGPU way output checksum"));
        const RunResult m = defaultRun(kLesson, "matrix_attach");
        REQUIRE(m.exitCode == 0);
        CHECK(contains(m.out, "matches the CPU: yes"));
    } else {
        CHECK(contains(r.out, "section Tegra way: SKIP ("));
    }
    if (deviceAttribute(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) == 1) {
        CHECK(valueOf(r.out, "zero-copy way matches the CPU reference") == "yes");
        CHECK(valueOf(r.out, "zero-copy way output checksum") == valueOf(r.out, "dGPU way output checksum"));
    } else {
        CHECK(contains(r.out, "section zero-copy way: SKIP ("));
    }
}

TEST_CASE("Lesson 09's verdict follows its own medians, with its margin, and decides nothing", "[gpu][lesson09]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "image_pipeline");
    REQUIRE(r.exitCode == 0);
    const auto favoured = valueOf(r.out, "favoured on this device");
    REQUIRE(favoured);
    CHECK(valueOf(r.out, "margin") == "a way is named only when every other median is more than 20% slower");
    // The medians as printed ("<way>, median of N passes: X ms"), fastest first.
    std::vector<std::pair<double, std::string>> medians;
    for (const std::string way : {"dGPU way", "Tegra way", "zero-copy way"})
        for (const std::string& line : lines(r.out))
            if (line.rfind(way + ", median of ", 0) == 0)
                medians.emplace_back(milliseconds(line.substr(line.find(": ") + 2)), way);
    REQUIRE_FALSE(medians.empty());
    std::sort(medians.begin(), medians.end());
    INFO("fastest median: " << medians[0].second << " (" << medians[0].first << " ms)");
    if (medians.size() >= 2) {
        // Printed to 3 decimals: a ratio within 1% of the margin may be rounded either way.
        const double ratio = medians[1].first / medians[0].first;
        INFO("second fastest: " << medians[1].second << ", ratio " << ratio);
        if (*favoured == "too close to call")
            CHECK(ratio <= 1.21);
        else
            CHECK((*favoured == medians[0].second && ratio >= 1.19));
    } else {
        CHECK(*favoured == medians[0].second);
    }
    // Which way wins is an observation: no check is named after it.
    for (const std::string& line : checkLines(r.out)) CHECK_FALSE(contains(line, "favoured"));
    CHECK(valueOf(r.out, "the note's expectation for this device"));
}

TEST_CASE("Lesson 09's programs decide PASS through named checks, and every one held", "[gpu][lesson09]") {
    requireGpu();
    for (const std::string& program : kPrograms) {
        INFO(program);
        const RunResult r = defaultRun(kLesson, program);
        if (r.exitCode == 77) continue;
        requireChecksHeld(r);
    }
    const RunResult attributes = defaultRun(kLesson, "memory_attributes");
    CHECK(contains(attributes.out, "check unified addressing in a 64-bit process: ok"));
    CHECK(valueOf(attributes.out, "attribute CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING") == "1");
}

TEST_CASE("Lesson 09 prints each memory-deciding attribute as the driver reports it", "[gpu][lesson09]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "memory_attributes");
    REQUIRE(r.exitCode == 0);
    for (const auto& [label, attribute] : kAttributes) {
        INFO(label);
        const auto printed = valueOf(r.out, "attribute " + label);
        REQUIRE(printed);
        CHECK(*printed == std::to_string(deviceAttribute(attribute)));
    }
    CHECK(valuesOf(r.out, "attribute CU_DEVICE_ATTRIBUTE_INTEGRATED").size() == 1);
}

TEST_CASE("Lesson 09 places the device in table 1 and skips the iGPU section on a discrete GPU", "[gpu][lesson09]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "memory_attributes");
    REQUIRE(r.exitCode == 0);
    if (deviceAttribute(CU_DEVICE_ATTRIBUTE_INTEGRATED) == 0) {
        // Tegra-only content reports SKIP with its reason, never PASS.
        CHECK(contains(r.out, "section iGPU caching of this device: SKIP (CU_DEVICE_ATTRIBUTE_INTEGRATED = 0"));
        CHECK_FALSE(contains(r.out, "this device, unified memory:"));
        CHECK(valueOf(r.out, "this device's column").value_or("") != "iGPU");
    } else {
        CHECK(valueOf(r.out, "this device's column") == "iGPU");
        CHECK(contains(r.out, "this device, unified memory:"));
    }
}

TEST_CASE("Lesson 09's feature detection follows the device attributes", "[gpu][lesson09]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "tegra_features");
    REQUIRE(r.exitCode == 0);
    const auto prefetch = valueOf(r.out, "feature cuMemPrefetchAsync");
    REQUIRE(prefetch);
    const bool concurrent = deviceAttribute(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) == 1;
    CHECK(prefetch->rfind(concurrent ? "supported, ran" : "not supported", 0) == 0);
    const auto hostRegister = valueOf(r.out, "feature cuMemHostRegister");
    REQUIRE(hostRegister);
    const bool registerSupported = deviceAttribute(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED) == 1;
    CHECK(hostRegister->rfind(registerSupported ? "supported, ran" : "not supported", 0) == 0);
    if (registerSupported) CHECK(valueOf(r.out, "registered buffer written through its device pointer") == "yes");
    const auto managed = valueOf(r.out, "feature unified memory");
    REQUIRE(managed);
    CHECK(managed->rfind(deviceAttribute(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) ? "supported" : "not supported", 0) == 0);
    // System-wide atomics: the attribute on a dGPU, the note's rule (said as a rule) on an iGPU.
    const auto atomics = valueOf(r.out, "feature system-wide atomics");
    REQUIRE(atomics);
    const int native = deviceAttribute(CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED);
    CHECK(contains(*atomics, "CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED = " + std::to_string(native)));
    if (deviceAttribute(CU_DEVICE_ATTRIBUTE_INTEGRATED) == 0)
        CHECK(atomics->rfind(native ? "native" : "not native", 0) == 0);
    else
        CHECK(contains(*atomics, "the note's rule"));
    // Both upgrade-package error codes are named with the numbers the app note gives.
    const RunResult u = defaultRun(kLesson, "upgrade_check");
    REQUIRE(u.exitCode == 0);
    CHECK(contains(u.out, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803 (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)"));
    CHECK(
        contains(u.out, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804 (CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)"));
}

TEST_CASE("Lesson 09 calls the meminfo figure an estimate and shows MemAvailable beside it", "[gpu][lesson09]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "allocatable_memory");
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "cuMemGetInfo total"));
    CHECK(valueOf(r.out, "estimate of device-allocatable memory (an estimate, not a bound)"));
    CHECK(valueOf(r.out, "meminfo MemAvailable (the kernel's estimate, without swap)"));
    CHECK_FALSE(contains(r.out, "upper bound"));
}

TEST_CASE("Lesson 09 runs with PTX JIT disabled because its fatbin carries SASS for the GPU", "[gpu][lesson09]") {
    requireGpu();
    const int sm = 10 * deviceAttribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) +
                   deviceAttribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    // The Makefile's default ARCH list; a GPU outside it only has the fatbin's PTX.
    const std::vector<int> sassInFatbin = {75, 80, 86, 89, 90};
    if (std::find(sassInFatbin.begin(), sassInFatbin.end(), sm) == sassInFatbin.end())
        SKIP("sm_" << sm << " is not in the fatbin's SASS list (ARCH)");
    RunOptions options;
    options.setEnv["CUDA_DISABLE_PTX_JIT"] = "1";
    for (const std::string& program : kPrograms) {
        INFO(program);
        const RunResult r = runLesson(kLesson, options, program);
        // matrix_attach exits 77 (SKIP) on a device without managed memory.
        CHECK((r.exitCode == 0 || (program == "matrix_attach" && r.exitCode == course::kExitNotApplicable)));
        if (program == "tegra_features") CHECK(contains(r.out, "(set now: yes)"));
    }
}

TEST_CASE("Attach flags hand a managed buffer from the host to the GPU and back", "[gpu][lesson09]") {
    requireGpu();
    if (deviceAttribute(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) == 0) SKIP("no managed memory on this device");
    const course::DynamicDriver& drv = driver();
    auto deviceGet = DRIVER_FUNCTION(drv, cuDeviceGet);
    auto retain = DRIVER_FUNCTION(drv, cuDevicePrimaryCtxRetain);
    auto release = DRIVER_FUNCTION(drv, cuDevicePrimaryCtxRelease);
    auto push = DRIVER_FUNCTION(drv, cuCtxPushCurrent);
    auto pop = DRIVER_FUNCTION(drv, cuCtxPopCurrent);
    auto allocManaged = DRIVER_FUNCTION(drv, cuMemAllocManaged);
    auto streamCreate = DRIVER_FUNCTION(drv, cuStreamCreate);
    auto attach = DRIVER_FUNCTION(drv, cuStreamAttachMemAsync);
    auto memsetAsync = DRIVER_FUNCTION(drv, cuMemsetD32Async);
    auto synchronize = DRIVER_FUNCTION(drv, cuStreamSynchronize);
    auto streamDestroy = DRIVER_FUNCTION(drv, cuStreamDestroy);
    auto memFree = DRIVER_FUNCTION(drv, cuMemFree);
    REQUIRE((deviceGet && retain && release && push && pop && allocManaged && streamCreate && attach && memsetAsync &&
             synchronize && streamDestroy && memFree));

    CUdevice device = 0;
    REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);
    CUcontext context = nullptr;
    REQUIRE(retain(&context, device) == CUDA_SUCCESS);
    REQUIRE(push(context) == CUDA_SUCCESS);
    CUstream stream = nullptr;
    REQUIRE(streamCreate(&stream, CU_STREAM_DEFAULT) == CUDA_SUCCESS);
    constexpr size_t words = 1024;
    CUdeviceptr buffer = 0;
    REQUIRE(allocManaged(&buffer, words * sizeof(std::uint32_t), CU_MEM_ATTACH_HOST) == CUDA_SUCCESS);
    auto* host = reinterpret_cast<std::uint32_t*>(static_cast<std::uintptr_t>(buffer));
    for (size_t i = 0; i < words; ++i) host[i] = 1;  // attached to the host: the CPU may write it
    CHECK(attach(stream, buffer, 0, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
    CHECK(memsetAsync(buffer, 7u, words, stream) == CUDA_SUCCESS);
    CHECK(attach(stream, buffer, 0, CU_MEM_ATTACH_HOST) == CUDA_SUCCESS);
    REQUIRE(synchronize(stream) == CUDA_SUCCESS);
    size_t sevens = 0;
    for (size_t i = 0; i < words; ++i) sevens += host[i] == 7u;
    CHECK(sevens == words);
    CHECK(memFree(buffer) == CUDA_SUCCESS);
    CHECK(streamDestroy(stream) == CUDA_SUCCESS);
    CUcontext popped = nullptr;
    CHECK(pop(&popped) == CUDA_SUCCESS);
    CHECK(release(device) == CUDA_SUCCESS);
}
