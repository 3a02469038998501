#include <cuda.h>
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "22-libraries-and-occupancy/kernel_types.h"
#include "22-libraries-and-occupancy/param_layout.h"
#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "22-libraries-and-occupancy";
const std::vector<std::string> kPrograms = {"libraries", "contexts", "modules", "occupancy"};

// Every "check NAME" line of a run, with the verdict it printed.
void requireNamedChecksOk(const RunResult& r, const std::vector<std::string>& names) {
    for (const auto& name : names) {
        INFO(name);
        CHECK(checkOk(r.out, name));
    }
}

}  // namespace

// ---------------------------------------------------------------------------
// CPU: no driver needed.

TEST_CASE("Lesson 22 lists its four programs in the order make run-22 runs them", "[cpu][lesson22]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Every lesson 22 program rejects an unknown argument with a usage line and exit 2", "[cpu][lesson22]") {
    for (const auto& program : kPrograms) checkRefusesArguments(kLesson, {"--no-such-flag"}, program);
    // Only contexts has a benchmark mode.
    for (const auto& program : {"libraries", "modules", "occupancy"})
        checkRefusesArguments(kLesson, {"--bench"}, program);
    checkRefusesArguments(kLesson, {"--device", "one"}, "occupancy");
}

TEST_CASE("Every lesson 22 program fails fast at cuInit against the stub driver, naming the call", "[cpu][lesson22]") {
    for (const auto& program : kPrograms) {
        INFO(program);
        const RunResult r = runAgainstStub(kLesson, {}, program);
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA driver call failed: cuInit(0)"));
        CHECK(contains(r.err, "CUDA_ERROR_STUB_LIBRARY"));
        CHECK_FALSE(contains(r.out, "Result = PASS"));
    }
    // --bench and the timing child's flag are parsed, then cuInit fails.
    CHECK(runAgainstStub(kLesson, {"--bench"}, "contexts").exitCode == 1);
    CHECK(runAgainstStub(kLesson, {"--load-timing"}, "contexts").exitCode == 1);
}

TEST_CASE("contexts asks for lazy loading before cuInit unless the environment chose a mode", "[cpu][lesson22]") {
    RunOptions unset;
    unset.setEnv = {{"LD_LIBRARY_PATH", stubDriverDir()}};
    unset.unsetEnv = {"CUDA_MODULE_LOADING"};
    const RunResult chosenHere = runLesson(kLesson, unset, "contexts");
    CHECK(valueOf(chosenHere.out, "CUDA_MODULE_LOADING") == "LAZY (set by this program before cuInit)");
    RunOptions eager;
    eager.setEnv = {{"LD_LIBRARY_PATH", stubDriverDir()}, {"CUDA_MODULE_LOADING", "EAGER"}};
    const RunResult chosenOutside = runLesson(kLesson, eager, "contexts");
    CHECK(valueOf(chosenOutside.out, "CUDA_MODULE_LOADING") == "EAGER (from the environment)");
    CHECK(chosenOutside.exitCode == 1);  // then cuInit fails against the stub
}

TEST_CASE("A kernel's parameters sit where the C++ types put them: each at the next multiple of its alignment",
          "[cpu][lesson22]") {
    using lesson22::ParamSlot;
    // mixedParams(char, double, short, FloatAndDouble, double*): the layout the libraries program
    // expects from cuKernelGetParamInfo, worked out by hand.
    const std::vector<ParamSlot> expected = {{0, 1}, {8, 8}, {16, 2}, {24, 16}, {40, 8}};
    CHECK(lesson22::layoutOf<char, double, short, lesson22::FloatAndDouble, double*>() == expected);
    CHECK(lesson22::layoutOf<int, char, int>() == std::vector<ParamSlot>{{0, 4}, {4, 1}, {8, 4}});
    CHECK(lesson22::layoutOf<char>() == std::vector<ParamSlot>{{0, 1}});
    CHECK(lesson22::alignUp(17, 8) == 24);
    CHECK(lesson22::alignUp(16, 8) == 16);
    CHECK(sizeof(lesson22::FloatAndDouble) == 16);
}

