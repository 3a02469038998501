#include <cuda.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
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
                                   "a file without the header: ", "another key's entry under this name: ",
                                   "a symbolic link to a whole entry: ", "writable by group and others: ",
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
    const lesson18::FileIdentity library{"/usr/local/cuda/lib64/libnvrtc.so.13", 109338064, 1760564160000000000};
    const lesson18::KeyInputs base{"source", {"--gpu-architecture=sm_90"}, 90, 13000, library};
    const std::uint64_t key = lesson18::cacheKey(base);
    CHECK(lesson18::cacheKey(base) == key);  // a function of its inputs only
    lesson18::KeyInputs changed = base;
    changed.source = "source ";
    CHECK(lesson18::cacheKey(changed) != key);
    changed = base;
    changed.options.push_back("-lineinfo");
    CHECK(lesson18::cacheKey(changed) != key);
    changed = base;
    changed.arch = 89;
    CHECK(lesson18::cacheKey(changed) != key);
    changed = base;
    changed.nvrtcVersion = 12080;
    CHECK(lesson18::cacheKey(changed) != key);
    // A patch release of NVRTC keeps nvrtcVersion: the library file tells it apart.
    changed = base;
    changed.nvrtcLibrary.path = "/opt/cuda-13.0.2/lib64/libnvrtc.so.13";
    CHECK(lesson18::cacheKey(changed) != key);
    changed = base;
    changed.nvrtcLibrary.bytes += 1;
    CHECK(lesson18::cacheKey(changed) != key);
    changed = base;
    changed.nvrtcLibrary.modifiedNanoseconds += 1;
    CHECK(lesson18::cacheKey(changed) != key);
    // The same bytes split differently between source and options.
    const lesson18::KeyInputs left{"ab", {"c"}, 90, 13000, library};
    const lesson18::KeyInputs right{"a", {"bc"}, 90, 13000, library};
    CHECK(lesson18::cacheKey(left) != lesson18::cacheKey(right));
    // Options joined with spaces would make these two the same text.
    const lesson18::KeyInputs oneOption{"source", {"-DA=1 -DB"}, 90, 13000, library};
    const lesson18::KeyInputs twoOptions{"source", {"-DA=1", "-DB"}, 90, 13000, library};
    CHECK(lesson18::cacheKey(oneOption) != lesson18::cacheKey(twoOptions));
    // And the same bytes split differently between two options.
    const lesson18::KeyInputs splitEarly{"source", {"-DA", "=1"}, 90, 13000, library};
    const lesson18::KeyInputs splitLate{"source", {"-DA=", "1"}, 90, 13000, library};
    CHECK(lesson18::cacheKey(splitEarly) != lesson18::cacheKey(splitLate));
}

TEST_CASE("Lesson 18's key names a file by its resolved path, size and modification time", "[cpu][lesson18]") {
    TemporaryFolder temporary;
    const std::filesystem::path file = temporary.path / "libnvrtc.so.13.0.1";
    writeText(file, "twelve bytes");
    std::filesystem::create_symlink(file.filename(), temporary.path / "libnvrtc.so.13");
    const std::optional<lesson18::FileIdentity> identity =
        lesson18::fileIdentity((temporary.path / "libnvrtc.so.13").string());
    REQUIRE(identity);
    CHECK(identity->path == std::filesystem::canonical(file).string());  // the link resolved
    CHECK(identity->bytes == 12);
    struct stat info {};
    REQUIRE(stat(file.c_str(), &info) == 0);
    CHECK(identity->modifiedNanoseconds ==
          static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec);
    CHECK_FALSE(lesson18::fileIdentity((temporary.path / "missing").string()));
}

