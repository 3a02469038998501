#include <cuda.h>
#include <catch2/catch_test_macros.hpp>

#include <string>
#include <vector>

#include "26-managed-memory-and-pools/managed_compat.h"
#include "26-managed-memory-and-pools/managed_helpers.h"
#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "26-managed-memory-and-pools";
const std::vector<std::string> kPrograms = {"managed_memory", "managed_batches", "pools_across_devices",
                                            "first_touch_bench"};

// Whether the run's device said CONCURRENT_MANAGED_ACCESS is 1 (its line reads "1 (1 means: ...)").
bool concurrentManagedAccess(const RunResult& r) {
    const auto value = valueOf(r.out, "CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS");
    return value && value->rfind("1 ", 0) == 0;
}

// Whether the machine has a second GPU and the driver says GPU 1 can access GPU 0's memory: then
// a plain run of pools_across_devices (GPU 0, its peer GPU 1) has everything step 5 needs.
bool gpu1CanAccessGpu0() {
    if (driver().deviceCount() < 2) return false;
    auto deviceGet = DRIVER_FUNCTION(driver(), cuDeviceGet);
    auto canAccessPeer = DRIVER_FUNCTION(driver(), cuDeviceCanAccessPeer);
    REQUIRE((deviceGet && canAccessPeer));
    CUdevice gpu0 = 0;
    CUdevice gpu1 = 0;
    REQUIRE(deviceGet(&gpu0, 0) == CUDA_SUCCESS);
    REQUIRE(deviceGet(&gpu1, 1) == CUDA_SUCCESS);
    int canAccess = 0;
    REQUIRE(canAccessPeer(&canAccess, gpu1, gpu0) == CUDA_SUCCESS);
    return canAccess != 0;
}

}  // namespace

// ---------------------------------------------------------------------------
// CPU: no driver needed.

TEST_CASE("Lesson 26 lists its four programs in the order make run-26 runs them", "[cpu][lesson26]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Every lesson 26 program rejects an unknown argument with a usage line and exit 2", "[cpu][lesson26]") {
    for (const auto& program : kPrograms) checkRefusesArguments(kLesson, {"--no-such-flag"}, program);
    checkRefusesArguments(kLesson, {"--peer", "one"}, "pools_across_devices");  // --peer takes a GPU number
    checkRefusesArguments(kLesson, {"--device"}, "managed_memory");             // --device needs its number
    // Only first_touch_bench has a benchmark mode.
    CHECK(runAgainstStub(kLesson, {"--bench"}, "managed_memory").exitCode == 2);
    CHECK(runAgainstStub(kLesson, {"--bench"}, "pools_across_devices").exitCode == 2);
}

TEST_CASE("Every lesson 26 program fails fast at cuInit against the stub driver, naming the call", "[cpu][lesson26]") {
    for (const auto& program : kPrograms) {
        INFO(program);
        const RunResult r = runAgainstStub(kLesson, {}, program);
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA driver call failed: cuInit(0)"));
        CHECK(contains(r.err, "CUDA_ERROR_STUB_LIBRARY"));
        CHECK_FALSE(contains(r.out, "Result = PASS"));
    }
    CHECK(runAgainstStub(kLesson, {"--bench"}, "first_touch_bench").exitCode == 1);  // --bench parsed, then cuInit
}

TEST_CASE("Lesson 26 names the version a 13.0 call needs, from the headers first, then the driver", "[cpu][lesson26]") {
    // The two versions the README's "Versions" and managed_compat.h name: no 13.0 call for a 12.9
    // driver, no _TYPE/_ID form for a 12.1 one. A run on a 13.0 driver passes either gate, set right or not.
    CHECK(lesson26::kCuda13 == 13000);
    CHECK(lesson26::kLocationFormsVersion == 12020);
    CHECK_FALSE(lesson26::versionReason(lesson26::kCuda13, 12090, "X").empty());
    CHECK_FALSE(lesson26::versionReason(lesson26::kLocationFormsVersion, 12010, "X").empty());
    CHECK(lesson26::versionReason(13000, 13000, "X").empty() == (CUDA_VERSION >= 13000));
    if (CUDA_VERSION >= 13000) {
        CHECK(lesson26::versionReason(13000, 12080, "cuMemSetMemPool") ==
              "the driver supports CUDA 12.8; cuMemSetMemPool needs 13.0");
        CHECK(lesson26::versionReason(12020, 12020, "X").empty());
    } else {
        CHECK(lesson26::versionReason(13000, 13000, "cuMemSetMemPool") ==
              "built with CUDA " + course::formatCudaVersion(CUDA_VERSION) +
                  " headers; cuMemSetMemPool needs 13.0 headers");
    }
}