// ---------------------------------------------------------------------------
// GPU: the programs' output.

TEST_CASE("Lesson 22 libraries: names, owners, parameters, attributes, globals and the library's module",
          "[gpu][lesson22]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "libraries");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "kernels in the library") == "4 (addOffset, dynamicSum, mixedParams, reverseTile)");
    CHECK(valueOf(r.out, "parameter 0") == "driver offset 0 size 1, C++ offset 0 size 1");
    CHECK(valueOf(r.out, "parameter 3") == "driver offset 24 size 16, C++ offset 24 size 16");
    CHECK(valueOf(r.out, "parameter 4") == "driver offset 40 size 8, C++ offset 40 size 8");
    CHECK(valueOf(r.out, "addOffset") == "4096 of 4096 elements = i + 1000");
    CHECK(valueOf(r.out, "gLaunches") == "4 bytes, read from the host after two launches: 2");
    CHECK(valueOf(r.out, "gOffset of the library loaded from memory") == "another address, holds 7");
    CHECK(valueOf(r.out, "cuModuleUnload of the library's module") == "CUDA_ERROR_NOT_PERMITTED");
    // Printed, not checked by the program; whatever it is, it is one of the codes cuda.h lists
    // for cuLibraryGetUnifiedFunction (cuda.h:8235-8240).
    const std::vector<std::string> unifiedCodes = {"CUDA_SUCCESS",
                                                   "CUDA_ERROR_DEINITIALIZED",
                                                   "CUDA_ERROR_NOT_INITIALIZED",
                                                   "CUDA_ERROR_INVALID_VALUE",
                                                   "CUDA_ERROR_INVALID_HANDLE",
                                                   "CUDA_ERROR_NOT_FOUND"};
    const std::string unified = valueOf(r.out, "cuLibraryGetUnifiedFunction(addOffset)").value_or("(no line)");
    INFO("cuLibraryGetUnifiedFunction(addOffset): " << unified);
    CHECK(std::find(unifiedCodes.begin(), unifiedCodes.end(), unified) != unifiedCodes.end());
    requireNamedChecksOk(
        r,
        {"the library lists exactly the kernels the .cu declares",
         "parameter offsets and sizes follow the C++ signature", "attributes follow the kernel's declarations",
         "dynamic shared memory past the default limit refused before cuKernelSetAttribute",
         "the same launch runs after cuKernelSetAttribute",
         "cuKernelGetAttribute reads the dynamic shared memory limit cuda.h gives, then the one set",
         "addOffset read the gOffset written through cuLibraryGetGlobal",
         "the library loaded from memory has its own gOffset, as in the image",
         "gLaunches, one unsigned int read from the host, counted both launches",
         "the library's module in this context holds the same gOffset", "cuModuleUnload refuses the library's module"});
    if (driver().driverVersion() >= 12050 && CUDA_VERSION >= 12050)
        CHECK(valueOf(r.out, "check every kernel names the library it came from") == "ok");
}