TEST_CASE("Lesson 18's cache lives under an absolute XDG_CACHE_HOME, else under HOME/.cache", "[cpu][lesson18]") {
    const std::string sub = lesson18::kCourseSubfolder;
    auto xdg = lesson18::cacheFolder("/x/cache", "/home/u");
    REQUIRE(xdg);
    CHECK(xdg->base == "/x/cache");
    CHECK(xdg->path == "/x/cache/" + sub);
    CHECK(xdg->shown == "$XDG_CACHE_HOME/" + sub);
    for (const char* ignored : {"", "relative/cache"}) {
        INFO("XDG_CACHE_HOME=" << ignored);
        auto home = lesson18::cacheFolder(ignored, "/home/u");
        REQUIRE(home);
        CHECK(home->base == "/home/u/.cache");
        CHECK(home->path == "/home/u/.cache/" + sub);
        CHECK(home->shown == "$HOME/.cache/" + sub);
    }
    auto unset = lesson18::cacheFolder(nullptr, "/home/u");
    REQUIRE(unset);
    CHECK(unset->path == "/home/u/.cache/" + sub);
    CHECK_FALSE(lesson18::cacheFolder(nullptr, nullptr));
    CHECK_FALSE(lesson18::cacheFolder(nullptr, ""));
}

TEST_CASE("Lesson 18's cache folders are made private, and refused where another user could write", "[cpu][lesson18]") {
    TemporaryFolder temporary;
    const std::string base = (temporary.path / "cache").string();
    const lesson18::CacheFolder folder{base, base + "/" + lesson18::kCourseSubfolder, "$XDG_CACHE_HOME/..."};
    const std::string course = base + "/cuda-driver-api-course";
    REQUIRE(lesson18::makePrivateFolders(folder) == lesson18::FolderState::Private);
    struct stat info {};
    for (const std::string& made : {base, course, folder.path}) {
        INFO(made);
        REQUIRE(lstat(made.c_str(), &info) == 0);
        CHECK((info.st_mode & 0777) == 0700);
    }
    // Again, with everything there: the same answer.
    CHECK(lesson18::makePrivateFolders(folder) == lesson18::FolderState::Private);
    // The base may be read by others (~/.cache often is 0755), never written.
    REQUIRE(chmod(base.c_str(), 0755) == 0);
    CHECK(lesson18::makePrivateFolders(folder) == lesson18::FolderState::Private);
    REQUIRE(chmod(base.c_str(), 0777) == 0);
    CHECK(lesson18::makePrivateFolders(folder) == lesson18::FolderState::OpenToOthers);
    REQUIRE(chmod(base.c_str(), 0700) == 0);
    // The course's own folders are closed to group and others entirely.
    for (const std::string& opened : {course, folder.path}) {
        for (const mode_t mode : {0750, 0705, 0770}) {
            INFO(opened << " mode " << std::oct << mode);
            REQUIRE(chmod(opened.c_str(), mode) == 0);
            CHECK(lesson18::makePrivateFolders(folder) == lesson18::FolderState::OpenToOthers);
            REQUIRE(chmod(opened.c_str(), 0700) == 0);
        }
    }
    CHECK(lesson18::makePrivateFolders(folder) == lesson18::FolderState::Private);
    // The base may be a symbolic link: resolved once, the folder it leads to is checked, and the
    // path every later open uses starts from it, not from the link.
    const std::string linkedBase = (temporary.path / "linked-cache").string();
    REQUIRE(symlink(base.c_str(), linkedBase.c_str()) == 0);
    std::string resolved;
    CHECK(lesson18::makePrivateFolders({linkedBase, linkedBase + "/" + lesson18::kCourseSubfolder, ""}, &resolved) ==
          lesson18::FolderState::Private);
    CHECK(resolved == std::filesystem::canonical(folder.path).string());
    REQUIRE(chmod(base.c_str(), 0777) == 0);  // the folder the link leads to is the one judged
    CHECK(lesson18::makePrivateFolders({linkedBase, linkedBase + "/" + lesson18::kCourseSubfolder, ""}) ==
          lesson18::FolderState::OpenToOthers);
    REQUIRE(chmod(base.c_str(), 0700) == 0);
    REQUIRE(unlink(linkedBase.c_str()) == 0);
    // A symbolic link in place of the cache folder is refused, even to a private folder.
    const std::string elsewhere = (temporary.path / "elsewhere").string();
    REQUIRE(rename(folder.path.c_str(), elsewhere.c_str()) == 0);
    REQUIRE(symlink(elsewhere.c_str(), folder.path.c_str()) == 0);
    CHECK(lesson18::makePrivateFolders(folder) == lesson18::FolderState::NotAFolder);
    REQUIRE(unlink(folder.path.c_str()) == 0);
    // So is a file there.
    writeText(folder.path, "not a folder");
    CHECK(lesson18::makePrivateFolders(folder) == lesson18::FolderState::NotAFolder);
    REQUIRE(unlink(folder.path.c_str()) == 0);
    CHECK(lesson18::makePrivateFolders(folder) == lesson18::FolderState::Private);
    // Another user's folder: judged from what lstat says, and for real where this test may chown.
    REQUIRE(lstat(folder.path.c_str(), &info) == 0);
    CHECK(lesson18::judgeFolder(info, geteuid() + 1, S_IRWXG | S_IRWXO) == lesson18::FolderState::OtherOwner);
    if (geteuid() == 0) {
        REQUIRE(chown(folder.path.c_str(), 65534, 65534) == 0);
        CHECK(lesson18::makePrivateFolders(folder) == lesson18::FolderState::OtherOwner);
        REQUIRE(chown(folder.path.c_str(), 0, 0) == 0);
    }
    // A file as the base is no folder; a base below a file cannot be made.
    writeText(temporary.path / "file", "");
    const std::string file = (temporary.path / "file").string();
    CHECK(lesson18::makePrivateFolders({file, file + "/" + lesson18::kCourseSubfolder, ""}) ==
          lesson18::FolderState::NotAFolder);
    const std::string blocked = file + "/cache";
    CHECK(lesson18::makePrivateFolders({blocked, blocked + "/" + lesson18::kCourseSubfolder, ""}) ==
          lesson18::FolderState::CannotCreate);
}