TEST_CASE("Lesson 26's host pattern differs between neighbouring words and between seeds", "[cpu][lesson26]") {
    // The checks find a word the kernel missed, or took from the wrong place, only if the pattern
    // there differs; wrongWords counts exactly the words that differ from pattern * mul + add.
    std::vector<unsigned int> words(65536);
    lesson26::writePattern(words.data(), words.size(), 1);
    size_t sameAsNext = 0;
    for (size_t i = 0; i + 1 < words.size(); ++i) sameAsNext += words[i] == words[i + 1] ? 1 : 0;
    CHECK(sameAsNext == 0);
    CHECK(lesson26::wrongWords(words.data(), words.size(), 1) == 0);
    CHECK(lesson26::wrongWords(words.data(), words.size(), 2) == words.size());
    for (auto& word : words) word = word * 6 + 10;
    CHECK(lesson26::wrongWords(words.data(), words.size(), 1, 6, 10) == 0);
    words[12345] += 1;
    CHECK(lesson26::wrongWords(words.data(), words.size(), 1, 6, 10) == 1);
    // A piece of the array is judged by its words' indices in the whole (first_touch_bench's check).
    CHECK(lesson26::wrongWords(words.data() + 40000, 1000, 1, 6, 10, 40000) == 0);
    CHECK(lesson26::wrongWords(words.data() + 12000, 1000, 1, 6, 10, 12000) == 1);
    CHECK(lesson26::wrongWords(words.data() + 40000, 1000, 1, 6, 10) == 1000);  // judged from index 0: all wrong
}

TEST_CASE("Lesson 26 names the two locations cuda.h defines beside device ordinals", "[cpu][lesson26]") {
    CHECK(lesson26::locationName(CU_DEVICE_CPU) == "CU_DEVICE_CPU");
    CHECK(lesson26::locationName(CU_DEVICE_INVALID) == "CU_DEVICE_INVALID");
    CHECK(lesson26::locationName(1) == "GPU 1");
}

// ---------------------------------------------------------------------------
// GPU: the programs' output.