TEST_CASE("Lesson 22 contexts: one CUkernel, a function, a module and a global per context, all loaded",
          "[gpu][lesson22]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "contexts");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "module loading mode") == "LAZY");  // the program asks for it
    CHECK(valueOf(r.out, "current context") == "none");
    CHECK(valueOf(r.out, "cuLibraryGetKernel gave") == "addOffset; current context after loading: none");
    CHECK(valueOf(r.out, "current context after making them") == "none");
    const size_t contexts = driver().deviceCount() >= 2 ? 3 : 2;
    const auto loaded = valuesOf(r.out, "context 0 functions loaded");
    REQUIRE(loaded.size() == 1);
    CHECK(contains(loaded[0], "4 of 4 after"));
    // cuda.h: with lazy loading the functions "may be" partially loaded. Where every one was
    // loaded already, cuFuncLoad had nothing to do and its check says SKIP.
    bool anyUnloaded = false;
    for (size_t i = 0; i < contexts; ++i)
        anyUnloaded = anyUnloaded ||
                      !contains(valueOf(r.out, "context " + std::to_string(i) + " functions loaded").value_or(""),
                                "4 of 4 before");
    const auto loadCheck = valueOf(r.out, "check cuFuncLoad loaded every function in every context");
    if (anyUnloaded)
        CHECK(loadCheck == "ok");
    else
        CHECK(loadCheck.value_or("").rfind("SKIP (", 0) == 0);
    for (size_t i = 0; i < contexts; ++i) {
        INFO("context " << i);
        const std::string tag = std::to_string(1000 * (i + 1));
        CHECK(valueOf(r.out, "context " + std::to_string(i) + " launch") ==
              "gOffset set to " + tag + ", addOffset gave 4096 of 4096 elements = i + " + tag);
        CHECK(valueOf(r.out, "context " + std::to_string(i) + " function") ==
              "addOffset, in this context's module of the library");
    }
    const std::string n = std::to_string(contexts);
    CHECK(valueOf(r.out, "distinct CUfunction handles") == n + " for " + n + " contexts");
    CHECK(valueOf(r.out, "gOffset addresses") == n + " distinct for " + n + " contexts");
    CHECK(valueOf(r.out, "gLaunches, set to 100 from the host, after one launch in each of " + n + " contexts") ==
          std::to_string(100 + contexts));
    requireNamedChecksOk(r, {"no context is current once the contexts are made",
                             "each context has its own function of the kernel, in its own module",
                             "the one CUkernel ran in every context, reading that context's own gOffset",
                             "gLaunches, one managed variable for every context, counted every launch"});
}

TEST_CASE("Lesson 22 contexts --bench times the library load and first launches in an EAGER and a LAZY run",
          "[gpu][lesson22]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench"};
    const RunResult r = runLesson(kLesson, options, "contexts");
    attachToReport(r);
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    for (const std::string mode : {"EAGER", "LAZY"}) {
        INFO(mode);
        CHECK(valueOf(r.out, "loading mode of the " + mode + " run") == mode);
        CHECK(valueOf(r.out, mode + " run") == "exit code 0, ran in that mode");
        CHECK(valueOf(r.out, "timed launches finished when their clocks stopped in the " + mode + " run") == "23 of 23");
    }
    CHECK(valueOf(r.out, "check each timing run used the loading mode it was given") == "ok");
    CHECK(valueOf(r.out, "check every timed launch had finished when its clock stopped") == "ok");
}

TEST_CASE("Lesson 22 modules: the list, each function's module, a mangled name, launches from the list",
          "[gpu][lesson22]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "modules");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "functions in the module") == "4 (_Z5scalePffi, addOne, fillIndex, noop)");
    CHECK(valueOf(r.out, "functions of the first module naming it") == "4 of 4");
    CHECK(valueOf(r.out, "functions of the second module naming it") == "4 of 4");
    CHECK(valueOf(r.out, "functions of the second module naming the first") == "0 of 4");
    CHECK(valueOf(r.out, "_Z5scalePffi in the list of step 3") == "yes");
    CHECK(valueOf(r.out, "cuModuleGetFunction(\"scale\")") == "CUDA_ERROR_NOT_FOUND");
    CHECK(valueOf(r.out, "cuModuleGetFunction(\"_Z5scalePffi\")") == "CUDA_SUCCESS");
    CHECK(valueOf(r.out, "fillIndex then addOne") == "4096 of 4096 elements = i + 1");
    requireNamedChecksOk(
        r, {"each load holds as many functions as the .cu declares", "the module lists every kernel the .cu declares",
            "every listed function names its module, and the two modules are distinct",
            "the C++ kernel is listed and found by its mangled name only", "functions taken from the list run"});
}

