#include <cuda.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "18-runtime-compilation/kernel_cache.h"
#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "18-runtime-compilation";
const std::vector<std::string> kPrograms = {"compile_and_load", "templates_and_lto", "compile_cache"};

// A fresh folder under /tmp, removed with everything in it when the test ends.
struct TemporaryFolder {
    std::filesystem::path path;
    TemporaryFolder() {
        char pattern[] = "/tmp/lesson18-test-XXXXXX";
        REQUIRE(mkdtemp(pattern) != nullptr);
        path = pattern;
    }
    ~TemporaryFolder() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
    TemporaryFolder(const TemporaryFolder&) = delete;
    TemporaryFolder& operator=(const TemporaryFolder&) = delete;
};

void writeText(const std::filesystem::path& path, const std::string& text) {
    REQUIRE(harness::writeFile(path.string(), text));
}

// The lines a compile_cache run's story is told by: lookups, damage, checks and the result.
std::vector<std::string> cacheStory(const std::string& out) {
    std::vector<std::string> story;
    for (const auto& line : lines(out))
        for (const char* prefix : {"key (", "entry: ", "lookup: ", "one byte flipped: ", "cut in the middle: ",
                                   "rebuilt, lookup: ", "check ", "Result = "})
            if (line.rfind(prefix, 0) == 0) story.push_back(line);
    return story;
}

// compile_cache with the given environment; requires PASS and every check ok.
RunResult runCache(const RunOptions& options) {
    const RunResult r = runLesson(kLesson, options, "compile_cache");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    requireChecksHeld(r);
    return r;
}

// The entry a run stored, from its "key" line, under a cache root.
std::filesystem::path entryOf(const RunResult& r, const std::filesystem::path& root, std::uint64_t& key) {
    const std::string hex = valueOf(r.out, "key (FNV-1a, 64 bits)").value_or("");
    REQUIRE(hex.size() == 16);
    key = std::stoull(hex, nullptr, 16);
    return root / lesson18::kCourseSubfolder / (hex + ".cubin");
}

}  // namespace

// ---------------------------------------------------------------------------
// CPU: no driver needed.

TEST_CASE("Lesson 18 runs its three programs in order", "[cpu][lesson18]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Lesson 18 rejects unknown or incomplete arguments with a usage line and exit 2", "[cpu][lesson18]") {
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {"compile_and_load", {"--bench"}},  // only compile_cache has a benchmark
        {"templates_and_lto", {"--bench"}},   {"compile_and_load", {"--device"}},
        {"compile_cache", {"--rounds", "9"}}, {"compile_cache", {"--device", "one"}},
    };
    for (const auto& [program, args] : cases) checkRefusesArguments(kLesson, args, program);
}

TEST_CASE("The build puts lesson 18's kernel source next to its programs, beside nvcc's fatbin of it",
          "[cpu][lesson18]") {
    const std::string kernels = buildDir() + "/" + kLesson + "/kernels/";
    CHECK(readText(kernels + "saxpy.cu") == readText(repoRoot() + "/" + kLesson + "/kernels/saxpy.cu"));
    CHECK_FALSE(readText(kernels + "saxpy.fatbin").empty());
}

TEST_CASE("Lesson 18's FNV-1a gives the published 64-bit test values", "[cpu][lesson18]") {
    CHECK(lesson18::hex64(lesson18::fnv1a("")) == "cbf29ce484222325");
    CHECK(lesson18::hex64(lesson18::fnv1a("a")) == "af63dc4c8601ec8c");
    CHECK(lesson18::hex64(lesson18::fnv1a("foobar")) == "85944171f73967e8");
}

TEST_CASE("Lesson 18's cache key changes with every input and keeps fields apart", "[cpu][lesson18]") {
    const lesson18::KeyInputs base{"source", "--gpu-architecture=sm_90", 90, 13000, 13000};
    const std::uint64_t key = lesson18::cacheKey(base);
    CHECK(lesson18::cacheKey(base) == key);  // a function of its inputs only
    lesson18::KeyInputs changed = base;
    changed.source = "source ";
    CHECK(lesson18::cacheKey(changed) != key);
    changed = base;
    changed.options += " -lineinfo";
    CHECK(lesson18::cacheKey(changed) != key);
    changed = base;
    changed.arch = 89;
    CHECK(lesson18::cacheKey(changed) != key);
    changed = base;
    changed.nvrtcVersion = 12080;
    CHECK(lesson18::cacheKey(changed) != key);
    changed = base;
    changed.driverVersion = 13010;
    CHECK(lesson18::cacheKey(changed) != key);
    // The same bytes split differently between source and options.
    const lesson18::KeyInputs left{"ab", "c", 90, 13000, 13000};
    const lesson18::KeyInputs right{"a", "bc", 90, 13000, 13000};
    CHECK(lesson18::cacheKey(left) != lesson18::cacheKey(right));
}

