#include <cuda.h>
#include <unistd.h>
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "06-module-and-launch/cubin_arch.h"
#include "06-module-and-launch/jit_options.h"
#include "06-module-and-launch/launch_limits.h"
#include "06-module-and-launch/param_buffer.h"
#include "06-module-and-launch/param_types.h"
#include "common/course_util.h"
#include "common/dram_peak.h"
#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "06-module-and-launch";
const std::vector<std::string> kPrograms = {"first_kernel", "embedded_fatbin", "load_and_launch",
                                            "jit_and_link", "param_buffer",    "launch_bench"};
// The programs that read their module files before cuInit and print the variables that steer the
// driver (driver_env.h); first_kernel and embedded_fatbin keep to the shortest path.
const std::vector<std::string> kModulePrograms = {"load_and_launch", "jit_and_link", "param_buffer", "launch_bench"};

// The module files each program reads before it calls the driver.
std::vector<std::string> moduleFilesOf(const std::string& program) {
    if (program == "load_and_launch") return {"vector_ops.fatbin", "vector_ops.cubin", "vector_ops.ptx"};
    if (program == "jit_and_link") return {"vector_ops.ptx", "link_main.ptx", "link_helper.ptx"};
    if (program == "param_buffer") return {"vector_ops.fatbin"};
    return {"vector_ops.fatbin", "vector_ops.cubin", "vector_ops.ptx"};
}

// echoParams(float a, float4 v, FloatAndFloat4 s, int n, float* out) as a C struct: kernel
// parameters are laid out like the members of a struct with the same types, in order.
struct EchoParamsMirror {
    float a;
    float4 v;
    FloatAndFloat4 s;
    int n;
    CUdeviceptr out;
};

// How far a printed ratio may lie from the ratio of two printed figures: each figure is off by
// up to `figureRounding` (half its last printed digit), the ratio by up to `ratioRounding`.
double printedRatioSlack(double numerator, double denominator, double figureRounding, double ratioRounding) {
    const double low = (numerator - figureRounding) / (denominator + figureRounding);
    const double high = (numerator + figureRounding) / (denominator - figureRounding);
    const double ratio = numerator / denominator;
    return std::max(high - ratio, ratio - low) + ratioRounding + 1e-9;
}

std::string moduleDir() {
    return buildDir() + "/" + kLesson + "/kernels";
}

// A fresh folder under /tmp holding a copy of one of the lesson's programs (and, if asked,
// of its kernels folder), removed afterwards.
struct ProgramCopy {
    std::filesystem::path folder;
    std::filesystem::path program;
    explicit ProgramCopy(const std::string& name, bool withKernels = false) {
        char pattern[] = "/tmp/lesson06-test-XXXXXX";
        REQUIRE(mkdtemp(pattern) != nullptr);
        folder = pattern;
        program = folder / name;
        REQUIRE(copyFile(lessonBinary(kLesson, name), program.string(), 0700));
        if (withKernels) std::filesystem::copy(moduleDir(), folder / "kernels");
    }
    ~ProgramCopy() {
        std::error_code ignored;
        std::filesystem::remove_all(folder, ignored);
    }
    ProgramCopy(const ProgramCopy&) = delete;
    ProgramCopy& operator=(const ProgramCopy&) = delete;

    // Breaks one PTX file of the copy: its first `ret;` becomes `rett;`, not a PTX instruction.
    void breakPtx(const std::string& file) const {
        const std::filesystem::path path = folder / "kernels" / file;
        std::string text = readText(path.string());
        const std::size_t at = text.find("ret;");
        REQUIRE(at != std::string::npos);
        text.replace(at, 4, "rett;");
        REQUIRE(writeFile(path.string(), text));
    }
};

// cuModuleLoadDataEx with an error log; returns the result and fills `log`.
CUresult loadWithErrorLog(const std::string& image, CUmodule* module, std::string& log) {
    auto loadDataEx = DRIVER_FUNCTION(driver(), cuModuleLoadDataEx);
    REQUIRE(loadDataEx);
    std::vector<char> buffer(16384, '\0');
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {buffer.data(), reinterpret_cast<void*>(static_cast<std::uintptr_t>(buffer.size()))};
    const CUresult result = loadDataEx(module, image.c_str(), 2, options, values);
    log = buffer.data();
    return result;
}

}  // namespace

// ---------------------------------------------------------------------------
// CPU: the parameter-buffer layout and the build.

TEST_CASE("Lesson 06's alignUp rounds an offset up to the next multiple of the alignment", "[cpu][lesson06]") {
    using lesson06::alignUp;
    STATIC_REQUIRE(alignUp(0, 16) == 0);
    STATIC_REQUIRE(alignUp(4, 16) == 16);
    STATIC_REQUIRE(alignUp(16, 16) == 16);
    STATIC_REQUIRE(alignUp(17, 16) == 32);
    STATIC_REQUIRE(alignUp(64, 8) == 64);
    STATIC_REQUIRE(alignUp(68, 8) == 72);
    STATIC_REQUIRE(alignUp(5, 1) == 5);
}

TEST_CASE("Lesson 06's float/float4 struct has f4 at offset 16 and 32 bytes", "[cpu][lesson06]") {
    CHECK(alignof(float4) == 16);
    CHECK(sizeof(float4) == 16);
    CHECK(offsetof(FloatAndFloat4, f) == 0);
    CHECK(offsetof(FloatAndFloat4, f4) == 16);
    CHECK(sizeof(FloatAndFloat4) == 32);
    CHECK(alignof(FloatAndFloat4) == 16);
}

TEST_CASE("Lesson 06's parameter buffer places each argument where a C struct of the same members would",
          "[cpu][lesson06]") {
    lesson06::ParamBuffer buffer;
    const float a = 1.5f;
    const float4 v = {2.0f, 3.0f, 4.0f, 5.0f};
    const FloatAndFloat4 s = {6.0f, {7.0f, 8.0f, 9.0f, 10.0f}};
    const int n = 11;
    const CUdeviceptr out = 0x7f0000001000ull;
    CHECK(buffer.add(a) == offsetof(EchoParamsMirror, a));
    CHECK(buffer.add(v) == offsetof(EchoParamsMirror, v));
    CHECK(buffer.add(s) == offsetof(EchoParamsMirror, s));
    CHECK(buffer.add(n) == offsetof(EchoParamsMirror, n));
    CHECK(buffer.add(out) == offsetof(EchoParamsMirror, out));
    // The buffer ends with the last argument; the struct may add tail padding, here none.
    CHECK(buffer.size() == offsetof(EchoParamsMirror, out) + sizeof(CUdeviceptr));
    CHECK(buffer.size() == sizeof(EchoParamsMirror));
    // The float4 does not follow the float at 4: it waits for 16.
    CHECK(offsetof(EchoParamsMirror, v) == 16);
}

