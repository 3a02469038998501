// Lesson 18, program 3 of 3 — a compile cache on disk: compile once, load the CUBIN after that.
//
// An NVRTC compile takes tens of milliseconds; loading a CUBIN a fraction of one. So programs
// that compile at run time keep what they compiled: the CUBIN under a key made of everything it
// depends on, in the user's cache folder, written atomically, checked whenever it is read. The
// plain run shows one entry's life the same way whatever an earlier run left: evicted, a miss, a
// compile and a store; a hit that runs; then the entry damaged on purpose (one byte flipped, then
// cut short), each time detected and rebuilt. --bench times four ways to get the same kernel.
//
//   compile_cache [--device N] [--bench]
#include <cuda.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "kernel_cache.h"
#include "rtc_helpers.h"

namespace {

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// NVRTC to a CUBIN; exits with the log if it fails (the source is the lesson's own).
std::string compileCubin(const std::string& source, const std::string& option) {
    const lesson18::Compiled compiled = lesson18::compileSource(source, "saxpy.cu", {option}, lesson18::Output::Cubin);
    if (compiled.result != NVRTC_SUCCESS || compiled.image.empty()) {
        lesson18::printLog("program log", compiled.log);
        std::fprintf(stderr, "saxpy.cu did not compile: %s\n", nvrtcGetErrorString(compiled.result));
        std::exit(EXIT_FAILURE);
    }
    return compiled.image;
}

// Step 5: damages the entry's CUBIN (flips one byte in its middle, or cuts the file there).
void damage(const std::string& path, bool truncate) {
    std::string file = course::readFile(path).value_or("");
    if (file.size() <= lesson18::kHeaderBytes) return;  // no CUBIN to damage: the lookup refuses it anyway
    const std::size_t middle = lesson18::kHeaderBytes + (file.size() - lesson18::kHeaderBytes) / 2;
    if (truncate)
        file.resize(middle);
    else
        file[middle] = static_cast<char>(~file[middle]);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << file;
}

// Steps 3 to 6 damage the entry on purpose and time it. Another run of this program at the same
// time (make sanitize with SANITIZE_JOBS, two test runs) would see that damage, or evict the entry
// under this one: an exclusive flock on a file in the folder makes such runs take turns. Closing
// the descriptor releases it. An application's cache needs no lock: its readers check every entry
// and its writers rename whole files. Only a demo that breaks entries does. -1: no lock.
int lockDemo(const std::string& folder) {
    const int fd = open((folder + "/demo.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// A module made from an image, its saxpy fetched, unloaded: one way to get a kernel, timed.
double loadMilliseconds(const void* image, Clock::time_point start) {
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoadData(&module, image));
    CUfunction saxpy = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&saxpy, module, "saxpy"));
    const double milliseconds = millisecondsSince(start);
    CHECK_DRIVER(cuModuleUnload(module));
    return milliseconds;
}

// Step 6 (--bench): medians of 5, each from the source or file to a CUfunction: NVRTC to PTX and
// the driver's JIT; NVRTC to a CUBIN; the cache (read, check, load); nvcc's fatbin (read, load).
void bench(const std::string& source, const lesson18::Target& target, const std::string& entry, std::uint64_t key) {
    std::vector<double> ptx, cubin, cached, prebuilt;
    for (int round = 0; round < 5; ++round) {
        Clock::time_point start = Clock::now();
        const lesson18::Compiled compiled =
            lesson18::compileSource(source, "saxpy.cu", {target.ptxOption()}, lesson18::Output::Ptx);
        CUmodule module = nullptr;
        const CUresult jitted = cuModuleLoadData(&module, compiled.image.c_str());
        if (jitted == CUDA_SUCCESS) CHECK_DRIVER(cuModuleUnload(module));
        if (jitted == CUDA_SUCCESS) ptx.push_back(millisecondsSince(start));
        start = Clock::now();
        const std::string image = compileCubin(source, target.cubinOption());
        cubin.push_back(loadMilliseconds(image.data(), start));
        start = Clock::now();
        const lesson18::Lookup lookup = lesson18::readEntry(entry, key);
        if (lookup.state == lesson18::EntryState::Hit) cached.push_back(loadMilliseconds(lookup.cubin.data(), start));
        start = Clock::now();
        const std::optional<std::string> file = course::readFile(course::kernelPath("saxpy.fatbin"));
        if (file) prebuilt.push_back(loadMilliseconds(file->data(), start));
    }
    std::printf("bench rounds: 5 of each, medians; CUDA_MODULE_LOADING=EAGER, the driver's JIT cache off\n");
    if (ptx.size() == 5)
        std::printf("bench: NVRTC to PTX + driver JIT, to a CUfunction = %.3f ms\n", course::median(ptx));
    else
        std::printf("section PTX: SKIP (the driver refused the PTX: CUDA_DISABLE_PTX_JIT, or an older driver)\n");
    std::printf("bench: NVRTC to CUBIN + load, to a CUfunction = %.3f ms\n", course::median(cubin));
    if (cached.size() == 5) {
        std::printf("bench: compile cache read + check + load, to a CUfunction = %.3f ms\n", course::median(cached));
        std::printf("bench: compile cache / NVRTC to CUBIN = %.4f x\n", course::median(cached) / course::median(cubin));
    }
    if (prebuilt.size() == 5)
        std::printf("bench: nvcc fatbin read + load, to a CUfunction = %.3f ms\n", course::median(prebuilt));
    else
        std::printf("section fatbin: SKIP (kernels/saxpy.fatbin not found next to the program)\n");
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const std::optional<std::string> source = lesson18::readKernelSource();
    if (!source) return EXIT_FAILURE;

    // Step 1: the driver reads these in cuInit. Its JIT cache goes off unless the user chose, so
    // that a PTX load here really compiles (NVRTC 13.0 also lists a --no-cache option, "Disable the
    // use of cache for both ptx and cubin code generation": a compile may be answered from a cache
    // too). --bench loads eagerly, so that a timed load does all of its work.
    course::printStep(1, "the GPU, the compiler, the cache folder");
    const bool chosenByUser = std::getenv("CUDA_CACHE_DISABLE") != nullptr;
    if (!chosenByUser) setenv("CUDA_CACHE_DISABLE", "1", 1);
    if (args.has("--bench")) setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    std::printf("CUDA_CACHE_DISABLE chosen by: %s\n", chosenByUser ? "the environment" : "this program");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", args.deviceOrdinal(), name);
    std::printf("driver supports CUDA: %s\n", course::formatCudaVersion(driverVersion).c_str());
    const std::optional<lesson18::Target> target = lesson18::chooseTarget(device);
    if (!target) return course::kExitNotApplicable;
    const std::optional<lesson18::CacheFolder> folder =
        lesson18::cacheFolder(std::getenv("XDG_CACHE_HOME"), std::getenv("HOME"));
    std::string why = !target->cubinRuns                     ? "this NVRTC makes no SASS this GPU runs"
                      : !folder                              ? "neither XDG_CACHE_HOME nor HOME is an absolute path"
                      : !lesson18::makeFolders(folder->path) ? "the cache folder cannot be created"
                                                             : "";
    if (!why.empty()) {
        std::printf("Result = SKIP (%s)\n", why.c_str());
        return course::kExitNotApplicable;
    }
    std::printf("cache folder: %s\n", folder->shown.c_str());
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    course::Verdict verdict;

    // Step 2: the key. A change to any input must miss, so each one changes it.
    course::printStep(2, "the key: the source, the options, the architecture, NVRTC, the driver");
    const lesson18::KeyInputs inputs{*source, target->cubinOption(), target->arch, lesson18::nvrtcVersionNumber(),
                                     driverVersion};
    const std::uint64_t key = lesson18::cacheKey(inputs);
    std::printf("source: kernels/saxpy.cu, %zu bytes\n", source->size());
    std::printf("options: %s\n", inputs.options.c_str());
    std::printf("architecture: sm_%d, NVRTC: %d, driver: %d\n", inputs.arch, inputs.nvrtcVersion, inputs.driverVersion);
    std::printf("key (FNV-1a, 64 bits): %s\n", lesson18::hex64(key).c_str());
    lesson18::KeyInputs changed[5] = {inputs, inputs, inputs, inputs, inputs};
    changed[0].source += "\n";
    changed[1].options += " -lineinfo";
    changed[2].arch += 1;
    changed[3].nvrtcVersion += 10;
    changed[4].driverVersion += 10;
    bool allDiffer = true;
    for (const lesson18::KeyInputs& other : changed) allDiffer = allDiffer && lesson18::cacheKey(other) != key;
    verdict.check("a change to any input changes the key", allDiffer);

    // Step 3: the entry's life starts the same way every run: removed first.
    course::printStep(3, "evict, miss, compile, store (a temporary file, then rename)");
    const std::string entry = folder->path + "/" + lesson18::entryName(key);
    std::printf("entry: %s\n", lesson18::entryName(key).c_str());
    const int demoLock = lockDemo(folder->path);
    std::printf("demo lock (demo.lock, other runs of this program wait): %s\n", demoLock >= 0 ? "held" : "not held");
    const bool evicted = lesson18::removeEntry(entry);
    std::printf("evicted: %s\n", evicted ? "whatever an earlier run left under this key" : "FAILED");
    lesson18::Lookup lookup = lesson18::readEntry(entry, key);
    std::printf("lookup: %s\n", lesson18::describe(lookup.state));
    verdict.check("after eviction the lookup finds no entry",
                  evicted && lookup.state == lesson18::EntryState::Missing && !lesson18::fileExists(entry));
    Clock::time_point start = Clock::now();
    const std::string cubin = compileCubin(*source, target->cubinOption());
    std::printf("NVRTC compile to CUBIN: %.1f ms, %zu bytes\n", millisecondsSince(start), cubin.size());
    const lesson18::Stored stored = lesson18::writeEntry(folder->path, key, cubin);
    std::printf("stored: %zu bytes (header %zu + CUBIN), written as %s.tmp.XXXXXX, renamed\n",
                lesson18::kHeaderBytes + cubin.size(), lesson18::kHeaderBytes, lesson18::entryName(key).c_str());
    verdict.check(
        "the entry was renamed into place",
        stored.ok && lesson18::fileExists(entry) && !lesson18::fileExists(folder->path + "/" + stored.temporaryName));

    // Step 4: what a second run of an application would do: look up, load, run.
    course::printStep(4, "hit, load, run");
    start = Clock::now();
    lookup = lesson18::readEntry(entry, key);
    CUmodule module = nullptr;
    if (lookup.state == lesson18::EntryState::Hit) CHECK_DRIVER(cuModuleLoadData(&module, lookup.cubin.data()));
    std::printf("lookup: %s\n", lesson18::describe(lookup.state));
    std::printf("lookup + cuModuleLoadData: %.3f ms\n", millisecondsSince(start));
    verdict.check("the second lookup hits with the stored CUBIN", module != nullptr && lookup.cubin == cubin);
    if (module != nullptr) {
        CUfunction saxpy = nullptr;
        CHECK_DRIVER(cuModuleGetFunction(&saxpy, module, "saxpy"));
        verdict.check("the cached CUBIN computes saxpy exactly", lesson18::saxpyExact(saxpy));
    }

    // Step 5: a damaged entry must never be loaded: the lookup refuses it, the program rebuilds it.
    course::printStep(5, "a damaged entry is detected and rebuilt");
    for (const bool truncate : {false, true}) {
        damage(entry, truncate);
        lookup = lesson18::readEntry(entry, key);
        std::printf("%s: %s\n", truncate ? "cut in the middle" : "one byte flipped", lesson18::describe(lookup.state));
        verdict.check(truncate ? "a cut entry is refused" : "a flipped byte is refused",
                      lookup.state == (truncate ? lesson18::EntryState::WrongSize : lesson18::EntryState::Corrupt));
        const bool rebuilt = lesson18::writeEntry(folder->path, key, compileCubin(*source, target->cubinOption())).ok;
        lookup = lesson18::readEntry(entry, key);
        std::printf("rebuilt, lookup: %s\n", lesson18::describe(lookup.state));
        verdict.check("the rebuilt entry hits", rebuilt && lookup.state == lesson18::EntryState::Hit);
    }

    course::printStep(6, "benchmarks");
    if (args.has("--bench"))
        bench(*source, *target, entry, key);
    else
        std::printf("benchmarks: not run (add --bench)\n");

    course::printStep(7, "release everything, newest first");
    if (module != nullptr) CHECK_DRIVER(cuModuleUnload(module));
    if (demoLock >= 0) close(demoLock);
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: the module, the demo lock, the primary context (the entry stays for the next run)\n");
    return verdict.finish();
}