TEST_CASE("Lesson 18's cache lives under an absolute XDG_CACHE_HOME, else under HOME/.cache", "[cpu][lesson18]") {
    const std::string sub = lesson18::kCourseSubfolder;
    auto xdg = lesson18::cacheFolder("/x/cache", "/home/u");
    REQUIRE(xdg);
    CHECK(xdg->path == "/x/cache/" + sub);
    CHECK(xdg->shown == "$XDG_CACHE_HOME/" + sub);
    for (const char* ignored : {"", "relative/cache"}) {
        INFO("XDG_CACHE_HOME=" << ignored);
        auto home = lesson18::cacheFolder(ignored, "/home/u");
        REQUIRE(home);
        CHECK(home->path == "/home/u/.cache/" + sub);
        CHECK(home->shown == "$HOME/.cache/" + sub);
    }
    auto unset = lesson18::cacheFolder(nullptr, "/home/u");
    REQUIRE(unset);
    CHECK(unset->path == "/home/u/.cache/" + sub);
    CHECK_FALSE(lesson18::cacheFolder(nullptr, nullptr));
    CHECK_FALSE(lesson18::cacheFolder(nullptr, ""));
}

TEST_CASE("Lesson 18's cache entry is stored whole, read back, and refused when damaged in any way",
          "[cpu][lesson18]") {
    TemporaryFolder temporary;
    const std::string folder = (temporary.path / "a" / "b").string();
    REQUIRE(lesson18::makeFolders(folder));
    struct stat info {};
    REQUIRE(stat(folder.c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0700);
    const std::uint64_t key = 0x0123456789abcdefull;
    const std::string path = folder + "/" + lesson18::entryName(key);
    CHECK(lesson18::entryName(key) == "0123456789abcdef.cubin");
    CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::Missing);

    std::string cubin(5000, '\0');
    for (std::size_t i = 0; i < cubin.size(); ++i) cubin[i] = static_cast<char>(i * 7);
    const lesson18::Stored stored = lesson18::writeEntry(folder, key, cubin);
    REQUIRE(stored.ok);
    CHECK_FALSE(lesson18::fileExists(folder + "/" + stored.temporaryName));
    REQUIRE(stat(path.c_str(), &info) == 0);
    CHECK(static_cast<std::size_t>(info.st_size) == lesson18::kHeaderBytes + cubin.size());
    CHECK((info.st_mode & 0777) == 0600);  // mkstemp's mode, kept by the rename
    lesson18::Lookup hit = lesson18::readEntry(path, key);
    CHECK(hit.state == lesson18::EntryState::Hit);
    CHECK(hit.cubin == cubin);
    CHECK(lesson18::readEntry(path, key + 1).state == lesson18::EntryState::OtherKey);

    const std::string whole = readText(path);
    for (std::size_t at : {lesson18::kHeaderBytes, lesson18::kHeaderBytes + 2500, whole.size() - 1}) {
        INFO("byte " << at << " flipped");
        std::string flipped = whole;
        flipped[at] = static_cast<char>(flipped[at] ^ 1);
        writeText(path, flipped);
        CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::Corrupt);
    }
    writeText(path, whole.substr(0, whole.size() - 1));
    CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::WrongSize);
    writeText(path, whole + "x");
    CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::WrongSize);
    writeText(path, whole.substr(0, 20));
    CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::NotAnEntry);
    writeText(path, "");
    CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::NotAnEntry);
    writeText(path, std::string(100, 'x'));
    CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::NotAnEntry);

    // A store over a damaged entry replaces it; removing it leaves nothing, twice over.
    REQUIRE(lesson18::writeEntry(folder, key, cubin).ok);
    CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::Hit);
    CHECK(lesson18::removeEntry(path));
    CHECK_FALSE(lesson18::fileExists(path));
    CHECK(lesson18::removeEntry(path));
    // Nothing but the entries was ever left in the folder: every temporary file was renamed.
    CHECK(std::filesystem::is_empty(folder));
}

TEST_CASE("Lesson 18's cache store fails cleanly where the folder does not exist", "[cpu][lesson18]") {
    TemporaryFolder temporary;
    const lesson18::Stored stored = lesson18::writeEntry((temporary.path / "missing").string(), 1, "cubin");
    CHECK_FALSE(stored.ok);
    CHECK(std::filesystem::is_empty(temporary.path));
}

// ---------------------------------------------------------------------------
// GPU: the lesson's own checks, read from its output.