TEST_CASE("Lesson 22 occupancy: every prediction matches the blocks the kernels counted on each SM",
          "[gpu][lesson22]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "occupancy");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    requireNamedChecksOk(
        r, {"residency matches the prediction: warps (resident, 1024 threads a block)",
            "warps: the prediction for 1024-thread blocks is the SM's thread limit",
            "residency matches the prediction: blocks (resident, 32 threads a block)",
            "blocks: the prediction for 32-thread blocks is the SM's block limit",
            "residency matches the prediction: registers (residentHeavy, 256 threads a block)",
            "registers: residentHeavy's prediction is what its registers allow, below the thread limit",
            "the call without flags gives CU_OCCUPANCY_DEFAULT's answer, within the SM's totals",
            "residency matches the prediction: shared memory (resident, the suggested block size)",
            "the suggested block size reaches the most warps per SM, and the minimum grid fills every SM",
            "cuCtxGetCacheConfig reads back each preference set, or PREFER_NONE throughout",
            "residency matches the prediction: the size returned for 3 blocks (resident, 256 threads a block)",
            "the size less the reserve holds the 3 blocks asked for, predicted and measured"});
    // The cache preference check decides only where the preference set read back (cuda.h: a
    // device with fixed L1 and shared memory sizes reports PREFER_NONE whatever was set).
    const auto shared = valueOf(r.out, "L1 and shared memory share their hardware here");
    REQUIRE(shared);
    const auto restored = valueOf(r.out, "check the context's cache preference is back to what it was");
    if (shared->rfind("yes", 0) == 0)
        CHECK(restored == "ok");
    else
        CHECK(restored.value_or("").rfind("SKIP (", 0) == 0);
    // Every SM ran blocks, and no %smid fell outside the counters.
    const auto sms = valueOf(r.out, "SMs");
    REQUIRE(sms);
    CHECK(contains(valueOf(r.out, "SM identifiers (%nsmid)").value_or(""), "SMs that ran blocks: " + *sms + ";"));
    CHECK(contains(valueOf(r.out, "SM identifiers (%nsmid)").value_or(""), "blocks with %smid >= 1024: 0"));
    if (valueOf(r.out, "cuOccupancyMaxPotentialClusterSize (128 threads a block)"))
        CHECK(valueOf(r.out,
                      "check clusters resident at once: at least half of cuOccupancyMaxActiveClusters, never more") ==
              "ok");
    // Step 6 launches step 5's size again, preferring L1: the program only prints its counts, but
    // whatever split the driver picks, blocks ran, and no SM can hold more blocks of that size
    // than its shared memory (step 1) has room for. A launch with less dynamic shared memory
    // than printed, or none, would let more in.
    unsigned long long perSm = 0;
    const std::string limits = valueOf(r.out, "one SM holds at most").value_or("");
    REQUIRE(std::sscanf(limits.c_str(), "%*d threads, %*d blocks, %*d registers, %llu bytes", &perSm) == 1);
    unsigned long long bytes = 0;
    int predicted = 0;
    unsigned long long measured = 0;
    const std::string preferL1 = valueOf(r.out, "CU_FUNC_CACHE_PREFER_L1, 256 threads").value_or("");
    REQUIRE(std::sscanf(preferL1.c_str(), "%llu bytes, predicted %d, measured %llu", &bytes, &predicted, &measured) ==
            3);
    INFO("CU_FUNC_CACHE_PREFER_L1, 256 threads: " << preferL1 << "; shared memory per SM: " << perSm);
    CHECK(measured >= 1);
    CHECK(measured * bytes <= perSm);
}

// ---------------------------------------------------------------------------
// GPU: the same driver behaviour, checked directly through the driver.

