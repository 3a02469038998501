// kernel_cache.h — lesson 18's compile cache, in plain C++ (no CUDA, so the CPU tests use it
// too): the FNV-1a hash, the key, where the cache lives and who may own it, and entries that are
// written atomically and checked whenever they are read.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace lesson18 {

// FNV-1a, 64 bits: for each byte, xor it into the hash, then multiply by the FNV prime. Both
// steps can be undone, so two inputs of the same length that differ in any one byte always hash
// differently; other damage goes unnoticed with a chance of about 1 in 2^64. That is a check
// against accidents (a crash, a full disk, a flipped bit, a file cut short). It is no defence
// against an attacker: whoever can write the file can give it a matching hash. What keeps other
// users from planting code is who owns what: makePrivateFolders refuses folders that another user
// owns or could write to, and readEntry refuses symbolic links and any entry that is not this
// user's own (readEntry says why the folders alone are not enough).
constexpr std::uint64_t kFnvOffsetBasis = 14695981039346656037ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

inline std::uint64_t fnv1a(const void* data, std::size_t bytes, std::uint64_t hash = kFnvOffsetBasis) {
    const auto* byte = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) {
        hash ^= byte[i];
        hash *= kFnvPrime;
    }
    return hash;
}

inline std::uint64_t fnv1a(const std::string& text, std::uint64_t hash = kFnvOffsetBasis) {
    return fnv1a(text.data(), text.size(), hash);
}

inline std::string hex64(std::uint64_t value) {
    char text[17];
    std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
    return text;
}

// A file as the key sees it: where it is (symbolic links resolved), its size and the time it
// was last modified. A file replaced by another version changes at least one of them, in practice.
struct FileIdentity {
    std::string path;
    std::uint64_t bytes = 0;
    std::int64_t modifiedNanoseconds = 0;  // st_mtim, in nanoseconds since 1970
};

inline std::optional<FileIdentity> fileIdentity(const std::string& path) {
    char* resolved = realpath(path.c_str(), nullptr);
    if (resolved == nullptr) return std::nullopt;
    FileIdentity identity;
    identity.path = resolved;
    std::free(resolved);
    struct stat info {};
    if (stat(identity.path.c_str(), &info) != 0) return std::nullopt;
    identity.bytes = static_cast<std::uint64_t>(info.st_size);
    identity.modifiedNanoseconds = static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
    return identity;
}

// Everything this lesson's compiles depend on: the source, the options, the architecture and
// the NVRTC. Leave one out and a change to it finds the old CUBIN. Not keyed, because they never
// change here: the program name given to nvrtcCreateProgram (always "saxpy.cu") and headers (none:
// numHeaders is 0, and no -I option lets #include read a file). A program that varies the name
// must key it; one that passes headers, or includes files, must key each header's name and
// content. The driver is not among the inputs: it loads the CUBIN that NVRTC made, it does not
// make it.
struct KeyInputs {
    std::string source;
    std::vector<std::string> options;  // every option given to NVRTC, in order
    int arch = 0;                      // 90 for sm_90
    int nvrtcVersion = 0;              // nvrtcVersion's major and minor, 13000 for 13.0: a patch release keeps it
    FileIdentity nvrtcLibrary;         // the NVRTC library file itself: what tells two patch releases apart
};

// Each field goes in after its length, so that fields cannot run into each other: ("ab", "c")
// and ("a", "bc") give different keys. Each option is a field of its own, so that {"-DA=1 -DB"}
// and {"-DA=1", "-DB"} differ too (joined with spaces, they would be the same text).
inline std::uint64_t cacheKey(const KeyInputs& inputs) {
    std::uint64_t hash = kFnvOffsetBasis;
    auto add = [&hash](const std::string& field) {
        const std::uint64_t length = field.size();
        hash = fnv1a(&length, sizeof(length), hash);
        hash = fnv1a(field, hash);
    };
    add(inputs.source);
    for (const std::string& option : inputs.options) add(option);
    add(std::to_string(inputs.arch));
    add(std::to_string(inputs.nvrtcVersion));
    add(inputs.nvrtcLibrary.path);
    add(std::to_string(inputs.nvrtcLibrary.bytes));
    add(std::to_string(inputs.nvrtcLibrary.modifiedNanoseconds));
    return hash;
}