TEST_CASE("Lesson 18 compile_and_load reads the broken source's log and runs the PTX and the CUBIN it compiled",
          "[gpu][lesson18]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "compile_and_load");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    requireChecksHeld(r);
    CHECK(valueOf(r.out, "nvrtcCompileProgram(broken.cu)") == "NVRTC_ERROR_COMPILATION");
    CHECK(contains(r.out, "  | broken.cu(3): error: identifier \"undefinedFactor\" is undefined"));
    CHECK(valueOf(r.out, "CUBIN from the same compile") == "0 bytes");
    const std::regex cubin("[0-9]+ bytes, an ELF file: yes");
    CHECK(std::regex_match(valueOf(r.out, "CUBIN").value_or(""), cubin));
    CHECK(valueOf(r.out, "current context") == "none");
    CHECK(valueOf(r.out, "cuModuleLoadData without a context") == "CUDA_ERROR_INVALID_CONTEXT");
    // Both kernels are SASS for this GPU's architecture: the JIT's and NVRTC's.
    const std::string cc = valueOf(r.out, "compute capability").value_or("?");
    const std::string sm = "SASS for sm_" + std::regex_replace(cc, std::regex("\\."), "");
    if (!contains(r.out, "section PTX: SKIP")) CHECK(contains(valueOf(r.out, "saxpy from the PTX").value_or(""), sm));
    if (!contains(r.out, "section library: SKIP"))
        CHECK(contains(valueOf(r.out, "saxpy from the CUBIN").value_or(""), sm));
}

TEST_CASE("Lesson 18 compile_and_load with the PTX JIT disabled still passes on what needs no JIT", "[gpu][lesson18]") {
    requireGpu();
    RunOptions options;
    options.setEnv["CUDA_DISABLE_PTX_JIT"] = "1";
    options.setEnv["CUDA_CACHE_DISABLE"] = "1";  // else a PTX compiled before may come from the JIT cache
    const RunResult r = runLesson(kLesson, options, "compile_and_load");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(contains(r.out, "section PTX: SKIP (CUDA_ERROR_JIT_COMPILATION_DISABLED: CUDA_DISABLE_PTX_JIT is set)"));
}

TEST_CASE(
    "Lesson 18 templates_and_lto launches two instantiations by their lowered names and links with and "
    "without LTO",
    "[gpu][lesson18]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "templates_and_lto");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    requireChecksHeld(r);
    const std::string floatName = valueOf(r.out, "lowered name of scaleBy<float>").value_or("");
    const std::string intName = valueOf(r.out, "lowered name of scaleBy<int>").value_or("");
    CHECK(floatName.rfind("_Z7scaleBy", 0) == 0);
    CHECK(intName.rfind("_Z7scaleBy", 0) == 0);
    CHECK(floatName != intName);
    CHECK(valueOf(r.out, "cuModuleGetFunction(\"scaleBy<float>\")") == "CUDA_ERROR_NOT_FOUND");
    // "iterate, cuLink: R registers, L bytes local memory, T ms"
    const std::regex form("([0-9]+) registers, ([0-9]+) bytes local memory, [0-9.]+ ms");
    std::smatch plain;
    const std::string plainLine = valueOf(r.out, "iterate, cuLink").value_or("");
    REQUIRE(std::regex_match(plainLine, plain, form));
    if (contains(r.out, "section link-time optimisation: SKIP")) return;
    std::smatch lto;
    const std::string ltoLine = valueOf(r.out, "iterate, nvJitLink -lto").value_or("");
    REQUIRE(std::regex_match(ltoLine, lto, form));
    CHECK(std::stoi(lto[2]) <= std::stoi(plain[2]));
    CHECK(contains(r.out, "  | ptxas fatal   : Unresolved extern function '_Z4stepfi'"));
}

TEST_CASE("Lesson 18 compile_cache stores its entry under XDG_CACHE_HOME and tells the same story on every run",
          "[gpu][lesson18]") {
    requireGpu();
    TemporaryFolder cache;
    RunOptions options;
    options.setEnv["XDG_CACHE_HOME"] = cache.path.string();
    const RunResult first = runCache(options);
    CHECK(valueOf(first.out, "cache folder") == std::string("$XDG_CACHE_HOME/") + lesson18::kCourseSubfolder);
    std::uint64_t key = 0;
    const std::filesystem::path entry = entryOf(first, cache.path, key);
    // The entry the run left is whole, by the lesson's own reader.
    const lesson18::Lookup left = lesson18::readEntry(entry.string(), key);
    CHECK(left.state == lesson18::EntryState::Hit);
    CHECK(contains(readText(entry.string()), "\177ELF"));
    CHECK(valuesOf(first.out, "lookup") == std::vector<std::string>{"miss (no entry)", "hit"});
    // Whatever an earlier run left, the next run tells the same story: here a garbage entry and
    // a temporary file from a store that never finished.
    writeText(entry, "not a cubin");
    writeText(entry.string() + ".tmp.abcdef", "half a cubin");
    const RunResult second = runCache(options);
    CHECK(cacheStory(second.out) == cacheStory(first.out));
    CHECK(lesson18::readEntry(entry.string(), key).state == lesson18::EntryState::Hit);
}

