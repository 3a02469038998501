// Lesson 18, program 3 of 3 — a compile cache on disk: compile once, load the CUBIN after that.
//
// On the H100 with CUDA 13.0 an NVRTC compile took tens of milliseconds, loading a CUBIN a
// fraction of one. So programs that compile at run time keep what they compiled: the CUBIN under a
// key made of everything its compile depends on, in the user's cache folder, written atomically,
// checked whenever it is read. The
// plain run shows one entry's life the same way whatever an earlier run left: evicted, a miss, a
// compile and a store; a hit that runs; then the entry damaged on purpose six ways (a byte
// flipped, cut short, no header, another key's entry, a symbolic link, writable by others), each
// time detected and rebuilt. --bench times four ways to get the same kernel.
//
//   compile_cache [--device N] [--bench]
#include <cuda.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// NVRTC to a CUBIN (or PTX) with the given options; exits with the log if it fails (the source is
// the lesson's own: a failed compile is a broken lesson, not something to time or cache).
std::string compileOrExit(const std::string& source, const std::vector<std::string>& options,
                          lesson18::Output output = lesson18::Output::Cubin) {
    const lesson18::Compiled compiled = lesson18::compileSource(source, "saxpy.cu", options, output);
    if (compiled.result != NVRTC_SUCCESS || compiled.image.empty()) {
        lesson18::printLog("program log", compiled.log);
        std::fprintf(stderr, "saxpy.cu did not compile: %s\n", nvrtcGetErrorString(compiled.result));
        std::exit(EXIT_FAILURE);
    }
    return compiled.image;
}

// Step 5: the ways an entry is damaged on purpose, what the lookup must then say, and the check.
enum class Damage { FlipByte, CutShort, NoHeader, OtherKey, SymbolicLink, OpenToOthers };

struct DamageCase {
    Damage damage;
    const char* what;
    lesson18::EntryState refusal;
    const char* check;
};

constexpr DamageCase kDamageCases[] = {
    {Damage::FlipByte, "one byte flipped", lesson18::EntryState::Corrupt, "a flipped byte is refused"},
    {Damage::CutShort, "cut in the middle", lesson18::EntryState::WrongSize, "a cut entry is refused"},
    {Damage::NoHeader, "a file without the header", lesson18::EntryState::NotAnEntry,
     "a file without the header is refused"},
    {Damage::OtherKey, "another key's entry under this name", lesson18::EntryState::OtherKey,
     "an entry stored under another key is refused"},
    {Damage::SymbolicLink, "a symbolic link to a whole entry", lesson18::EntryState::NotAFile,
     "a symbolic link is refused"},
    {Damage::OpenToOthers, "writable by group and others", lesson18::EntryState::NotPrivate,
     "an entry others may write to is refused"},
};

// The file a symbolic link points to in step 5: a copy of the whole entry, beside it.
constexpr const char* kLinkTarget = "demo-link-target";

// Writes the bytes over the file, then gives it `mode` (fchmod: the umask does not apply).
// O_NOFOLLOW: should a symbolic link stand in the entry's place (readEntry says who could put one
// there), the damage is refused rather than done to the file it points to.
void writeFileAsIs(const std::string& path, const std::string& bytes, mode_t mode = 0600) {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || !lesson18::writeAll(fd, bytes) || fchmod(fd, mode) != 0) std::perror("damage");
    if (fd >= 0) close(fd);
}

// Step 5: damages the entry one way. The entry is whole when this starts.
void damage(Damage how, const std::string& folder, const std::string& entry, std::uint64_t key,
            const std::string& cubin) {
    std::string file = course::readFile(entry).value_or("");
    const bool hasCubin = file.size() > lesson18::kHeaderBytes;  // else no CUBIN to flip or cut
    const std::size_t middle = hasCubin ? lesson18::kHeaderBytes + (file.size() - lesson18::kHeaderBytes) / 2 : 0;
    switch (how) {
        case Damage::FlipByte:
            if (hasCubin) file[middle] = static_cast<char>(~file[middle]);
            writeFileAsIs(entry, file);
            break;
        case Damage::CutShort:
            if (hasCubin) file.resize(middle);
            writeFileAsIs(entry, file);
            break;
        case Damage::NoHeader:  // as long as a header, so that only the magic tells it apart
            writeFileAsIs(entry, std::string(2 * lesson18::kHeaderBytes, '#'));
            break;
        case Damage::OtherKey:  // a whole entry of another key, renamed to this key's name
            lesson18::writeEntry(folder, key + 1, cubin);
            std::rename((folder + "/" + lesson18::entryName(key + 1)).c_str(), entry.c_str());
            break;
        case Damage::SymbolicLink:  // the entry's own bytes, reached through a link
            writeFileAsIs(folder + "/" + kLinkTarget, file);
            unlink(entry.c_str());
            if (symlink(kLinkTarget, entry.c_str()) != 0) std::perror("symlink");
            break;
        case Damage::OpenToOthers:  // the entry's own bytes, with write permission for all (0666)
            writeFileAsIs(entry, file, 0666);
            break;
    }
}