// Where the cache lives, after the XDG Base Directory Specification: $XDG_CACHE_HOME when it is
// an absolute path (the specification says to ignore a relative one), else $HOME/.cache; then the
// course's own subfolder. `shown` names it by the variable, the same for every user.
constexpr const char* kCourseSubfolder = "cuda-driver-api-course/18-runtime-compilation";

struct CacheFolder {
    std::string base;  // $XDG_CACHE_HOME or $HOME/.cache
    std::string path;  // base + "/" + kCourseSubfolder
    std::string shown;
};

inline std::optional<CacheFolder> cacheFolder(const char* xdgCacheHome, const char* home) {
    if (xdgCacheHome != nullptr && xdgCacheHome[0] == '/')
        return CacheFolder{xdgCacheHome, std::string(xdgCacheHome) + "/" + kCourseSubfolder,
                           std::string("$XDG_CACHE_HOME/") + kCourseSubfolder};
    if (home != nullptr && home[0] == '/')
        return CacheFolder{std::string(home) + "/.cache", std::string(home) + "/.cache/" + kCourseSubfolder,
                           std::string("$HOME/.cache/") + kCourseSubfolder};
    return std::nullopt;
}

// mkdir -p, every folder it creates readable and writable by this user only.
inline bool makeFolders(const std::string& path) {
    for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
        const std::string prefix = path.substr(0, slash);
        if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) return false;
        if (slash == std::string::npos) return true;
    }
}

enum class FolderState { Private, CannotCreate, NotAFolder, OtherOwner, OpenToOthers };

inline const char* describe(FolderState state) {
    switch (state) {
        case FolderState::Private: return "private (this user's, no other user can write to it)";
        case FolderState::CannotCreate: return "cannot be created";
        case FolderState::NotAFolder: return "not a folder (a symbolic link or a file)";
        case FolderState::OtherOwner: return "owned by another user";
        case FolderState::OpenToOthers: return "open to group or others";
    }
    return "unknown";
}

// One folder of the cache's path, from what stat or lstat said about it: a folder, owned by
// `user`, with none of the `forbidden` permission bits.
inline FolderState judgeFolder(const struct stat& info, uid_t user, mode_t forbidden) {
    if (!S_ISDIR(info.st_mode)) return FolderState::NotAFolder;
    if (info.st_uid != user) return FolderState::OtherOwner;
    if ((info.st_mode & forbidden) != 0) return FolderState::OpenToOthers;
    return FolderState::Private;
}

// Makes the cache folder, or refuses it. Another user who owns a folder of the path, or may
// write to one, can replace what is in it: the entries, or the folders below it. So the base
// (made 0700 if missing) must be a folder of this user that group and others cannot write to
// (they may read it: ~/.cache is often 0755). The base may be a symbolic link (~/.cache often is
// one): it is resolved once, with realpath, and the folder it leads to is the one checked, and
// the one every later path starts from (*resolvedPath): a link re-pointed after the check changes
// nothing. The course's two folders below it must be this user's, not symbolic links (lstat),
// and closed to group and others: made 0700 here, and an existing one with any other owner or
// mode was not made by this code. Folders above the base are not checked.
inline FolderState makePrivateFolders(const CacheFolder& folder, std::string* resolvedPath = nullptr) {
    struct stat info {};
    if (!makeFolders(folder.base)) return FolderState::CannotCreate;
    char* resolved = realpath(folder.base.c_str(), nullptr);
    if (resolved == nullptr) return FolderState::CannotCreate;
    std::string path = resolved;
    std::free(resolved);
    if (lstat(path.c_str(), &info) != 0) return FolderState::CannotCreate;
    FolderState state = judgeFolder(info, geteuid(), S_IWGRP | S_IWOTH);
    const std::string below = kCourseSubfolder;
    for (std::size_t from = 0; state == FolderState::Private && from <= below.size();) {
        std::size_t slash = below.find('/', from);
        if (slash == std::string::npos) slash = below.size();
        path += "/" + below.substr(from, slash - from);
        from = slash + 1;
        if ((mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) || lstat(path.c_str(), &info) != 0)
            return FolderState::CannotCreate;
        state = judgeFolder(info, geteuid(), S_IRWXG | S_IRWXO);
    }
    if (resolvedPath != nullptr) *resolvedPath = path;
    return state;
}