TEST_CASE("Lesson 26 managed_memory: one pointer for CPU and kernel, prefetches and advice read back",
          "[gpu][lesson26]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "managed_memory");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "words the kernel changed in place, as the CPU reads them") == "16777216 of 16777216");
    CHECK(valueOf(r.out, "last prefetch location before any prefetch") == "CU_DEVICE_INVALID");
    for (const char* attribute : {"CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY", "CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS",
                                  "CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS",
                                  "CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES",
                                  "CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST"}) {
        INFO(attribute);
        CHECK(valuesOf(r.out, attribute).size() == 1);  // each printed once, under its own name
    }
    if (concurrentManagedAccess(r)) {
        CHECK(valueOf(r.out, "last prefetch location after the prefetch to the GPU") == "GPU 0");
        CHECK(valueOf(r.out, "last prefetch location after the prefetch to the host") == "CU_DEVICE_CPU");
        CHECK(valueOf(r.out, "words equal to (2p + 1) * 3 + 7 after both prefetches") == "16777216 of 16777216");
        CHECK(valueOf(r.out, "read-mostly set on the first half") == "first half reads 1, whole range reads 0");
        CHECK(valueOf(r.out, "read-mostly after CU_MEM_ADVISE_SET_READ_MOSTLY") == "1");
        CHECK(valueOf(r.out, "read-mostly after CU_MEM_ADVISE_UNSET_READ_MOSTLY") == "0");
        CHECK(valueOf(r.out, "preferred location after SET_PREFERRED_LOCATION to the GPU") == "GPU 0");
        CHECK(valueOf(r.out, "preferred location after SET_PREFERRED_LOCATION to the host") == "CU_DEVICE_CPU");
        CHECK(valueOf(r.out, "preferred location after UNSET_PREFERRED_LOCATION") == "CU_DEVICE_INVALID");
        CHECK(valueOf(r.out, "accessed by, after SET_ACCESSED_BY") ==
              "GPU 0, CU_DEVICE_INVALID, CU_DEVICE_INVALID, CU_DEVICE_INVALID");
        if (lesson26::versionReason(lesson26::kLocationFormsVersion, driver().driverVersion(), "x").empty()) {
            CHECK(valueOf(r.out, "last prefetch location after the prefetch to the GPU, type and id") ==
                  "CU_MEM_LOCATION_TYPE_DEVICE, id 0");
            CHECK(valueOf(r.out, "last prefetch location after the prefetch to the host, type and id") ==
                  "CU_MEM_LOCATION_TYPE_HOST, id ignored");
        }
        requireChecksHeld(r);
    } else {
        CHECK(contains(r.out, "section prefetch and advice: SKIP (CONCURRENT_MANAGED_ACCESS is 0"));
    }
    if (lesson26::versionReason(lesson26::kCuda13, driver().driverVersion(), "x").empty()) {
        CHECK(valueOf(r.out, "cuDeviceGetHostAtomicCapabilities for CU_ATOMIC_OPERATION_MAX") ==
              "CUDA_ERROR_INVALID_VALUE");
        CHECK(valueOf(r.out, "host atomic INTEGER_ADD").has_value());  // printed, not judged
        CHECK(valueOf(r.out, "operations answered") == "13 of 13");
        CHECK(checkOk(r.out, "cuDeviceGetHostAtomicCapabilities wrote an answer for each of the 13 operations"));
        CHECK(checkOk(r.out,
                      "CU_ATOMIC_OPERATION_MAX, the enumerator after the 13 operations, is refused with "
                      "CUDA_ERROR_INVALID_VALUE"));
    } else {
        CHECK(contains(r.out, "section host atomics: SKIP ("));
    }
}

TEST_CASE("Lesson 26 managed_batches: batch prefetch, discard and discard-and-prefetch, only written data read",
          "[gpu][lesson26]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "managed_batches");
    requireRan(r);  // CUDA 13.0 headers and driver, and CONCURRENT_MANAGED_ACCESS on every GPU
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "range 0 last prefetch location after the batch") == "GPU 0");
    CHECK(valueOf(r.out, "range 3 last prefetch location after the batch") == "CU_DEVICE_CPU");
    CHECK(valueOf(r.out, "words equal to the CPU's pattern + 1") == "8388608 of 8388608");
    CHECK(valueOf(r.out, "words of ranges 0 and 1 as the kernel wrote them after the discard") == "4194304 of 4194304");
    CHECK(valueOf(r.out, "ranges 2 and 3, outside the discard batch, unchanged") == "yes");
    CHECK(valueOf(r.out, "range 2 last prefetch location after discard-and-prefetch") == "GPU 0");
    CHECK(valueOf(r.out, "words of ranges 2 and 3 as the kernel wrote them after discard-and-prefetch") ==
          "4194304 of 4194304");
    requireChecksHeld(r);
}