// Steps 3 to 6 damage the entry on purpose and time it. Another run of this program at the same
// time (make sanitize with SANITIZE_JOBS, two test runs) would see that damage, or evict the entry
// under this one: an exclusive flock on a file in the folder makes such runs take turns. Closing
// the descriptor releases it. An application's cache needs no lock: its readers check every entry
// and its writers rename whole files. Only a demo that breaks entries does. -1 (errno set): no
// lock, and the program stops rather than damage entries another run may be using.
int lockDemo(const std::string& folder) {
    const int fd = open((folder + "/demo.lock").c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        const int error = errno;
        close(fd);
        errno = error;
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
// The compiles get the options of the cached CUBIN (--no-cache among them where NVRTC has it).
void bench(const std::string& source, const std::vector<std::string>& ptxOptions,
           const std::vector<std::string>& cubinOptions, const std::string& entry, std::uint64_t key) {
    std::vector<double> ptx, cubin, cached, prebuilt;
    CUresult ptxRefused = CUDA_SUCCESS;
    for (int round = 0; round < 5; ++round) {
        Clock::time_point start = Clock::now();
        const std::string ptxText =
            compileOrExit(source, ptxOptions, lesson18::Output::Ptx);  // NVRTC failing ends here
        CUmodule module = nullptr;
        const CUresult jitted = cuModuleLoadData(&module, ptxText.c_str());
        if (jitted != CUDA_SUCCESS && lesson18::ptxRefusal(jitted) == nullptr) CHECK_DRIVER(jitted);
        if (jitted == CUDA_SUCCESS) CHECK_DRIVER(cuModuleUnload(module));
        if (jitted == CUDA_SUCCESS) ptx.push_back(millisecondsSince(start));
        if (jitted != CUDA_SUCCESS) ptxRefused = jitted;
        start = Clock::now();
        const std::string image = compileOrExit(source, cubinOptions);
        cubin.push_back(loadMilliseconds(image.data(), start));
        start = Clock::now();
        const lesson18::Lookup lookup = lesson18::readEntry(entry, key);
        if (lookup.state == lesson18::EntryState::Hit) cached.push_back(loadMilliseconds(lookup.cubin.data(), start));
        start = Clock::now();
        const std::optional<std::string> file = course::readFile(course::kernelPath("saxpy.fatbin"));
        if (file) prebuilt.push_back(loadMilliseconds(file->data(), start));
    }
    std::printf("bench rounds: 5 of each, medians; CUDA_MODULE_LOADING=%s, CUDA_CACHE_DISABLE=%s\n",
                std::getenv("CUDA_MODULE_LOADING"), std::getenv("CUDA_CACHE_DISABLE"));
    if (ptx.size() == 5)
        std::printf("bench: NVRTC to PTX + driver JIT, to a CUfunction = %.3f ms\n", course::median(ptx));
    else  // NVRTC compiled the PTX (compileOrExit); the driver refused it, cuda.h says why
        std::printf("section PTX: SKIP (%s: %s)\n", course::driverErrorName(ptxRefused),
                    lesson18::ptxRefusal(ptxRefused));
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

// Joins options with spaces, for printing only: the key takes them one by one.
std::string joined(const std::vector<std::string>& options) {
    std::string line;
    for (const std::string& option : options) line += (line.empty() ? "" : " ") + option;
    return line;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const std::optional<std::string> source = lesson18::readKernelSource();
    if (!source) return EXIT_FAILURE;

    // Step 1: the cache folder first, before any driver call: a folder that another user owns or
    // may write to is refused whatever the GPU. Then two variables of the driver, set before its
    // first call (cuInit). cuda.h names CUDA_MODULE_LOADING only; both, and what they do, are in the
    // CUDA C++ Programming Guide's list of environment variables: CUDA_CACHE_DISABLE=1 turns the
    // JIT cache off, so that a PTX load here really compiles (set unless it is already 1), and
    // --bench loads eagerly, so that a timed load does all of its work. NVRTC's own cache goes off
    // through an option (rtc_helpers.h).
    course::printStep(1, "the cache folder, the GPU, the compiler");
    const std::optional<lesson18::CacheFolder> folder =
        lesson18::cacheFolder(std::getenv("XDG_CACHE_HOME"), std::getenv("HOME"));
    if (!folder) {
        std::printf("Result = SKIP (neither XDG_CACHE_HOME nor HOME is an absolute path)\n");
        return course::kExitNotApplicable;
    }
    std::printf("cache folder: %s\n", folder->shown.c_str());
    std::string cachePath;  // the folder's path with the base's symbolic links resolved, used for every open
    const lesson18::FolderState folderState = lesson18::makePrivateFolders(*folder, &cachePath);
    std::printf("cache folder state: %s\n", lesson18::describe(folderState));
    if (folderState != lesson18::FolderState::Private) {
        const std::string base =
            folder->shown.substr(0, folder->shown.size() - std::strlen(lesson18::kCourseSubfolder) - 1);
        std::printf("Result = SKIP (the cache folder is refused: a folder of its path, from %s down, is %s)\n",
                    base.c_str(), lesson18::describe(folderState));
        return course::kExitNotApplicable;
    }
    const char* cacheDisable = std::getenv("CUDA_CACHE_DISABLE");
    const bool chosenByUser = cacheDisable != nullptr && std::strcmp(cacheDisable, "1") == 0;
    if (!chosenByUser) setenv("CUDA_CACHE_DISABLE", "1", 1);  // also over another value, such as 0
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
    const std::optional<lesson18::FileIdentity> nvrtcLibrary = lesson18::nvrtcLibraryFile();
    const char* why = nullptr;
    if (!target->cubinRuns)
        why = "this NVRTC makes no SASS this GPU runs";
    else if (!nvrtcLibrary)
        why = "the NVRTC library file cannot be found: the key could not tell its builds apart";
    if (why != nullptr) {
        std::printf("Result = SKIP (%s)\n", why);
        return course::kExitNotApplicable;
    }
    const bool noCache = lesson18::nvrtcHasNoCacheOption();
    std::printf("NVRTC's own cache: %s\n",
                noCache ? "off (--no-cache)" : "not turned off (this NVRTC or its headers have no --no-cache)");
    std::vector<std::string> cubinOptions{target->cubinOption()};
    std::vector<std::string> ptxOptions{target->ptxOption()};
    if (noCache) {
        cubinOptions.push_back("--no-cache");
        ptxOptions.push_back("--no-cache");
    }
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    course::Verdict verdict;

    // Step 2: the key. A change to any input must miss, so each one changes it; and the same bytes
    // cut into fields or options another way must not give the same key.
    course::printStep(2, "the key: the source, the options, the architecture, NVRTC's version and library");
    const lesson18::KeyInputs inputs{*source, cubinOptions, target->arch, lesson18::nvrtcVersionNumber(),
                                     *nvrtcLibrary};
    const std::uint64_t key = lesson18::cacheKey(inputs);
    const std::string libraryName = inputs.nvrtcLibrary.path.substr(inputs.nvrtcLibrary.path.rfind('/') + 1);
    std::printf("source: kernels/saxpy.cu, %zu bytes\n", source->size());
    std::printf("options: %s\n", joined(inputs.options).c_str());
    std::printf("architecture: sm_%d, nvrtcVersion: %d\n", inputs.arch, inputs.nvrtcVersion);
    std::printf("NVRTC library (keyed by path, size and modification time): %s, %llu bytes\n", libraryName.c_str(),
                static_cast<unsigned long long>(inputs.nvrtcLibrary.bytes));
    // dladdr named the file that holds nvrtcVersion: NVRTC's own library, whatever its version suffix.
    verdict.check("the keyed library file is libnvrtc", libraryName.rfind("libnvrtc", 0) == 0);
    std::printf("key (FNV-1a, 64 bits): %s\n", lesson18::hex64(key).c_str());
    lesson18::KeyInputs changed[7] = {inputs, inputs, inputs, inputs, inputs, inputs, inputs};
    changed[0].source += "\n";
    changed[1].options.push_back("-lineinfo");
    changed[2].arch += 1;
    changed[3].nvrtcVersion += 10;
    changed[4].nvrtcLibrary.path += ".1";
    changed[5].nvrtcLibrary.bytes += 1;
    changed[6].nvrtcLibrary.modifiedNanoseconds += 1;
    bool allDiffer = true;
    for (const lesson18::KeyInputs& other : changed) allDiffer = allDiffer && lesson18::cacheKey(other) != key;
    verdict.check("a change to any input changes the key", allDiffer);
    // The source's last byte moved to the front of the first option: the same bytes, cut elsewhere.
    lesson18::KeyInputs moved = inputs;
    moved.options.front().insert(0, 1, moved.source.back());
    moved.source.pop_back();
    // One more option, or the same text appended to the last option: "-lineinfo" apart or joined.
    lesson18::KeyInputs joinedOption = inputs;
    joinedOption.options.back() += " -lineinfo";
    verdict.check(
        "the key keeps fields and options apart",
        lesson18::cacheKey(moved) != key && lesson18::cacheKey(joinedOption) != lesson18::cacheKey(changed[1]));

    // Step 3: the entry's life starts the same way every run: removed first, under the lock.
    course::printStep(3, "lock, evict, miss, compile, store (a temporary file, then rename)");
    const std::string entry = cachePath + "/" + lesson18::entryName(key);
    std::printf("entry: %s\n", lesson18::entryName(key).c_str());
    const int demoLock = lockDemo(cachePath);
    if (demoLock < 0) {  // without the lock, this run could break another run's entry: stop here
        std::printf("demo lock (demo.lock, other runs of this program wait): not held (%s)\n", std::strerror(errno));
        CHECK_DRIVER(cuCtxSetCurrent(nullptr));
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
        std::printf("Result = SKIP (the demo lock cannot be taken, and step 3 on damages entries)\n");
        return course::kExitNotApplicable;
    }
    std::printf("demo lock (demo.lock, other runs of this program wait): held\n");
    const bool evicted = lesson18::removeEntry(entry);
    std::printf("evicted: %s\n", evicted ? "whatever an earlier run left under this key" : "FAILED");
    lesson18::Lookup lookup = lesson18::readEntry(entry, key);
    std::printf("lookup: %s\n", lesson18::describe(lookup.state));
    verdict.check("after eviction the lookup finds no entry",
                  evicted && lookup.state == lesson18::EntryState::Missing && !lesson18::fileExists(entry));
    Clock::time_point start = Clock::now();
    const std::string cubin = compileOrExit(*source, cubinOptions);
    std::printf("NVRTC compile to CUBIN: %.1f ms, %zu bytes\n", millisecondsSince(start), cubin.size());
    const lesson18::Stored stored = lesson18::writeEntry(cachePath, key, cubin);
    std::printf("stored: %zu bytes (header %zu + CUBIN), written as %s.tmp.XXXXXX, renamed\n",
                lesson18::kHeaderBytes + cubin.size(), lesson18::kHeaderBytes, lesson18::entryName(key).c_str());
    // Printed, not checked: whether the bytes reached the disk cannot be seen from here. fsync's
    // results are what is printed; the store fails if the file's fsync fails.
    std::printf("file synced before the rename: %s\n", stored.fileSynced ? "yes" : "no");
    std::printf("folder synced after the rename: %s\n",
                stored.folderSynced ? "yes" : "no (a crash may lose the entry)");
    verdict.check(
        "the entry was renamed into place",
        stored.ok && lesson18::fileExists(entry) && !lesson18::fileExists(cachePath + "/" + stored.temporaryName));

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
    for (const DamageCase& damageCase : kDamageCases) {
        damage(damageCase.damage, cachePath, entry, key, cubin);
        lookup = lesson18::readEntry(entry, key);
        unlink((cachePath + "/" + kLinkTarget).c_str());  // only the symbolic link's case made it
        std::printf("%s: %s\n", damageCase.what, lesson18::describe(lookup.state));
        verdict.check(damageCase.check, lookup.state == damageCase.refusal);
        const bool rebuilt = lesson18::writeEntry(cachePath, key, compileOrExit(*source, cubinOptions)).ok;
        lookup = lesson18::readEntry(entry, key);
        std::printf("rebuilt, lookup: %s\n", lesson18::describe(lookup.state));
        verdict.check("the rebuilt entry hits", rebuilt && lookup.state == lesson18::EntryState::Hit);
    }

    course::printStep(6, "benchmarks");
    if (args.has("--bench"))
        bench(*source, ptxOptions, cubinOptions, entry, key);
    else
        std::printf("benchmarks: not run (add --bench)\n");

    course::printStep(7, "release everything, newest first");
    if (module != nullptr) CHECK_DRIVER(cuModuleUnload(module));
    close(demoLock);
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: the module, the demo lock, the primary context (the entry stays for the next run)\n");
    return verdict.finish();
}