TEST_CASE("Lesson 18 compile_cache runs started together take turns and tell the same story", "[gpu][lesson18]") {
    requireGpu();
    TemporaryFolder cache;
    Job job{lessonBinary(kLesson, "compile_cache"), {}};
    job.options.setEnv["XDG_CACHE_HOME"] = cache.path.string();
    const std::vector<RunResult> runs = runAll({job, job, job}, 3);
    for (const RunResult& r : runs) {
        attachToReport(r);
        requireRan(r);
        CHECK(r.exitCode == 0);
        CHECK(contains(r.out, "Result = PASS"));
        CHECK(valueOf(r.out, "demo lock (demo.lock, other runs of this program wait)") == "held");
        CHECK(cacheStory(r.out) == cacheStory(runs.front().out));
    }
}

TEST_CASE("Lesson 18 compile_cache falls back to HOME/.cache without XDG_CACHE_HOME", "[gpu][lesson18]") {
    requireGpu();
    TemporaryFolder home;
    RunOptions options;
    options.setEnv["HOME"] = home.path.string();
    options.unsetEnv = {"XDG_CACHE_HOME"};
    const RunResult r = runCache(options);
    CHECK(valueOf(r.out, "cache folder") == std::string("$HOME/.cache/") + lesson18::kCourseSubfolder);
    std::uint64_t key = 0;
    const std::filesystem::path entry = entryOf(r, home.path / ".cache", key);
    CHECK(lesson18::readEntry(entry.string(), key).state == lesson18::EntryState::Hit);
    struct stat info {};
    REQUIRE(stat((home.path / ".cache" / lesson18::kCourseSubfolder).c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0700);
}

TEST_CASE("Lesson 18 compile_cache --bench: loading from the cache is faster than compiling", "[gpu][lesson18]") {
    requireGpu();
    TemporaryFolder cache;
    RunOptions options;
    options.args = {"--bench"};
    options.setEnv["XDG_CACHE_HOME"] = cache.path.string();
    const RunResult r = runCache(options);
    const double compile = benchValue(r.out, "NVRTC to CUBIN + load, to a CUfunction");
    const double cached = benchValue(r.out, "compile cache read + check + load, to a CUfunction");
    const double fatbin = benchValue(r.out, "nvcc fatbin read + load, to a CUfunction");
    CHECK(compile > 0.0);
    CHECK(cached > 0.0);
    CHECK(fatbin > 0.0);
    // A compile runs the whole compiler; a cached load only reads and loads: the direction is
    // what is checked, no ratio.
    CHECK(cached < compile);
    CHECK(benchValue(r.out, "compile cache / NVRTC to CUBIN") < 1.0);
}

// ---------------------------------------------------------------------------
// GPU: the same driver behaviour, checked directly through the driver.

#if CUDA_VERSION >= 12000
TEST_CASE("A CUBIN loads as a library with no current context, and not as a module", "[gpu][lesson18]") {
    requireGpu();
    if (driver().driverVersion() < 12000) SKIP("cuLibraryLoadData needs a CUDA 12.0 driver");
    auto setCurrent = DRIVER_FUNCTION(driver(), cuCtxSetCurrent);
    auto loadLibrary = DRIVER_FUNCTION(driver(), cuLibraryLoadData);
    auto unloadLibrary = DRIVER_FUNCTION(driver(), cuLibraryUnload);
    auto getKernel = DRIVER_FUNCTION(driver(), cuLibraryGetKernel);
    auto loadModule = DRIVER_FUNCTION(driver(), cuModuleLoadData);
    REQUIRE((setCurrent && loadLibrary && unloadLibrary && getKernel && loadModule));
    const std::string fatbin = readText(buildDir() + "/" + kLesson + "/kernels/saxpy.fatbin");
    REQUIRE_FALSE(fatbin.empty());
    REQUIRE(setCurrent(nullptr) == CUDA_SUCCESS);
    CUmodule module = nullptr;
    CHECK(loadModule(&module, fatbin.data()) == CUDA_ERROR_INVALID_CONTEXT);
    CUlibrary library = nullptr;
    REQUIRE(loadLibrary(&library, fatbin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0) == CUDA_SUCCESS);
    Cleanup unload([&] { return unloadLibrary(library); });
    CUkernel kernel = nullptr;
    CHECK(getKernel(&kernel, library, "saxpy") == CUDA_SUCCESS);
    CHECK(unload.now() == CUDA_SUCCESS);
}
#endif