TEST_CASE(
    "Lesson 26 pools_across_devices: current pools, handle properties, the graph reserve, a pool opened to "
    "another GPU",
    "[gpu][lesson26]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "pools_across_devices");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    if (lesson26::versionReason(lesson26::kCuda13, driver().driverVersion(), "x").empty()) {
        CHECK(valueOf(r.out, "default pool by location and by device") == "the same");
        CHECK(valueOf(r.out, "current pool after cuMemSetMemPool, by location and by device") ==
              "the new pool, the new pool");
        CHECK(valueOf(r.out, "current pool after cuDeviceSetMemPool with the default") == "the default");
    }
    CHECK(valueOf(r.out, "retained handle is the one mapped") == "yes");
    CHECK(checkOk(r.out, "every handle released, the two allocations' device memory is free again"));
    CHECK(checkOk(r.out, "the used high watermark covers the graph's allocation"));
    CHECK(checkOk(r.out, "cuDeviceGraphMemTrim gave back memory the graph allocator had reserved"));
    CHECK(checkOk(r.out, "the last cuDeviceGraphMemTrim gave back the next graph's reserve"));
    CHECK(checkOk(r.out, "this GPU can access its new pool by default"));
    const auto ownAccess = valueOf(r.out, "this GPU's access to its new pool");
    CHECK((ownAccess == "CU_MEM_ACCESS_FLAGS_PROT_READ" || ownAccess == "CU_MEM_ACCESS_FLAGS_PROT_READWRITE"));
    const std::vector<std::string> peerChecks = {
        "the peer GPU has no access to the new pool before cuMemPoolSetAccess",
        "cuMemPoolGetAccess reads back the READWRITE access set for the peer GPU",
        "a kernel on the peer GPU read the allocation from this GPU's pool",
        "after access NONE, cuMemPoolGetAccess reads NONE for the peer GPU"};
    if (gpu1CanAccessGpu0()) {  // step 5 must then run: its four checks ok, none SKIP
        CHECK(valueOf(r.out, "peer GPU") == "1");
        CHECK(valueOf(r.out, "peer GPU's access before cuMemPoolSetAccess") == "CU_MEM_ACCESS_FLAGS_PROT_NONE");
        CHECK(valueOf(r.out, "peer GPU's access after cuMemPoolSetAccess") == "CU_MEM_ACCESS_FLAGS_PROT_READWRITE");
        CHECK(valueOf(r.out, "words the peer GPU's kernel computed from the pool allocation") == "2097152 of 2097152");
        for (const auto& name : peerChecks) CHECK(checkOk(r.out, name));
    } else {
        CHECK(contains(valueOf(r.out, "peer GPU").value_or(""), "not run ("));
        for (const auto& name : peerChecks) CHECK(valueOf(r.out, "check " + name).value_or("").rfind("SKIP (", 0) == 0);
    }
    requireChecksHeldOrSkipped(r, peerChecks);
}

TEST_CASE("Lesson 26 first_touch_bench: every way writes every word of 1 GiB; medians only with --bench",
          "[gpu][lesson26]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "first_touch_bench");
    requireRan(r);  // CONCURRENT_MANAGED_ACCESS, 2 GiB of device memory and 256 MiB of host memory free
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valuesOf(r.out, "rounds") == std::vector<std::string>{"1, words not as the two kernels wrote them: 0",
                                                                "1, words not as the two kernels wrote them: 0",
                                                                "1, words not as the two kernels wrote them: 0"});
    CHECK(valuesOf(r.out, "first touch, the kernel").size() == 3);  // printed, not judged
    CHECK(valuesOf(r.out, "IS_MANAGED (cuPointerGetAttribute)") == std::vector<std::string>{"1", "1", "0"});
    const std::vector<std::string> lastPrefetch = {"CU_DEVICE_INVALID", "GPU 0",
                                                   "not asked (a range attribute of managed memory only)"};
    CHECK(valuesOf(r.out, "last prefetch location after the kernels") == lastPrefetch);
    CHECK(checkOk(r.out, "IS_MANAGED reads 1 for both managed buffers and 0 for the cuMemAlloc buffer"));
    CHECK(checkOk(r.out, "LAST_PREFETCH_LOCATION names this GPU after the prefetch and no location without one"));
    CHECK(checkOk(r.out, "the spans printed for every round fit within the host's clock around that round"));
    CHECK(valueOf(r.out, "free host memory, at least four times the 64 MiB staging buffer") == "yes");
    CHECK_FALSE(contains(r.out, "bench:"));
    requireChecksHeld(r);
}