TEST_CASE("Lesson 18 compile_cache refuses a cache folder open to others before any driver call", "[cpu][lesson18]") {
    TemporaryFolder cache;
    RunOptions options;
    options.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();
    options.setEnv["XDG_CACHE_HOME"] = cache.path.string();
    // A private folder passes: the program goes on to cuInit, which the stub refuses.
    RunResult r = runLesson(kLesson, options, "compile_cache");
    attachToReport(r);
    CHECK(valueOf(r.out, "cache folder state") == "private (this user's, no other user can write to it)");
    CHECK(contains(r.err, "CUDA_ERROR_STUB_LIBRARY"));
    const std::filesystem::path folder = cache.path / lesson18::kCourseSubfolder;
    REQUIRE(chmod(folder.c_str(), 0755) == 0);
    r = runLesson(kLesson, options, "compile_cache");
    attachToReport(r);
    CHECK(r.exitCode == 77);
    CHECK(valueOf(r.out, "cache folder state") == "open to group or others");
    CHECK(contains(r.out, "Result = SKIP (the cache folder is refused"));
    CHECK_FALSE(contains(r.err, "CUDA_ERROR_STUB_LIBRARY"));  // refused before cuInit
    REQUIRE(chmod(folder.c_str(), 0700) == 0);
    std::filesystem::rename(folder, cache.path / "elsewhere");
    std::filesystem::create_directory_symlink(cache.path / "elsewhere", folder);
    r = runLesson(kLesson, options, "compile_cache");
    attachToReport(r);
    CHECK(r.exitCode == 77);
    CHECK(valueOf(r.out, "cache folder state") == "not a folder (a symbolic link or a file)");
}