#if CUDA_VERSION >= 12000
TEST_CASE("A library's module in the current context refuses cuModuleUnload and holds the library's global",
          "[gpu][lesson22]") {
    requireGpu();
    if (driver().driverVersion() < 12000) SKIP("the library calls need a CUDA 12.0 driver");
    CurrentPrimaryContext context;
    auto loadLibrary = DRIVER_FUNCTION(driver(), cuLibraryLoadData);
    auto unloadLibrary = DRIVER_FUNCTION(driver(), cuLibraryUnload);
    auto libraryModule = DRIVER_FUNCTION(driver(), cuLibraryGetModule);
    auto libraryGlobal = DRIVER_FUNCTION(driver(), cuLibraryGetGlobal);
    auto moduleGlobal = DRIVER_FUNCTION(driver(), cuModuleGetGlobal);
    auto moduleUnload = DRIVER_FUNCTION(driver(), cuModuleUnload);
    REQUIRE((loadLibrary && unloadLibrary && libraryModule && libraryGlobal && moduleGlobal && moduleUnload));
    const std::string fatbin = readText(buildDir() + "/" + kLesson + "/kernels/library_kernels.fatbin");
    REQUIRE_FALSE(fatbin.empty());
    CUlibrary library = nullptr;
    REQUIRE(loadLibrary(&library, fatbin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0) == CUDA_SUCCESS);
    Cleanup unload([&] { return unloadLibrary(library); });
    CUmodule module = nullptr;
    REQUIRE(libraryModule(&module, library) == CUDA_SUCCESS);
    CUdeviceptr fromLibrary = 0;
    CUdeviceptr fromModule = 0;
    size_t bytes = 0;
    CHECK(libraryGlobal(&fromLibrary, &bytes, library, "gOffset") == CUDA_SUCCESS);
    CHECK(bytes == sizeof(int));
    CHECK(moduleGlobal(&fromModule, nullptr, module, "gOffset") == CUDA_SUCCESS);
    CHECK(fromModule == fromLibrary);
    CHECK(moduleUnload(module) == CUDA_ERROR_NOT_PERMITTED);  // cuda.h: "will return CUDA_ERROR_NOT_PERMITTED"
    CHECK(unload.now() == CUDA_SUCCESS);
}
#endif

TEST_CASE("The driver predicts as many 1024-thread blocks per SM as the SM's thread limit allows", "[gpu][lesson22]") {
    requireGpu();
    CurrentPrimaryContext context;
    auto loadModule = DRIVER_FUNCTION(driver(), cuModuleLoadData);
    auto unloadModule = DRIVER_FUNCTION(driver(), cuModuleUnload);
    auto getFunction = DRIVER_FUNCTION(driver(), cuModuleGetFunction);
    auto occupancy = DRIVER_FUNCTION(driver(), cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags);
    auto deviceAttribute = DRIVER_FUNCTION(driver(), cuDeviceGetAttribute);
    REQUIRE((loadModule && unloadModule && getFunction && occupancy && deviceAttribute));
    const std::string fatbin = readText(buildDir() + "/" + kLesson + "/kernels/occupancy_kernels.fatbin");
    REQUIRE_FALSE(fatbin.empty());
    CUmodule module = nullptr;
    REQUIRE(loadModule(&module, fatbin.data()) == CUDA_SUCCESS);
    Cleanup unload([&] { return unloadModule(module); });
    CUfunction resident = nullptr;
    REQUIRE(getFunction(&resident, module, "resident") == CUDA_SUCCESS);
    int threadsPerSm = 0;
    REQUIRE(deviceAttribute(&threadsPerSm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, context.device()) ==
            CUDA_SUCCESS);
    // resident uses a dozen registers and no shared memory: threads are the only limit here.
    int blocks = 0;
    CHECK(occupancy(&blocks, resident, 1024, 0, CU_OCCUPANCY_DEFAULT) == CUDA_SUCCESS);
    CHECK(blocks == threadsPerSm / 1024);
    CHECK(unload.now() == CUDA_SUCCESS);
}