TEST_CASE("Lesson 06's parameter buffer copies each argument's bytes to its offset and zeroes the padding",
          "[cpu][lesson06]") {
    lesson06::ParamBuffer buffer;
    const float a = -2.25f;
    const FloatAndFloat4 s = {1.0f, {2.0f, 3.0f, 4.0f, 5.0f}};
    const std::size_t aAt = buffer.add(a);
    const std::size_t sAt = buffer.add(s);
    REQUIRE(aAt == 0);
    REQUIRE(sAt == 16);
    const auto* bytes = static_cast<const unsigned char*>(static_cast<const lesson06::ParamBuffer&>(buffer).data());
    CHECK(std::memcmp(bytes + aAt, &a, sizeof(a)) == 0);
    CHECK(std::memcmp(bytes + sAt, &s, sizeof(s)) == 0);
    for (std::size_t i = sizeof(a); i < sAt; ++i) CHECK(bytes[i] == 0);
}

TEST_CASE("The Makefile builds lesson 06's kernels to PTX, cubin and fatbin, relocatable only for the cuLink pair",
          "[cpu][lesson06]") {
    for (const char* stem : {"vector_ops", "link_main", "link_helper"})
        for (const char* extension : {".ptx", ".cubin", ".fatbin"}) {
            INFO(stem << extension);
            CHECK(std::filesystem::is_regular_file(moduleDir() + "/" + stem + extension));
        }
    const std::string vectorOps = readText(moduleDir() + "/vector_ops.ptx");
    const std::string linkMain = readText(moduleDir() + "/link_main.ptx");
    const std::string linkHelper = readText(moduleDir() + "/link_helper.ptx");
    for (const char* kernel :
         {"vectorAdd", "saxpy", "scaleByGlobal", "emptyKernel", "echoParams", "boundedKernel", "registerHungry"})
        CHECK(contains(vectorOps, std::string(".visible .entry ") + kernel + "("));
    // __launch_bounds__(128) reaches the module as the PTX directive the driver reads the limit from.
    CHECK(contains(vectorOps, ".maxntid 128"));
    CHECK(contains(vectorOps, "gScale"));
    CHECK_FALSE(contains(vectorOps, ".extern"));
    // -rdc=true keeps the unresolved call and the otherwise unused definition in the PTX.
    CHECK(contains(linkMain, ".extern .func"));
    CHECK(contains(linkMain, "linkedTransform"));
    CHECK(contains(linkHelper, ".visible .func"));
    CHECK(contains(linkHelper, "linkedTransform"));
    // The cubin that cuModuleLoadData gets is an executable ELF (e_type 2), not a relocatable one (1).
    const std::string cubin = readText(moduleDir() + "/vector_ops.cubin");
    REQUIRE(cubin.size() > 18);
    CHECK(cubin.compare(0, 4,
                        "\x7f"
                        "ELF") == 0);
    CHECK(static_cast<unsigned char>(cubin[16]) == 2);
}

TEST_CASE("Lesson 06 lists its six programs in the order make run-06 runs them", "[cpu][lesson06]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Lesson 06's embedded_fatbin carries vector_ops.fatbin byte for byte, from the header bin2c generated",
          "[cpu][lesson06]") {
    const std::string fatbin = readText(moduleDir() + "/vector_ops.fatbin");
    REQUIRE(fatbin.size() > 16);
    // The generated header: a const array of unsigned long long (8-byte aligned), named as the program expects.
    const std::string header = readText(moduleDir() + "/vector_ops_fatbin.h");
    CHECK(contains(header, "static const unsigned long long kVectorOpsFatbin[]"));
    // bin2c writes the words in the host's byte order, so the executable holds the file's bytes as they are.
    CHECK(contains(readText(lessonBinary(kLesson, "embedded_fatbin")), fatbin));
    // first_kernel loads the file at run time instead: the image is not inside it.
    CHECK_FALSE(contains(readText(lessonBinary(kLesson, "first_kernel")), fatbin));
}

TEST_CASE("Each lesson 06 program started without its kernels folder names every module file it tried and exits 1",
          "[cpu][lesson06][fault]") {
    for (const auto& name : kModulePrograms) {
        INFO(name);
        const ProgramCopy copy(name);
        RunOptions options;
        options.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();  // the files are looked for before cuInit
        const RunResult r = run(copy.program.string(), options);
        CHECK(r.exitCode == 1);
        for (const auto& file : moduleFilesOf(name)) {
            INFO(file);
            CHECK(contains(r.err, "cannot read " + (copy.folder / "kernels" / file).string()));
        }
        CHECK(contains(r.err, "make build-06"));
        CHECK_FALSE(contains(r.err, "CUDA driver call failed"));
    }
}

TEST_CASE("Each lesson 06 program rejects an unknown argument with a usage line and exit 2", "[cpu][lesson06]") {
    for (const auto& name : kPrograms) {
        INFO(name);
        const RunResult r = runAgainstStub(kLesson, {"--kernels-dir", "/tmp"}, name);
        CHECK(r.exitCode == 2);
        CHECK(contains(r.err, "usage:"));
    }
}

TEST_CASE("Lesson 06's DRAM peak is 2 x memory clock x bus width / 8, checked with real devices' attributes",
          "[cpu][lesson06]") {
    using course::dramPeakGBs;
    // H100 SXM (HBM3): 2619000 kHz, 5120 bits -> 3352.3 GB/s, the 3.35 TB/s of its data sheet.
    CHECK(dramPeakGBs(2619000, 5120) > 3352.3);
    CHECK(dramPeakGBs(2619000, 5120) < 3352.4);
    // A100 40 GB (HBM2): 1215000 kHz, 5120 bits -> 1555.2 GB/s.
    CHECK(dramPeakGBs(1215000, 5120) > 1555.1);
    CHECK(dramPeakGBs(1215000, 5120) < 1555.3);
    // RTX 4090 (GDDR6X): 10501000 kHz, 384 bits -> 1008.1 GB/s.
    CHECK(dramPeakGBs(10501000, 384) > 1008.0);
    CHECK(dramPeakGBs(10501000, 384) < 1008.2);
    // No clock or no width reported: no peak, rather than a made-up one.
    CHECK(dramPeakGBs(0, 5120) == 0.0);
    CHECK(dramPeakGBs(2619000, 0) == 0.0);
    STATIC_REQUIRE(dramPeakGBs(1000000, 8) == 2.0);  // 1 GHz, one byte wide, both edges
}