TEST_CASE("Lesson 18 compile_cache turns the driver's JIT cache off unless CUDA_CACHE_DISABLE is already 1",
          "[cpu][lesson18]") {
    TemporaryFolder cache;
    RunOptions options;
    options.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();  // the line comes before cuInit, which the stub refuses
    options.setEnv["XDG_CACHE_HOME"] = cache.path.string();
    for (const auto& [value, chooser] : std::vector<std::pair<std::string, std::string>>{
             {"1", "the environment"}, {"0", "this program"}, {"", "this program"}}) {
        INFO("CUDA_CACHE_DISABLE=" << value);
        options.setEnv["CUDA_CACHE_DISABLE"] = value;
        const RunResult r = runLesson(kLesson, options, "compile_cache");
        attachToReport(r);
        CHECK(valueOf(r.out, "CUDA_CACHE_DISABLE chosen by") == chooser);
    }
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
    CHECK(stored.fileSynced);    // the file before the rename
    CHECK(stored.folderSynced);  // the folder after it
    CHECK(stored.durable);
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

    // A symbolic link is not followed, even to a whole entry of this key; a folder is no entry.
    REQUIRE(lesson18::writeEntry(folder, key, cubin).ok);
    const std::string target = (temporary.path / "target.cubin").string();
    REQUIRE(rename(path.c_str(), target.c_str()) == 0);
    CHECK(lesson18::readEntry(target, key).state == lesson18::EntryState::Hit);
    REQUIRE(symlink(target.c_str(), path.c_str()) == 0);
    CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::NotAFile);
    CHECK(lesson18::fileExists(path));  // the name is there, as a link
    // A store replaces the link itself, not the file it points to.
    REQUIRE(lesson18::writeEntry(folder, key, cubin).ok);
    REQUIRE(lstat(path.c_str(), &info) == 0);
    CHECK(S_ISREG(info.st_mode));
    CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::Hit);
    REQUIRE(unlink(target.c_str()) == 0);
    REQUIRE(unlink(path.c_str()) == 0);
    REQUIRE(mkdir(path.c_str(), 0700) == 0);
    CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::NotAFile);
    REQUIRE(rmdir(path.c_str()) == 0);
    // Nor is a FIFO, and the lookup does not wait for a writer to open it (O_NONBLOCK). Should it
    // wait, a helper opens the FIFO for writing after 5 s to release it, and the time fails the test.
    REQUIRE(mkfifo(path.c_str(), 0600) == 0);
    std::mutex mutex;
    std::condition_variable doneChanged;
    bool done = false;
    std::thread rescuer([&] {
        std::unique_lock<std::mutex> lock(mutex);
        if (doneChanged.wait_for(lock, std::chrono::seconds(5), [&] { return done; })) return;
        const int writer =
            open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // succeeds only with a reader waiting
        if (writer >= 0) close(writer);
    });
    const auto start = std::chrono::steady_clock::now();
    const lesson18::EntryState fifoState = lesson18::readEntry(path, key).state;
    const auto waited = std::chrono::steady_clock::now() - start;
    {
        const std::lock_guard<std::mutex> lock(mutex);
        done = true;
    }
    doneChanged.notify_one();
    rescuer.join();
    CHECK(fifoState == lesson18::EntryState::NotAFile);
    CHECK(waited < std::chrono::seconds(2));
    REQUIRE(unlink(path.c_str()) == 0);

    // A store over a damaged entry replaces it; removing it leaves nothing, twice over.
    REQUIRE(lesson18::writeEntry(folder, key, cubin).ok);
    CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::Hit);
    CHECK(lesson18::removeEntry(path));
    CHECK_FALSE(lesson18::fileExists(path));
    CHECK(lesson18::removeEntry(path));
    // Nothing but the entries was ever left in the folder: every temporary file was renamed.
    CHECK(std::filesystem::is_empty(folder));
}