TEST_CASE("Lesson 26 first_touch_bench --bench: a median for every way, printed, not judged", "[gpu][lesson26]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench"};
    const RunResult r = runLesson(kLesson, options, "first_touch_bench");
    attachToReport(r);
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    for (const char* metric : {"first touch of 1 GiB, managed, no prefetch", "prefetch of 1 GiB to the GPU",
                               "first touch of 1 GiB, managed, after the prefetch", "first touch of 1 GiB, cuMemAlloc",
                               "second touch, managed, no prefetch", "second touch, cuMemAlloc"}) {
        INFO(metric);
        CHECK(benchValue(r.out, metric) > 0.0);
    }
}

// ---------------------------------------------------------------------------
// GPU: the driver itself, without the lesson.

TEST_CASE("The driver says a fresh managed range was never prefetched and carries no read-mostly advice",
          "[gpu][lesson26]") {
    requireGpu();
    CurrentPrimaryContext context;
    auto getAttribute = DRIVER_FUNCTION(driver(), cuDeviceGetAttribute);
    auto allocManaged = DRIVER_FUNCTION(driver(), cuMemAllocManaged);
    auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
    auto rangeAttribute = DRIVER_FUNCTION(driver(), cuMemRangeGetAttribute);
    REQUIRE((getAttribute && allocManaged && memFree && rangeAttribute));
    int managed = 0;
    REQUIRE(getAttribute(&managed, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, context.device()) == CUDA_SUCCESS);
    if (managed == 0) SKIP("the device cannot allocate managed memory");
    CUdeviceptr range = 0;
    REQUIRE(allocManaged(&range, size_t{2} << 20, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
    const Cleanup freeRange([&] { return memFree(range); });
    int last = 12345;
    CHECK(rangeAttribute(&last, sizeof(last), CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, range, size_t{2} << 20) ==
          CUDA_SUCCESS);
    CHECK(last == CU_DEVICE_INVALID);  // "never explicitly prefetched"
    int readMostly = 12345;
    CHECK(rangeAttribute(&readMostly, sizeof(readMostly), CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, range, size_t{2} << 20) ==
          CUDA_SUCCESS);
    CHECK(readMostly == 0);
}

TEST_CASE("A new pool is accessible from its own device: cuMemPoolGetAccess reads READ or READWRITE there",
          "[gpu][lesson26]") {
    requireGpu();
    CurrentPrimaryContext context;
    auto getAttribute = DRIVER_FUNCTION(driver(), cuDeviceGetAttribute);
    auto poolCreate = DRIVER_FUNCTION(driver(), cuMemPoolCreate);
    auto poolDestroy = DRIVER_FUNCTION(driver(), cuMemPoolDestroy);
    auto poolGetAccess = DRIVER_FUNCTION(driver(), cuMemPoolGetAccess);
    REQUIRE((getAttribute && poolCreate && poolDestroy && poolGetAccess));
    int pools = 0;
    REQUIRE(getAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, context.device()) == CUDA_SUCCESS);
    if (pools == 0) SKIP("the device has no memory pools");
    CUmemPoolProps properties{};
    properties.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    properties.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    properties.location = lesson26::locationOf(context.device());
    CUmemoryPool pool = nullptr;
    REQUIRE(poolCreate(&pool, &properties) == CUDA_SUCCESS);
    const Cleanup destroyPool([&] { return poolDestroy(pool); });
    CUmemLocation own = lesson26::locationOf(context.device());
    CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_MAX;  // no answer: an answer left unwritten shows
    CHECK(poolGetAccess(&flags, pool, &own) == CUDA_SUCCESS);
    // cuda.h: "By default, the pool's memory will be accessible from the device it is allocated on"
    // (cuda.h:13518). It names no flag; of the three, PROT_NONE is "not accessible" (cuda.h:4148), so
    // accessible is READ or READWRITE.
    CHECK((flags == CU_MEM_ACCESS_FLAGS_PROT_READ || flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
}