// An entry is one file, <key>.cubin: a 32-byte header, then the CUBIN.
//   magic  8 bytes  "L18CUBN1": a file of this cache, format 1
//   key    8 bytes  the key it was stored under (a file copied to another name is refused)
//   bytes  8 bytes  the CUBIN's size (a file cut short is refused)
//   hash   8 bytes  FNV-1a of the CUBIN (a changed byte is refused)
// Integers in this machine's byte order: the cache belongs to this machine.
constexpr char kMagic[8] = {'L', '1', '8', 'C', 'U', 'B', 'N', '1'};
constexpr std::size_t kHeaderBytes = 32;

inline std::string entryName(std::uint64_t key) {
    return hex64(key) + ".cubin";
}

enum class EntryState { Hit, Missing, NotAFile, NotPrivate, Unreadable, NotAnEntry, OtherKey, WrongSize, Corrupt };

inline const char* describe(EntryState state) {
    switch (state) {
        case EntryState::Hit: return "hit";
        case EntryState::Missing: return "miss (no entry)";
        case EntryState::NotAFile: return "miss (a symbolic link or not a regular file)";
        case EntryState::NotPrivate:
            return "miss (not this user's own: another user owns it, or group or others may write to it)";
        case EntryState::Unreadable: return "miss (the entry cannot be read)";
        case EntryState::NotAnEntry: return "miss (not an entry of this cache: no header)";
        case EntryState::OtherKey: return "miss (the header names another key)";
        case EntryState::WrongSize: return "miss (the size differs from the header's: cut short or extended)";
        case EntryState::Corrupt: return "miss (the CUBIN's hash differs from the header's)";
    }
    return "miss (unknown state)";
}

// The rest of an open file, appended to `bytes`; false on a read error.
inline bool readAll(int fd, std::string& bytes) {
    char buffer[65536];
    for (;;) {
        const ssize_t got = read(fd, buffer, sizeof(buffer));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return false;
        if (got == 0) return true;
        bytes.append(buffer, static_cast<std::size_t>(got));
    }
}

struct Lookup {
    EntryState state = EntryState::Missing;
    std::string cubin;  // only on a hit
};

// Reads an entry and believes nothing in it that it has not checked. O_NOFOLLOW: a symbolic
// link in place of the entry is not followed (open fails with ELOOP), so a link cannot make the
// cache read a file somewhere else. O_NONBLOCK: a FIFO in place of the entry would otherwise make
// open wait for a writer; with it, open returns at once, and fstat then requires a regular file
// (for which the flag is cleared before reading).
// The file must also be this user's own: owned by this user (geteuid), and not writable by group
// or others. The folder checks are not enough on their own: every open walks the path by name
// again, and where a folder above the base may be written by another user (no sticky bit, as in
// XDG_CACHE_HOME=/tmp/shared/cache), that user can rename the checked folders away and put their
// own, with their own entries, in their place. fstat describes the file the descriptor holds,
// whatever path led to it, and another user cannot make a file that this user owns (a hard link
// they make to one is still this user's bytes, and its header must still name this key).
// Anything but a hit is a miss: the caller compiles again and stores over the bad entry (a
// rename replaces a link itself).
inline Lookup readEntry(const std::string& path, std::uint64_t key) {
    const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return {EntryState::Missing, {}};
        return {errno == ELOOP ? EntryState::NotAFile : EntryState::Unreadable, {}};
    }
    struct stat info {};
    const bool statted = fstat(fd, &info) == 0;
    const bool regular = statted && S_ISREG(info.st_mode);
    const bool own = regular && info.st_uid == geteuid() && (info.st_mode & (S_IWGRP | S_IWOTH)) == 0;
    std::string file;
    const bool whole = own && fcntl(fd, F_SETFL, 0) == 0 && readAll(fd, file);
    close(fd);
    if (statted && !regular) return {EntryState::NotAFile, {}};
    if (regular && !own) return {EntryState::NotPrivate, {}};
    if (!whole) return {EntryState::Unreadable, {}};
    if (file.size() < kHeaderBytes || std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0)
        return {EntryState::NotAnEntry, {}};
    std::uint64_t storedKey = 0;
    std::uint64_t bytes = 0;
    std::uint64_t hash = 0;
    std::memcpy(&storedKey, file.data() + 8, 8);
    std::memcpy(&bytes, file.data() + 16, 8);
    std::memcpy(&hash, file.data() + 24, 8);
    if (storedKey != key) return {EntryState::OtherKey, {}};
    if (file.size() - kHeaderBytes != bytes) return {EntryState::WrongSize, {}};
    std::string cubin = file.substr(kHeaderBytes);
    if (fnv1a(cubin) != hash) return {EntryState::Corrupt, {}};
    return {EntryState::Hit, std::move(cubin)};
}