TEST_CASE("Lesson 18's lookup refuses an entry that is not this user's own, whatever folder it is found in",
          "[cpu][lesson18]") {
    TemporaryFolder temporary;
    const std::string folder = (temporary.path / "cache").string();
    REQUIRE(lesson18::makeFolders(folder));
    const std::uint64_t key = 0x0123456789abcdefull;
    const std::string path = folder + "/" + lesson18::entryName(key);
    const std::string cubin(3000, 'c');
    REQUIRE(lesson18::writeEntry(folder, key, cubin).ok);
    REQUIRE(lesson18::readEntry(path, key).state == lesson18::EntryState::Hit);
    // A whole entry, with a right header and hash, is refused when group or others may write to
    // it: they could have written it. Others may read it (that plants nothing).
    for (const mode_t mode : {0620, 0602, 0666, 0622}) {
        INFO("mode " << std::oct << mode);
        REQUIRE(chmod(path.c_str(), mode) == 0);
        const lesson18::Lookup refused = lesson18::readEntry(path, key);
        CHECK(refused.state == lesson18::EntryState::NotPrivate);
        CHECK(refused.cubin.empty());
    }
    for (const mode_t mode : {0644, 0400, 0600}) {
        INFO("mode " << std::oct << mode);
        REQUIRE(chmod(path.c_str(), mode) == 0);
        CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::Hit);
    }
    // A store replaces the refused file with one of mode 0600 (mkstemp's), and the lookup hits.
    REQUIRE(chmod(path.c_str(), 0666) == 0);
    REQUIRE(lesson18::writeEntry(folder, key, cubin).ok);
    CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::Hit);
    if (geteuid() != 0) return;  // below, files of another user: only root may chown them
    // An entry another user owns is refused, even with mode 0600 and a right header and hash.
    REQUIRE(chown(path.c_str(), 65534, 65534) == 0);
    CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::NotPrivate);
    REQUIRE(chown(path.c_str(), 0, 0) == 0);
    CHECK(lesson18::readEntry(path, key).state == lesson18::EntryState::Hit);
    // The case the owner check is for: the base below a folder that others may write to, with
    // no sticky bit (like XDG_CACHE_HOME=/tmp/shared/cache). The folders pass their checks; then
    // another user renames the base away and puts their own in its place, with an entry of their
    // own under the same name, header and hash right. The lookup walks the path by name again
    // and finds that entry: only its owner tells it apart.
    REQUIRE(mkdir((temporary.path / "shared").c_str(), 0777) == 0);
    const std::string shared = std::filesystem::canonical(temporary.path / "shared").string();
    REQUIRE(chmod(shared.c_str(), 0777) == 0);  // mkdir's mode passed through the umask
    const std::string base = shared + "/cache";
    const lesson18::CacheFolder sharedFolder{base, base + "/" + lesson18::kCourseSubfolder, "$XDG_CACHE_HOME/..."};
    std::string cachePath;
    REQUIRE(lesson18::makePrivateFolders(sharedFolder, &cachePath) == lesson18::FolderState::Private);
    REQUIRE(lesson18::writeEntry(cachePath, key, cubin).ok);
    const std::string entry = cachePath + "/" + lesson18::entryName(key);
    REQUIRE(lesson18::readEntry(entry, key).state == lesson18::EntryState::Hit);
    REQUIRE(rename(base.c_str(), (shared + "/moved-away").c_str()) == 0);
    REQUIRE(lesson18::makeFolders(cachePath));
    REQUIRE(lesson18::writeEntry(cachePath, key, "planted code").ok);
    for (std::string planted = entry; planted.size() > shared.size(); planted.erase(planted.rfind('/')))
        REQUIRE(chown(planted.c_str(), 65534, 65534) == 0);
    const lesson18::Lookup planted = lesson18::readEntry(entry, key);
    CHECK(planted.state == lesson18::EntryState::NotPrivate);
    CHECK(planted.cubin.empty());
    // Without the owner check the lookup would have believed it: the header and hash are right.
    REQUIRE(chown(entry.c_str(), 0, 0) == 0);
    CHECK(lesson18::readEntry(entry, key).cubin == "planted code");
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
    if (!contains(r.out, "section library: SKIP")) {
        CHECK(valueOf(r.out, "current context before and after cuLibraryLoadData") == "none, none");
        CHECK(checkOk(r.out, "a library loads with no context current"));
    }
    // Both kernels are SASS for this GPU's architecture: the JIT's and NVRTC's.
    const std::string cc = valueOf(r.out, "compute capability").value_or("?");
    const std::string sm = "SASS for sm_" + std::regex_replace(cc, std::regex("\\."), "");
    if (!contains(r.out, "section PTX: SKIP")) CHECK(contains(valueOf(r.out, "saxpy from the PTX").value_or(""), sm));
    if (!contains(r.out, "section library: SKIP")) {
        CHECK(contains(valueOf(r.out, "saxpy from the CUBIN").value_or(""), sm));
        CHECK(valueOf(r.out, "saxpy from the CUBIN lies in the library's module of this context") == "yes");
        CHECK(checkOk(r.out, "the CUBIN kernel's function lies in the library's module"));
        // The library's 64 MiB array: found in this context, its memory taken and given back.
        CHECK(valueOf(r.out, "cuLibraryGetGlobal(gBuffer)") == "CUDA_SUCCESS, 67108864 bytes");
        CHECK(checkOk(r.out, "the library's gBuffer is 64 MiB in this context"));
        CHECK(checkOk(r.out, "free memory falls by gBuffer's size once the library is in this context"));
        CHECK(checkOk(r.out, "free memory rises by gBuffer's size after cuLibraryUnload"));
    }
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
    // cuda.h's words for the result: "the PTX JIT compilation was disabled".
    CHECK(contains(r.out, "section PTX: SKIP (CUDA_ERROR_JIT_COMPILATION_DISABLED: PTX JIT compilation was disabled)"));
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
    CHECK(valueOf(r.out, "cuModuleGetFunction(lowered names)") == "CUDA_SUCCESS, CUDA_SUCCESS");
    CHECK(checkOk(r.out, "scaleBy<float> scales floats exactly"));
    CHECK(checkOk(r.out, "scaleBy<int> scales ints exactly"));
    CHECK(checkOk(r.out, "the cuLink kernel matches the host"));
    CHECK(checkOk(r.out, "linked image is ELF"));
    // "iterate, cuLink: R registers, L bytes local memory, T ms"
    const std::regex form("([0-9]+) registers, ([0-9]+) bytes local memory, [0-9.]+ ms");
    std::smatch plain;
    const std::string plainLine = valueOf(r.out, "iterate, cuLink").value_or("");
    REQUIRE(std::regex_match(plainLine, plain, form));
    if (contains(r.out, "section link-time optimisation: SKIP")) return;
    std::smatch lto;
    const std::string ltoLine = valueOf(r.out, "iterate, nvJitLink -lto").value_or("");
    REQUIRE(std::regex_match(ltoLine, lto, form));
    CHECK(contains(r.out, "  | ptxas fatal   : Unresolved extern function '_Z4stepji'"));
    // Compiled alone, iterate.cu can only call step, which it does not define. Whether the LTO
    // link inlines it is the compilers' choice: the count is a printed figure, not asserted.
    CHECK(std::stoi(valueOf(r.out, "calls in the PTX of iterate.cu alone (-rdc=true)").value_or("0")) > 0);
    CHECK(std::regex_match(valueOf(r.out, "calls in the linked PTX").value_or(""), std::regex("[0-9]+")));
    CHECK(checkOk(r.out, "nvJitLink links the two units with -lto"));
    CHECK(checkOk(r.out, "the LTO kernel matches the host"));
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
    CHECK(valueOf(first.out, "a symbolic link to a whole entry") == "miss (a symbolic link or not a regular file)");
    CHECK(valueOf(first.out, "writable by group and others") ==
          std::string(lesson18::describe(lesson18::EntryState::NotPrivate)));
    // Step 5 cleans up after itself: the entry, the demo lock and nothing else (no link target, no
    // temporary file, no entry of the other key).
    std::vector<std::string> names;
    for (const auto& file : std::filesystem::directory_iterator(entry.parent_path()))
        names.push_back(file.path().filename().string());
    std::vector<std::string> expected{entry.filename().string(), "demo.lock"};
    std::sort(names.begin(), names.end());
    std::sort(expected.begin(), expected.end());
    CHECK(names == expected);
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
    // A compile runs the whole compiler (about 45 ms on the H100 with CUDA 13.0); a cached load only
    // reads a 4 KB file, hashes it and loads it (about 0.1 ms there): a factor of about 400. A
    // factor of 10 leaves a margin that any GPU and any machine the course runs on keeps, since the
    // compile runs on the CPU and the load is the same small CUBIN.
    CHECK(cached * 10.0 < compile);
    CHECK(benchValue(r.out, "compile cache / NVRTC to CUBIN") < 0.1);
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
