// kernel_cache.h — lesson 18's compile cache, in plain C++ (no CUDA, so the CPU tests use it
// too): the FNV-1a hash, the key, where the cache lives, and entries that are written
// atomically and checked whenever they are read.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

namespace lesson18 {

// FNV-1a, 64 bits: for each byte, xor it into the hash, then multiply by the FNV prime. Both
// steps can be undone, so two inputs of the same length that differ in any one byte always hash
// differently; other damage goes unnoticed with a chance of about 1 in 2^64. That is a check
// against accidents (a crash, a full disk, a flipped bit, a file cut short). It is no defence
// against an attacker: whoever can write the file can give it a matching hash. The cache folder's
// permissions (0700, this user only) are what keeps others from planting code in it.
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

// Everything the CUBIN depends on. Leave one out and a change to it finds the old CUBIN.
struct KeyInputs {
    std::string source;
    std::string options;    // every option, in order, joined by spaces
    int arch = 0;           // 90 for sm_90
    int nvrtcVersion = 0;   // 13000 for NVRTC 13.0
    int driverVersion = 0;  // cuDriverGetVersion
};

// Each field goes in after its length, so that fields cannot run into each other:
// ("ab", "c") and ("a", "bc") give different keys.
inline std::uint64_t cacheKey(const KeyInputs& inputs) {
    std::uint64_t hash = kFnvOffsetBasis;
    auto add = [&hash](const std::string& field) {
        const std::uint64_t length = field.size();
        hash = fnv1a(&length, sizeof(length), hash);
        hash = fnv1a(field, hash);
    };
    add(inputs.source);
    add(inputs.options);
    add(std::to_string(inputs.arch));
    add(std::to_string(inputs.nvrtcVersion));
    add(std::to_string(inputs.driverVersion));
    return hash;
}

// Where the cache lives, after the XDG Base Directory Specification: $XDG_CACHE_HOME when it is
// an absolute path (the specification says to ignore a relative one), else $HOME/.cache; then the
// course's own subfolder. `shown` names it by the variable, the same for every user.
constexpr const char* kCourseSubfolder = "cuda-driver-api-course/18-runtime-compilation";

struct CacheFolder {
    std::string path;
    std::string shown;
};

inline std::optional<CacheFolder> cacheFolder(const char* xdgCacheHome, const char* home) {
    if (xdgCacheHome != nullptr && xdgCacheHome[0] == '/')
        return CacheFolder{std::string(xdgCacheHome) + "/" + kCourseSubfolder,
                           std::string("$XDG_CACHE_HOME/") + kCourseSubfolder};
    if (home != nullptr && home[0] == '/')
        return CacheFolder{std::string(home) + "/.cache/" + kCourseSubfolder,
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

enum class EntryState { Hit, Missing, NotAnEntry, OtherKey, WrongSize, Corrupt };

inline const char* describe(EntryState state) {
    switch (state) {
        case EntryState::Hit: return "hit";
        case EntryState::Missing: return "miss (no entry)";
        case EntryState::NotAnEntry: return "miss (not an entry of this cache: no header)";
        case EntryState::OtherKey: return "miss (the header names another key)";
        case EntryState::WrongSize: return "miss (the size differs from the header's: cut short or extended)";
        case EntryState::Corrupt: return "miss (the CUBIN's hash differs from the header's)";
    }
    return "miss (unknown state)";
}

struct Lookup {
    EntryState state = EntryState::Missing;
    std::string cubin;  // only on a hit
};

// Reads an entry and believes nothing in it that it has not checked. Anything but a hit is a
// miss: the caller compiles again and stores over the bad entry.
inline Lookup readEntry(const std::string& path, std::uint64_t key) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return {EntryState::Missing, {}};
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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
    bool ok = false;
    std::string temporaryName;  // the file written first, in the same folder
};

// Writes header and CUBIN to a new temporary file in the cache folder (mkstemp: a unique name,
// mode 0600), flushes it to the disk (fsync), then renames it to <key>.cubin. POSIX rename()
// replaces the name in one step: a reader in another process opens the old entry or the new one,
// never a half-written file, and of two processes storing the same key one whole entry stays.
// A crash can still leave a temporary file behind, or, on some file systems, a damaged entry:
// readEntry refuses that, and the next store replaces it.
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
    bool ok = writeAll(fd, header) && writeAll(fd, cubin) && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (ok) ok = std::rename(temporary.c_str(), (folder + "/" + entryName(key)).c_str()) == 0;
    if (!ok) unlink(temporary.c_str());
    stored.ok = ok;
    return stored;
}

// Removes an entry; true when none is there afterwards (also when there was none).
inline bool removeEntry(const std::string& path) {
    return unlink(path.c_str()) == 0 || errno == ENOENT;
}

inline bool fileExists(const std::string& path) {
    struct stat info {};
    return stat(path.c_str(), &info) == 0;
}

}  // namespace lesson18