inline bool writeAll(int fd, const std::string& bytes) {
    for (std::size_t done = 0; done < bytes.size();) {
        const ssize_t written = write(fd, bytes.data() + done, bytes.size() - done);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return false;
        done += static_cast<std::size_t>(written);
    }
    return true;
}

struct Stored {
    bool ok = false;            // the entry is in place
    bool fileSynced = false;    // fsync of the file succeeded before the rename (else no rename)
    bool folderSynced = false;  // fsync of the folder succeeded after the rename
    bool durable = false;       // both: what fsync returned, not an observation of the disk
    std::string temporaryName;  // the file written first, in the same folder
};

// Writes header and CUBIN to a new temporary file in the cache folder (mkstemp: a unique name,
// mode 0600), flushes it to the disk (fsync), then renames it to <key>.cubin. POSIX rename()
// replaces the name in one step: a reader in another process opens the old entry or the new one,
// never a half-written file, and of two processes storing the same key one whole entry stays.
// The rename changes the folder, not the file: until the folder too is flushed (fsync on the
// folder, opened O_DIRECTORY), a crash may lose the new name, and the next run misses and stores
// again. A crash can also leave a temporary file behind, or, on some file systems, a damaged
// entry: readEntry refuses that, and the next store replaces it.
inline Stored writeEntry(const std::string& folder, std::uint64_t key, const std::string& cubin) {
    Stored stored;
    std::string temporary = folder + "/" + entryName(key) + ".tmp.XXXXXX";
    const int fd = mkstemp(temporary.data());
    if (fd < 0) return stored;
    stored.temporaryName = temporary.substr(folder.size() + 1);
    std::string header(kHeaderBytes, '\0');
    const std::uint64_t bytes = cubin.size();
    const std::uint64_t hash = fnv1a(cubin);
    std::memcpy(header.data(), kMagic, sizeof(kMagic));
    std::memcpy(header.data() + 8, &key, 8);
    std::memcpy(header.data() + 16, &bytes, 8);
    std::memcpy(header.data() + 24, &hash, 8);
    bool ok = writeAll(fd, header) && writeAll(fd, cubin);
    stored.fileSynced = ok && fsync(fd) == 0;
    ok = close(fd) == 0 && stored.fileSynced;
    if (ok) ok = std::rename(temporary.c_str(), (folder + "/" + entryName(key)).c_str()) == 0;
    if (!ok) unlink(temporary.c_str());
    stored.ok = ok;
    if (ok) {
        const int folderFd = open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        stored.folderSynced = folderFd >= 0 && fsync(folderFd) == 0;
        if (folderFd >= 0) close(folderFd);
    }
    stored.durable = stored.fileSynced && stored.folderSynced;
    return stored;
}

// Removes an entry; true when none is there afterwards (also when there was none).
inline bool removeEntry(const std::string& path) {
    return unlink(path.c_str()) == 0 || errno == ENOENT;
}

// Whether the name is there: lstat, so that a symbolic link counts even where it leads nowhere.
inline bool fileExists(const std::string& path) {
    struct stat info {};
    return lstat(path.c_str(), &info) == 0;
}

}  // namespace lesson18