TEST_CASE("Lesson 06 expects the code that matches where a function's thread limit comes from", "[cpu][lesson06]") {
    using lesson06::tooWideLaunchCode;
    // Hopper (H100, H200): 1024 threads and 64 Ki registers per block (CU_DEVICE_ATTRIBUTE_MAX_*).
    // saxpy: 10 registers, limit 1024 (the device's): 1025 threads is no block at all.
    STATIC_REQUIRE(tooWideLaunchCode(1024, 10, 1024, 65536) == CUDA_ERROR_INVALID_VALUE);
    // boundedKernel: 4 registers, limit 128 from __launch_bounds__: 129 is outside its declared range.
    STATIC_REQUIRE(tooWideLaunchCode(128, 4, 1024, 65536) == CUDA_ERROR_INVALID_VALUE);
    // registerHungry: 101 registers (104 allocated); 1024 threads would need 106496 of the 65536
    // registers a block may have, so the driver lowered its limit (512 in the README's H200 run).
    STATIC_REQUIRE(lesson06::allocatedRegisters(101) == 104);
    STATIC_REQUIRE(lesson06::limitedByRegisters(101, 1024, 65536));
    STATIC_REQUIRE(tooWideLaunchCode(512, 101, 1024, 65536) == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    // boundedKernel's 4 registers fit a full block: its limit is the one it declares.
    STATIC_REQUIRE_FALSE(lesson06::limitedByRegisters(4, 1024, 65536));
    // 64 registers fit 1024 threads exactly.
    STATIC_REQUIRE_FALSE(lesson06::limitedByRegisters(64, 1024, 65536));
    STATIC_REQUIRE(tooWideLaunchCode(1024, 64, 1024, 65536) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("Lesson 06 accepts for an unresolved call only the load codes cuda.h gives an image that cannot become code",
          "[cpu][lesson06]") {
    using lesson06::refusedForTheImage;
    STATIC_REQUIRE(refusedForTheImage(CUDA_ERROR_INVALID_PTX));
    STATIC_REQUIRE(refusedForTheImage(CUDA_ERROR_NO_BINARY_FOR_GPU));
    STATIC_REQUIRE(refusedForTheImage(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND));
    STATIC_REQUIRE_FALSE(refusedForTheImage(CUDA_SUCCESS));
    STATIC_REQUIRE_FALSE(refusedForTheImage(CUDA_ERROR_INVALID_CONTEXT));
    STATIC_REQUIRE_FALSE(refusedForTheImage(CUDA_ERROR_OUT_OF_MEMORY));
    STATIC_REQUIRE_FALSE(refusedForTheImage(CUDA_ERROR_UNSUPPORTED_PTX_VERSION));
    STATIC_REQUIRE_FALSE(refusedForTheImage(CUDA_ERROR_JIT_COMPILATION_DISABLED));
}

TEST_CASE("Lesson 06 runs a cubin only within its SM family, upwards", "[cpu][lesson06]") {
    using lesson06::cubinRunsOn;
    STATIC_REQUIRE(cubinRunsOn(90, 9, 0));
    STATIC_REQUIRE(cubinRunsOn(80, 8, 6));
    STATIC_REQUIRE(cubinRunsOn(80, 8, 9));
    STATIC_REQUIRE(cubinRunsOn(87, 8, 7));
    STATIC_REQUIRE(cubinRunsOn(110, 11, 0));
    STATIC_REQUIRE_FALSE(cubinRunsOn(86, 8, 0));   // not downwards
    STATIC_REQUIRE_FALSE(cubinRunsOn(90, 10, 0));  // not across a major version
    STATIC_REQUIRE_FALSE(cubinRunsOn(75, 8, 0));
    STATIC_REQUIRE_FALSE(cubinRunsOn(90, 8, 9));
}

// ---------------------------------------------------------------------------
// GPU: the lesson's own checks, read from its output.

TEST_CASE("Lesson 06's first kernel adds every one of its elements exactly", "[gpu][lesson06]") {
    requireGpu();
    for (const char* name : {"first_kernel", "embedded_fatbin"}) {
        INFO(name);
        const RunResult r = defaultRun(kLesson, name);
        requireRan(r);
        CHECK(r.exitCode == 0);
        CHECK(contains(r.out, "check every element is a + b: ok"));
        CHECK(valueOf(r.out, "elements") == "1048576");
        CHECK(valueOf(r.out, "first mismatch") == "none");
        // The process's only reference to the primary context is gone: the context is inactive.
        CHECK(valueOf(r.out, "primary context active after the release") == "0");
        CHECK(contains(r.out, "check primary context inactive after its release: ok"));
        CHECK(contains(r.out, "Result = PASS"));
    }
    const RunResult first = defaultRun(kLesson, "first_kernel");
    CHECK(valueOf(first.out, "cuModuleLoad(kernels/vector_ops.fatbin)") == "loaded");
    // 1 Mi elements, 256 threads a block: 4096 blocks, one thread per element.
    CHECK(valueOf(first.out, "launch") == "4096 blocks x 256 threads");
    CHECK(contains(first.out, "check one thread per element: ok"));
    CHECK(valueOf(defaultRun(kLesson, "embedded_fatbin").out, "cuModuleLoadData(embedded fatbin)") == "loaded");
}

TEST_CASE("Lesson 06's embedded_fatbin prints the size in bytes of the fatbin it carries", "[gpu][lesson06]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "embedded_fatbin");
    requireRan(r);
    const std::string fatbin = readText(moduleDir() + "/vector_ops.fatbin");
    REQUIRE(fatbin.size() > 16);
    // bin2c --type longlong writes whole 8-byte words: the array is the file rounded up to 8 bytes
    // (an element count would be an eighth of that).
    const std::size_t arrayBytes = (fatbin.size() + 7) / 8 * 8;
    CHECK(valueOf(r.out, "embedded fatbin") == std::to_string(arrayBytes) + " bytes");
}

TEST_CASE("Lesson 06's embedded_fatbin passes copied alone into an empty folder, where first_kernel fails cleanly",
          "[gpu][lesson06]") {
    requireGpu();
    namespace fs = std::filesystem;
    const fs::path folder = fs::path(scratchDir()) / "lesson06-alone";
    fs::remove_all(folder);
    REQUIRE(fs::create_directories(folder));
    const Cleanup removeFolder([folder] {
        std::error_code ignored;
        fs::remove_all(folder, ignored);
    });
    // Nothing beside the copies: no kernels/ folder.
    for (const char* name : {"first_kernel", "embedded_fatbin"})
        REQUIRE(copyFile(lessonBinary(kLesson, name), (folder / name).string(), 0755));
    const RunResult embedded = run((folder / "embedded_fatbin").string());
    attachToReport(embedded);
    CHECK(embedded.exitCode == 0);
    CHECK(contains(embedded.out, "check every element is a + b: ok"));
    CHECK(contains(embedded.out, "Result = PASS"));
    // first_kernel needs kernels/vector_ops.fatbin beside it: cuModuleLoad refuses, the program
    // names the file it looked for, and exits 1 without a result.
    const RunResult alone = run((folder / "first_kernel").string());
    attachToReport(alone);
    CHECK(alone.exitCode == 1);
    CHECK(contains(alone.err, "CUDA driver call failed: cuModuleLoad(&module, fatbinPath.c_str())"));
    CHECK(contains(alone.err, "CUDA_ERROR_FILE_NOT_FOUND"));
    CHECK(contains(alone.err, "cannot load " + (folder / "kernels" / "vector_ops.fatbin").string()));
    CHECK_FALSE(contains(alone.out, "Result = "));
}

TEST_CASE("Lesson 06 passes and vectorAdd is exact however its module was loaded", "[gpu][lesson06]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "load_and_launch");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "cuModuleLoad(kernels/vector_ops.fatbin)") == "loaded");
    CHECK(valueOf(r.out, "vector add via cuModuleLoad (fatbin file)") == "exact");
    CHECK(valueOf(r.out, "vector add via cuModuleLoadData (PTX, JIT)") == "exact");
    CHECK(valueOf(r.out, "vectorAdd from the PTX is located in the module just loaded") == "yes");
    if (!contains(r.out, "section cubin: SKIP")) {
        CHECK(valueOf(r.out, "vector add via cuModuleLoadData (cubin image)") == "exact");
        CHECK(valueOf(r.out, "vectorAdd from the cubin is located in the module just loaded") == "yes");
    }
    if (driver().driverVersion() >= 12000 && CUDA_VERSION >= 12000) {
        CHECK(valueOf(r.out, "vector add via cuLibraryLoadData (CUkernel)") == "exact");
        CHECK(valueOf(r.out, "vectorAdd launched from the library is the library's kernel, not the fatbin module's") ==
              "yes");
    }
    // The Makefile builds the cubin for the GPU present, so here it runs.
    CHECK_FALSE(contains(r.out, "section cubin: SKIP"));
    // The fatbin's SASS for this GPU was taken as it is; the PTX went through the JIT from compute_75.
    const auto fromFatbin = valueOf(r.out, "vectorAdd from the fatbin runs");
    const auto fromPtx = valueOf(r.out, "vectorAdd from the PTX runs");
    REQUIRE(fromFatbin);
    REQUIRE(fromPtx);
    CHECK(contains(*fromPtx, "compiled from compute_75"));
    CHECK(fromFatbin->substr(0, fromFatbin->find(',')) == fromPtx->substr(0, fromPtx->find(',')));
    for (const auto& name : kPrograms) {
        INFO(name);
        const RunResult each = defaultRun(kLesson, name);
        CHECK(each.exitCode == 0);
        CHECK(contains(each.out, "Result = PASS"));
    }
}

TEST_CASE("Lesson 06's JIT reports its target, its wall time and a verbose info log", "[gpu][lesson06]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "jit_and_link");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "CUDA_CACHE_DISABLE") == "1");
    // The JIT wrote a verbose info log for the PTX it compiled.
    const auto infoBytes = valueOf(r.out, "JIT info log");
    REQUIRE(infoBytes);
    CHECK(std::stoi(*infoBytes) > 0);
    bool logged = false;
    for (const auto& text : lines(r.out)) logged = logged || (text.rfind("  | ", 0) == 0 && contains(text, "info"));
    CHECK(logged);
    // The target printed is the one the log names for every function ("for 'sm_90a'"), not one derived
    // from the compute capability.
    const auto target = valueOf(r.out, "cuModuleLoadDataEx(kernels/vector_ops.ptx)");
    REQUIRE(target);
    REQUIRE(target->rfind("compiled for sm_", 0) == 0);
    const std::string sm = target->substr(std::string("compiled for ").size());
    CHECK(contains(r.out, "Compiling entry function 'vectorAdd' for '" + sm + "'"));
}

TEST_CASE("Lesson 06's parameter-buffer launch equals its kernelParams launch, at the driver's offsets",
          "[gpu][lesson06]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "param_buffer");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "echoParams via kernelParams") == "every field arrived");
    CHECK(valueOf(r.out, "echoParams via parameter buffer") == "every field arrived");
    CHECK(valueOf(r.out, "parameter buffer launch equals kernelParams launch") == "yes");
    CHECK(valueOf(r.out, "parameter buffer size") == std::to_string(sizeof(EchoParamsMirror)) + " bytes");
    // The buffer size must end at the last parameter; a struct's tail padding is refused.
    const auto padded = valueOf(r.out, "buffer size with tail padding");
    REQUIRE(padded);
    CHECK_FALSE(contains(*padded, "CUDA_SUCCESS"));
    CHECK(contains(valueOf(r.out, "buffer size to the end of the last parameter").value_or(""), "-> exact"));

    const std::array<std::pair<const char*, std::size_t>, 5> params = {{
        {"param 0 a (float)", offsetof(EchoParamsMirror, a)},
        {"param 1 v (float4)", offsetof(EchoParamsMirror, v)},
        {"param 2 s (FloatAndFloat4)", offsetof(EchoParamsMirror, s)},
        {"param 3 n (int)", offsetof(EchoParamsMirror, n)},
        {"param 4 out (float*)", offsetof(EchoParamsMirror, out)},
    }};
    const std::regex layout(
        "offset ([0-9]+), size ([0-9]+), align ([0-9]+)(; driver: offset ([0-9]+), size ([0-9]+))?");
    const bool driverLayout = driver().driverVersion() >= 12040 && CUDA_VERSION >= 12040;
    for (const auto& [label, offset] : params) {
        INFO(label);
        const auto line = valueOf(r.out, label);
        REQUIRE(line);
        std::smatch m;
        REQUIRE(std::regex_search(*line, m, layout));
        CHECK(std::stoul(m[1]) == offset);
        if (driverLayout) {
            REQUIRE(m[4].matched);
            CHECK(m[5] == m[1]);
            CHECK(m[6] == m[2]);
        }
    }
}

TEST_CASE("Lesson 06's broken PTX fails with CUDA_ERROR_INVALID_PTX and a log naming its line", "[gpu][lesson06]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "jit_and_link");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    const auto line = valueOf(r.out, "broken PTX offending line");
    REQUIRE(line);
    CHECK(std::stoi(*line) > 0);
    CHECK(valueOf(r.out, "cuModuleLoadDataEx(broken PTX)") == "CUDA_ERROR_INVALID_PTX");
    CHECK(valueOf(r.out, "error log names line " + *line) == "yes");
    // The log itself, as printed: an indented line naming the PTX line and the bad instruction.
    bool logged = false;
    for (const auto& text : lines(r.out))
        logged = logged || (text.rfind("  | ", 0) == 0 && contains(text, "line " + *line) && contains(text, "mull"));
    CHECK(logged);
    // REPORT_DRIVER reported the provoked failure on stderr.
    CHECK(contains(r.err, "CUDA driver call failed: cuModuleLoadDataEx(&brokenModule"));
}

TEST_CASE("Lesson 06's linked module runs, while the calling PTX alone does not load", "[gpu][lesson06]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "jit_and_link");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    const auto alone = valueOf(r.out, "cuModuleLoadDataEx(link_main.ptx alone)");
    REQUIRE(alone);
    CHECK(*alone != "CUDA_SUCCESS");
    CHECK(valueOf(r.out, "linked kernel applyLinked (2x + 1)") == "exact");
    CHECK(contains(r.out, "loaded before cuLinkDestroy"));
    // link_helper.ptx went in through cuLinkAddFile; cuLinkComplete gave the image and its size.
    CHECK(contains(r.out, "check cuLink links the two PTX files: ok"));
    CHECK(contains(r.out, "check cuLinkComplete gives an ELF image and its size: ok"));
    CHECK(std::regex_search(r.out, std::regex("linked image: an ELF file of [0-9]+ bytes: yes")));
}

TEST_CASE("Lesson 06's kernel reads the __constant__ value the host wrote through cuModuleGetGlobal",
          "[gpu][lesson06]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "load_and_launch");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "gScale") == "4 bytes, 1 in the module image");
    CHECK(valueOf(r.out, "gScale after cuMemcpyHtoD") == "3");
    CHECK(valueOf(r.out, "scaleByGlobal used gScale = 3") == "exact");
    CHECK(valueOf(r.out, "saxpy within tolerance") == "yes");
}

TEST_CASE("Lesson 06 passes when started from another working directory", "[gpu][lesson06]") {
    requireGpu();
    for (const auto& name : kPrograms) {
        INFO(name);
        RunOptions options;
        options.workingDir = "/tmp";
        const RunResult r = runLesson(kLesson, options, name);
        requireRan(r);
        CHECK(r.exitCode == 0);
        CHECK(contains(r.out, "Result = PASS"));
    }
}

TEST_CASE("Lesson 06 with corrupt module files fails at the first load with the driver's error and exit 1",
          "[gpu][lesson06][fault]") {
    requireGpu();
    const ProgramCopy copy("load_and_launch");
    std::filesystem::create_directory(copy.folder / "kernels");
    // ELF magic, then nonsense: the driver takes it for a cubin and cannot read it.
    std::string garbage =
        "\x7f"
        "ELF";
    garbage.append(252, '\xab');
    for (const auto& file : moduleFilesOf("load_and_launch"))
        REQUIRE(writeFile((copy.folder / "kernels" / file).string(), garbage));
    const RunResult r = run(copy.program.string());
    CHECK(r.exitCode == 1);
    CHECK(contains(r.err, "CUDA driver call failed: cuModuleLoad(&fileModule, fatbinPath.c_str())"));
    CHECK((contains(r.err, "CUDA_ERROR_INVALID_IMAGE") || contains(r.err, "CUDA_ERROR_INVALID_PTX")));
    CHECK_FALSE(contains(r.out, "cuModuleLoad(kernels/vector_ops.fatbin): loaded"));
    CHECK_FALSE(contains(r.out, "Result = PASS"));
}

TEST_CASE("Lesson 06 prints the JIT's error log before it fails on a PTX file that does not compile",
          "[gpu][lesson06][fault]") {
    requireGpu();
    // vector_ops.ptx broken: the load with JIT options in step 3 fails for real.
    {
        const ProgramCopy copy("jit_and_link", true);
        copy.breakPtx("vector_ops.ptx");
        const RunResult r = run(copy.program.string());
        attachToReport(r);
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA driver call failed: cuModuleLoadDataEx(&jitModule"));
        CHECK(contains(r.err, "CUDA_ERROR_INVALID_PTX"));
        const auto bytes = valueOf(r.out, "JIT error log");
        REQUIRE(bytes);
        CHECK(std::stoi(*bytes) > 0);
        CHECK(contains(r.out, "  | ptxas application ptx input, line "));
        CHECK(contains(r.out, "'rett'"));
        CHECK(contains(r.out, "check JIT compiles the PTX: FAIL"));
        CHECK(contains(r.out, "Result = FAIL"));
    }
    // link_helper.ptx broken: the JIT compiles it inside cuLinkAddFile; the link's error log comes first.
    {
        const ProgramCopy copy("jit_and_link", true);
        copy.breakPtx("link_helper.ptx");
        const RunResult r = run(copy.program.string());
        attachToReport(r);
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA driver call failed: cuLinkAddFile(link, CU_JIT_INPUT_PTX, helperPath.c_str()"));
        const auto bytes = valueOf(r.out, "link error log");
        REQUIRE(bytes);
        CHECK(std::stoi(*bytes) > 0);
        CHECK(contains(r.out, "'rett'"));
        CHECK(contains(r.out, "check cuLink links the two PTX files: FAIL"));
        CHECK(contains(r.out, "Result = FAIL"));
    }
}

TEST_CASE("Lesson 06 with the PTX JIT disabled skips what needs it, says why, and still passes", "[gpu][lesson06]") {
    requireGpu();
    RunOptions options;
    options.setEnv["CUDA_DISABLE_PTX_JIT"] = "1";
    for (const auto& name : kPrograms) {
        INFO(name);
        const RunResult r = runLesson(kLesson, options, name);
        attachToReport(r);
        requireRan(r);
        CHECK(r.exitCode == 0);
        CHECK(contains(r.out, "Result = PASS"));
        if (std::find(kModulePrograms.begin(), kModulePrograms.end(), name) != kModulePrograms.end())
            CHECK(valueOf(r.out, "CUDA_DISABLE_PTX_JIT") == "1");
    }
    // With the JIT cache on, a PTX compiled by an earlier run would load from the cache even now:
    // the programs that load PTX turn the cache off, so the JIT is really asked.
    const std::string refused = "the driver refused the PTX with CUDA_ERROR_JIT_COMPILATION_DISABLED";
    // load_and_launch: the PTX is refused; the fatbin, the cubin and the library run from SASS.
    const RunResult load = runLesson(kLesson, options, "load_and_launch");
    CHECK(valueOf(load.out, "CUDA_CACHE_DISABLE chosen by") == "this program");
    CHECK(contains(load.out, "section PTX: SKIP (" + refused));
    CHECK(contains(load.err, "CUDA_ERROR_JIT_COMPILATION_DISABLED"));
    CHECK(valueOf(load.out, "vector add via cuModuleLoad (fatbin file)") == "exact");
    CHECK(valueOf(load.out, "vector add via cuModuleLoadData (cubin image)") == "exact");
    CHECK_FALSE(valueOf(load.out, "vector add via cuModuleLoadData (PTX, JIT)"));
    // jit_and_link: every section that compiles PTX says it was skipped, and why.
    const RunResult jit = runLesson(kLesson, options, "jit_and_link");
    for (const char* section : {"JIT options", "broken PTX", "PTX with an unresolved call", "cuLink"}) {
        INFO(section);
        CHECK(contains(jit.out, std::string("section ") + section + ": SKIP (" + refused));
    }
    CHECK_FALSE(valueOf(jit.out, "linked kernel applyLinked (2x + 1)"));
}

TEST_CASE("Lesson 06 reports the module loading mode that CUDA_MODULE_LOADING asks for", "[gpu][lesson06]") {
    requireGpu();
    if (driver().driverVersion() < 11070) SKIP("cuModuleGetLoadingMode needs a CUDA 11.7 driver");
    for (const std::string mode : {"EAGER", "LAZY"}) {
        INFO(mode);
        RunOptions options;
        options.setEnv["CUDA_MODULE_LOADING"] = mode;
        const RunResult r = runLesson(kLesson, options, "launch_bench");
        requireRan(r);
        CHECK(r.exitCode == 0);
        CHECK(valueOf(r.out, "CUDA_MODULE_LOADING") == mode);
        CHECK(valueOf(r.out, "module loading mode") == mode);
        CHECK(contains(r.out, "check module loading mode follows CUDA_MODULE_LOADING: ok"));
        // Eager loading puts every kernel on the GPU inside cuModuleLoad*.
        if (mode == "EAGER" && driver().driverVersion() >= 12040 && CUDA_VERSION >= 12040)
            CHECK(valueOf(r.out, "emptyKernel loaded before its first launch") == "yes");
        CHECK(valueOf(r.out, "first launch + synchronize"));
        CHECK(valueOf(r.out, "second launch + synchronize"));
        // The other programs do not depend on the mode.
        for (const auto& name : kPrograms) {
            INFO(name);
            const RunResult each = runLesson(kLesson, options, name);
            CHECK(each.exitCode == 0);
            if (std::find(kModulePrograms.begin(), kModulePrograms.end(), name) != kModulePrograms.end())
                CHECK(valueOf(each.out, "CUDA_MODULE_LOADING") == mode);
        }
    }
}

TEST_CASE("Lesson 06's benchmark mode prints its figures and still checks its results", "[gpu][lesson06][bench]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench"};
    options.timeoutSeconds = 300;
    const RunResult r = runLesson(kLesson, options, "launch_bench");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "CUDA_MODULE_LOADING") == "EAGER");
    if (!contains(r.out, "section vector add bench: SKIP")) {
        CHECK(contains(r.out, "bench: vector add 256 Mi floats = "));
        CHECK(valueOf(r.out, "vector add 256 Mi floats result") == "exact");
        // Both references measured or read in this run, none remembered from another machine.
        CHECK(contains(r.out, "bench: DRAM peak (2 x memory clock x bus width / 8) = "));
        CHECK(contains(r.out, "bench: cuMemcpyDtoD 1 GiB (read + write) = "));
        // Each share is 100 x the ratio of the printed bandwidths (1 decimal each), within rounding.
        const double add = benchValue(r.out, "vector add 256 Mi floats");
        const double copy = benchValue(r.out, "cuMemcpyDtoD 1 GiB (read + write)");
        const double peak = benchValue(r.out, "DRAM peak (2 x memory clock x bus width / 8)");
        REQUIRE(add > 0.0);
        REQUIRE(copy > 0.0);
        REQUIRE(peak > 0.0);
        CHECK(std::fabs(benchValue(r.out, "vector add share of DRAM peak") - 100.0 * add / peak) <=
              100.0 * printedRatioSlack(add, peak, 0.05, 0.0005));
        CHECK(std::fabs(benchValue(r.out, "vector add share of cuMemcpyDtoD") - 100.0 * add / copy) <=
              100.0 * printedRatioSlack(add, copy, 0.05, 0.0005));
        CHECK_FALSE(contains(r.out, "2980"));
    }
    CHECK(valueOf(r.out, "runtime's cudaMalloc allocated in the lesson's primary context") == "yes");
    const double driverSubmit = benchValue(r.out, "cuLaunchKernel empty kernel submission");
    const double runtimeSubmit = benchValue(r.out, "runtime <<<>>> empty kernel submission");
    const double driverTotal = benchValue(r.out, "cuLaunchKernel empty kernel end-to-end");
    const double runtimeTotal = benchValue(r.out, "runtime <<<>>> empty kernel end-to-end");
    REQUIRE(driverSubmit > 0.0);
    REQUIRE(runtimeSubmit > 0.0);
    // Each run's end-to-end time includes its own submission, so the medians keep that order.
    CHECK(driverTotal >= driverSubmit);
    CHECK(runtimeTotal >= runtimeSubmit);
    // Each printed ratio is the ratio of the printed figures (2 decimals each), within rounding.
    CHECK(std::fabs(benchValue(r.out, "launch submission driver / runtime") - driverSubmit / runtimeSubmit) <=
          printedRatioSlack(driverSubmit, runtimeSubmit, 0.005, 0.005));
    CHECK(std::fabs(benchValue(r.out, "launch end-to-end driver / runtime") - driverTotal / runtimeTotal) <=
          printedRatioSlack(driverTotal, runtimeTotal, 0.005, 0.005));
    CHECK(contains(r.out, "bench: module load PTX (JIT, cache off) = "));
    CHECK(contains(r.out, "bench: module load cubin = "));
    CHECK(contains(r.out, "bench: module load fatbin = "));
}

// ---------------------------------------------------------------------------
// GPU: the same driver behaviour, checked directly through the dlopen'ed driver.

TEST_CASE("The driver rejects PTX with an unknown instruction as CUDA_ERROR_INVALID_PTX, naming the line",
          "[gpu][lesson06]") {
    requireGpu();
    const CurrentPrimaryContext current;
    const std::string ptx =
        ".version 7.0\n.target sm_75\n.address_size 64\n\n"
        ".visible .entry negate(.param .u64 p)\n{\n    .reg .b64 %rd<2>;\n    .reg .f32 %f<3>;\n"
        "    ld.param.u64 %rd1, [p];\n    cvta.to.global.u64 %rd1, %rd1;\n    ld.global.f32 %f1, [%rd1];\n"
        "    negg.f32 %f2, %f1;\n    st.global.f32 [%rd1], %f2;\n    ret;\n}\n";
    int badLine = 1;
    for (std::size_t i = 0; i < ptx.find("negg"); ++i) badLine += ptx[i] == '\n';
    CUmodule module = nullptr;
    std::string log;
    const CUresult result = loadWithErrorLog(ptx, &module, log);
    CHECK(driver().nameOf(result) == "CUDA_ERROR_INVALID_PTX");
    CHECK(contains(log, "line " + std::to_string(badLine)));
    CHECK(contains(log, "negg"));
    if (result == CUDA_SUCCESS) DRIVER_FUNCTION(driver(), cuModuleUnload)(module);
}

TEST_CASE("cuFuncGetParamInfo reports the offsets that lesson 06's parameter buffer computes", "[gpu][lesson06]") {
    requireGpu();
#if CUDA_VERSION >= 12040
    if (driver().driverVersion() < 12040) SKIP("cuFuncGetParamInfo needs a CUDA 12.4 driver");
    const CurrentPrimaryContext current;
    auto loadData = DRIVER_FUNCTION(driver(), cuModuleLoadData);
    auto getFunction = DRIVER_FUNCTION(driver(), cuModuleGetFunction);
    auto paramInfo = DRIVER_FUNCTION(driver(), cuFuncGetParamInfo);
    auto unload = DRIVER_FUNCTION(driver(), cuModuleUnload);
    REQUIRE((loadData && getFunction && paramInfo && unload));
    const std::string ptx = readText(moduleDir() + "/vector_ops.ptx");
    REQUIRE_FALSE(ptx.empty());
    CUmodule module = nullptr;
    REQUIRE(loadData(&module, ptx.c_str()) == CUDA_SUCCESS);
    CUfunction echo = nullptr;
    REQUIRE(getFunction(&echo, module, "echoParams") == CUDA_SUCCESS);

    lesson06::ParamBuffer buffer;
    const std::array<std::size_t, 5> offsets = {buffer.add(1.0f), buffer.add(float4{}), buffer.add(FloatAndFloat4{}),
                                                buffer.add(0), buffer.add(CUdeviceptr{})};
    const std::array<std::size_t, 5> sizes = {sizeof(float), sizeof(float4), sizeof(FloatAndFloat4), sizeof(int),
                                              sizeof(CUdeviceptr)};
    for (std::size_t i = 0; i < offsets.size(); ++i) {
        INFO("parameter " << i);
        std::size_t offset = 0;
        std::size_t size = 0;
        REQUIRE(paramInfo(echo, i, &offset, &size) == CUDA_SUCCESS);
        CHECK(offset == offsets[i]);
        CHECK(size == sizes[i]);
    }
    // One past the last parameter is not a parameter.
    std::size_t offset = 0;
    CHECK(paramInfo(echo, offsets.size(), &offset, nullptr) == CUDA_ERROR_INVALID_VALUE);
    CHECK(unload(module) == CUDA_SUCCESS);
#else
    SKIP("compiled with a cuda.h older than 12.4: no cuFuncGetParamInfo");
#endif
}

TEST_CASE("A kernel launched through a parameter buffer reads the __constant__ written with cuModuleGetGlobal",
          "[gpu][lesson06]") {
    requireGpu();
    const CurrentPrimaryContext current;
    auto loadData = DRIVER_FUNCTION(driver(), cuModuleLoadData);
    auto getFunction = DRIVER_FUNCTION(driver(), cuModuleGetFunction);
    auto getGlobal = DRIVER_FUNCTION(driver(), cuModuleGetGlobal);
    auto memAlloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
    auto copyIn = DRIVER_FUNCTION(driver(), cuMemcpyHtoD);
    auto copyOut = DRIVER_FUNCTION(driver(), cuMemcpyDtoH);
    auto launch = DRIVER_FUNCTION(driver(), cuLaunchKernel);
    auto synchronize = DRIVER_FUNCTION(driver(), cuCtxSynchronize);
    auto unload = DRIVER_FUNCTION(driver(), cuModuleUnload);
    REQUIRE((loadData && getFunction && getGlobal && memAlloc && memFree && copyIn && copyOut && launch &&
             synchronize && unload));

    const std::string fatbin = readText(moduleDir() + "/vector_ops.fatbin");
    REQUIRE_FALSE(fatbin.empty());
    CUmodule module = nullptr;
    REQUIRE(loadData(&module, fatbin.data()) == CUDA_SUCCESS);
    CUfunction scaleByGlobal = nullptr;
    REQUIRE(getFunction(&scaleByGlobal, module, "scaleByGlobal") == CUDA_SUCCESS);
    CUdeviceptr scaleAddress = 0;
    std::size_t scaleBytes = 0;
    REQUIRE(getGlobal(&scaleAddress, &scaleBytes, module, "gScale") == CUDA_SUCCESS);
    CHECK(scaleBytes == sizeof(float));
    const float scale = -0.5f;
    REQUIRE(copyIn(scaleAddress, &scale, sizeof(scale)) == CUDA_SUCCESS);

    constexpr int kCount = 37;
    std::vector<float> input(kCount);
    for (int i = 0; i < kCount; ++i) input[i] = 1.0f + static_cast<float>(i) / 8.0f;
    CUdeviceptr in = 0;
    CUdeviceptr out = 0;
    REQUIRE(memAlloc(&in, kCount * sizeof(float)) == CUDA_SUCCESS);
    REQUIRE(memAlloc(&out, kCount * sizeof(float)) == CUDA_SUCCESS);
    REQUIRE(copyIn(in, input.data(), kCount * sizeof(float)) == CUDA_SUCCESS);

    lesson06::ParamBuffer buffer;
    buffer.add(in);
    buffer.add(out);
    buffer.add(kCount);
    std::size_t size = buffer.size();
    CHECK(size == 20);  // 8 + 8 + 4: the end of the last parameter, no tail padding
    // The same bytes followed by the tail padding a struct { const float*; float*; int; } would have.
    std::size_t paddedSize = 24;
    std::vector<unsigned char> paddedBuffer(paddedSize, 0);
    std::memcpy(paddedBuffer.data(), buffer.data(), size);
    void* padded[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, paddedBuffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &paddedSize,
                      CU_LAUNCH_PARAM_END};
    CHECK(launch(scaleByGlobal, 1, 1, 1, 64, 1, 1, 0, nullptr, nullptr, padded) != CUDA_SUCCESS);
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    CHECK(launch(scaleByGlobal, 1, 1, 1, 64, 1, 1, 0, nullptr, nullptr, extra) == CUDA_SUCCESS);
    CHECK(synchronize() == CUDA_SUCCESS);
    std::vector<float> output(kCount, 0.0f);
    CHECK(copyOut(output.data(), out, kCount * sizeof(float)) == CUDA_SUCCESS);
    for (int i = 0; i < kCount; ++i) CHECK(output[i] == scale * input[i]);

    CHECK(memFree(out) == CUDA_SUCCESS);
    CHECK(memFree(in) == CUDA_SUCCESS);
    CHECK(unload(module) == CUDA_SUCCESS);
}

TEST_CASE("cuLink resolves the extern device function that loading the calling PTX alone cannot", "[gpu][lesson06]") {
    requireGpu();
    const CurrentPrimaryContext current;
    auto linkCreate = DRIVER_FUNCTION(driver(), cuLinkCreate);
    auto linkAddData = DRIVER_FUNCTION(driver(), cuLinkAddData);
    auto linkComplete = DRIVER_FUNCTION(driver(), cuLinkComplete);
    auto linkDestroy = DRIVER_FUNCTION(driver(), cuLinkDestroy);
    auto loadData = DRIVER_FUNCTION(driver(), cuModuleLoadData);
    auto getFunction = DRIVER_FUNCTION(driver(), cuModuleGetFunction);
    auto unload = DRIVER_FUNCTION(driver(), cuModuleUnload);
    REQUIRE((linkCreate && linkAddData && linkComplete && linkDestroy && loadData && getFunction && unload));
    std::string caller = readText(moduleDir() + "/link_main.ptx");
    std::string helper = readText(moduleDir() + "/link_helper.ptx");
    REQUIRE_FALSE(caller.empty());
    REQUIRE_FALSE(helper.empty());

    CUmodule alone = nullptr;
    std::string log;
    const CUresult aloneResult = loadWithErrorLog(caller, &alone, log);
    // cuda.h names no single code for it: one of the three that say the image could not load.
    CHECK(lesson06::refusedForTheImage(aloneResult));
    CHECK(contains(log, "linkedTransform"));
    if (aloneResult == CUDA_SUCCESS) unload(alone);

    CUlinkState link = nullptr;
    REQUIRE(linkCreate(0, nullptr, nullptr, &link) == CUDA_SUCCESS);
    CHECK(linkAddData(link, CU_JIT_INPUT_PTX, caller.data(), caller.size() + 1, "link_main.ptx", 0, nullptr, nullptr) ==
          CUDA_SUCCESS);
    CHECK(linkAddData(link, CU_JIT_INPUT_PTX, helper.data(), helper.size() + 1, "link_helper.ptx", 0, nullptr,
                      nullptr) == CUDA_SUCCESS);
    void* cubin = nullptr;
    std::size_t cubinBytes = 0;
    CUmodule linked = nullptr;
    const CUresult completed = linkComplete(link, &cubin, &cubinBytes);
    CHECK(completed == CUDA_SUCCESS);
    if (completed == CUDA_SUCCESS) {
        CHECK(cubinBytes > 0);
        CHECK(loadData(&linked, cubin) == CUDA_SUCCESS);
    }
    CHECK(linkDestroy(link) == CUDA_SUCCESS);
    if (linked != nullptr) {
        CUfunction applyLinked = nullptr;
        CHECK(getFunction(&applyLinked, linked, "applyLinked") == CUDA_SUCCESS);
        CHECK(unload(linked) == CUDA_SUCCESS);
    }
}

TEST_CASE("Lesson 06 shows the driver refusing a launch wider than the function allows and PTX from the future",
          "[gpu][lesson06][fault]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "load_and_launch");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    // An invalid launch configuration fails at cuLaunchKernel, reported through the check macro.
    bool launchRefused = false;
    for (const auto& line : lines(r.out))
        launchRefused =
            launchRefused || (line.rfind("cuLaunchKernel with ", 0) == 0 && contains(line, "threads per block") &&
                              contains(line, ": CUDA_ERROR_INVALID_VALUE"));
    CHECK(launchRefused);
    CHECK(contains(r.err, "CUDA driver call failed: cuLaunchKernel(saxpy, 1, 1, 1, saxpyMaxThreads + 1"));
    // Each limit comes from the function's CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, and its source decides the
    // code: past the device's own limit, or past the function's __launch_bounds__(128), the block is an
    // invalid value; past a limit that the register file sets, the launch is out of resources.
    CHECK(valueOf(r.out, "cuLaunchKernel with 1025 threads per block (saxpy max 1024, device max 1024)") ==
          "CUDA_ERROR_INVALID_VALUE");
    CHECK(valueOf(r.out, "cuLaunchKernel with 129 threads per block (boundedKernel max 128, device max 1024)") ==
          "CUDA_ERROR_INVALID_VALUE");
    bool registerLimitRefused = false;
    for (const auto& line : lines(r.out))
        registerLimitRefused = registerLimitRefused ||
                               (line.rfind("cuLaunchKernel with ", 0) == 0 && contains(line, "(registerHungry max ") &&
                                contains(line, "): CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"));
    CHECK(registerLimitRefused);
    CHECK(valueOf(r.out, "too-wide launches refused with the expected codes") == "yes");
    CHECK(contains(r.err, "CUDA driver call failed: cuLaunchKernel(boundedKernel, 1, 1, 1, boundedMaxThreads + 1"));
    CHECK(contains(r.err, "CUDA driver call failed: cuLaunchKernel(registerHungry, 1, 1, 1, hungryMaxThreads + 1"));
    // PTX declaring an ISA newer than the driver's JIT knows.
    const RunResult jit = defaultRun(kLesson, "jit_and_link");
    requireRan(jit);
    REQUIRE(jit.exitCode == 0);
    CHECK(valueOf(jit.out, "cuModuleLoadData(PTX .version 99.9)") == "CUDA_ERROR_UNSUPPORTED_PTX_VERSION");
    CHECK(contains(jit.err, "hint:  the PTX was made by a toolkit newer than this driver"));
}

TEST_CASE("Lesson 06's programs decide PASS through named checks, and every one held", "[gpu][lesson06]") {
    requireGpu();
    for (const auto& name : kPrograms) {
        INFO(name);
        const RunResult r = defaultRun(kLesson, name);
        if (r.exitCode == 77) continue;
        // launch_bench's plain run only times the first launches: its checks come with --bench
        // or CUDA_MODULE_LOADING.
        requireChecksHeld(r, name != "launch_bench");
    }
    const RunResult r = defaultRun(kLesson, "load_and_launch");
    for (const char* check :
         {"gScale is one float", "gScale reads back the host write", "scaleByGlobal used the host-written gScale",
          "saxpy within tolerance", "too-wide launch of saxpy refused with the expected code",
          "cuModuleLoad finds the fatbin by its full path",
          "occupancy's answer agrees with the device and the function",
          "boundedKernel's limit is its __launch_bounds__"}) {
        INFO(check);
        CHECK(contains(r.out, std::string("check ") + check + ": ok"));
    }
}
