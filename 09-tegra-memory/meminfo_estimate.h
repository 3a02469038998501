// meminfo_estimate.h — the CUDA for Tegra app note's estimate of how much memory an
// integrated GPU can still allocate, computed from the text of /proc/meminfo.
//
// On Tegra the CPU and the iGPU share one DRAM. cuMemGetInfo reports what is free
// right now, but the kernel can push host pages out to swap to make room, so the
// app note ("Estimating Total Allocatable Device Memory on an Integrated GPU
// Device") gives this rule for Linux and Android:
//
//   host allocated   = total used physical memory - device allocated memory
//   if host allocated <  free swap:  allocatable = MemTotal - device allocated
//   if host allocated >= free swap:  allocatable = MemTotal - (host allocated - free swap)
//
// with, from /proc/meminfo (values in kB, i.e. KiB):
//   total used physical memory = MemTotal - MemFree
//   free swap                  = SwapFree
//   device allocated memory    = NvMapMemUsed (Tegra kernels only; 0 when absent)
//
// It is an estimate, not a bound. Where this file departs from, or reads into, the
// note's formula:
//   - "total used physical memory" is taken as MemTotal - MemFree. That counts the
//     page cache, buffers and reclaimable slab as used, although the kernel drops them
//     on demand: host allocated comes out too large, the second branch is picked more
//     often and its result is too small.
//   - The note's second branch does not subtract the device allocations (NvMapMemUsed)
//     that the first branch subtracts: it is implemented as written, so there the
//     estimate is too large by up to NvMapMemUsed.
//   - The note writes the second branch for "host allocated > free swap" and leaves
//     equality open; this file uses the second branch for equality.
//   - Without NvMapMemUsed (not a Tegra kernel) the device allocations count as 0, and
//     a result below 0 is clamped to 0.
// MemAvailable, the kernel's own estimate of memory available for new allocations
// without swapping, is returned beside it for comparison (it ignores swap).
//
// Pure and header-only: no file access, no CUDA. The lesson passes the text of
// /proc/meminfo; the tests pass fixture files.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace meminfo {

// Which branch of the app note's rule produced the estimate.
enum class Branch {
    HostBelowFreeSwap,      // every host page could go to swap: only device allocations stay
    HostAtOrAboveFreeSwap,  // swap cannot take all host pages: the rest stays in DRAM
};

inline const char* branchName(Branch branch) {
    return branch == Branch::HostBelowFreeSwap ? "host allocated < free swap" : "host allocated >= free swap";
}

struct Estimate {
    std::uint64_t allocatableBytes = 0;  // the estimate of device-allocatable memory
    Branch branch = Branch::HostBelowFreeSwap;
    std::uint64_t totalPhysicalBytes = 0;         // MemTotal
    std::uint64_t usedPhysicalBytes = 0;          // MemTotal - MemFree
    std::uint64_t deviceAllocatedBytes = 0;       // NvMapMemUsed, 0 when the field is absent
    bool nvMapPresent = false;                    // false: not a Tegra kernel (or nvmap not exported)
    std::uint64_t hostAllocatedBytes = 0;         // used - device allocated
    std::uint64_t freeSwapBytes = 0;              // SwapFree
    std::optional<std::uint64_t> availableBytes;  // MemAvailable (Linux 3.14+), when present
};

struct Result {
    std::optional<Estimate> estimate;  // empty when the text lacks a field or has a bad one
    std::string reason;                // why there is no estimate; empty when there is one
};

// One "Name:   value kB" line of /proc/meminfo.
struct Field {
    bool present = false;              // a line starts with "Name:"
    std::optional<std::uint64_t> kib;  // its value, if it is a number followed by "kB"
};

inline Field findField(std::string_view text, std::string_view name) {
    Field field;
    std::size_t lineStart = 0;
    while (lineStart < text.size()) {
        std::size_t lineEnd = text.find('\n', lineStart);
        if (lineEnd == std::string_view::npos) lineEnd = text.size();
        const std::string_view line = text.substr(lineStart, lineEnd - lineStart);
        lineStart = lineEnd + 1;
        // The name must be the whole key: "MemFree" must not match "MemFreeX:" or "HugeMemFree:".
        if (line.size() <= name.size() || line.substr(0, name.size()) != name || line[name.size()] != ':') continue;
        field.present = true;
        std::string_view rest = line.substr(name.size() + 1);
        while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
        std::uint64_t value = 0;
        const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
        if (error != std::errc{} || end == rest.data()) return field;
        std::string_view unit(end, static_cast<std::size_t>(rest.data() + rest.size() - end));
        while (!unit.empty() && (unit.front() == ' ' || unit.front() == '\t')) unit.remove_prefix(1);
        while (!unit.empty() && (unit.back() == ' ' || unit.back() == '\t' || unit.back() == '\r'))
            unit.remove_suffix(1);
        if (unit == "kB") field.kib = value;
        return field;
    }
    return field;
}

inline Result estimateAllocatable(std::string_view meminfoText) {
    Result result;
    const Field memTotal = findField(meminfoText, "MemTotal");
    const Field memFree = findField(meminfoText, "MemFree");
    const Field swapFree = findField(meminfoText, "SwapFree");
    const Field nvMap = findField(meminfoText, "NvMapMemUsed");
    const Field memAvailable = findField(meminfoText, "MemAvailable");

    for (const auto& [name, field] :
         {std::pair{"MemTotal", &memTotal}, std::pair{"MemFree", &memFree}, std::pair{"SwapFree", &swapFree}}) {
        if (!field->present) {
            result.reason = std::string("missing field ") + name;
            return result;
        }
        if (!field->kib) {
            result.reason = std::string("malformed field ") + name + " (expected '<number> kB')";
            return result;
        }
    }
    if (nvMap.present && !nvMap.kib) {
        result.reason = "malformed field NvMapMemUsed (expected '<number> kB')";
        return result;
    }
    if (*memFree.kib > *memTotal.kib) {
        result.reason = "MemFree is larger than MemTotal";
        return result;
    }

    Estimate e;
    e.totalPhysicalBytes = *memTotal.kib * 1024;
    e.usedPhysicalBytes = (*memTotal.kib - *memFree.kib) * 1024;
    e.nvMapPresent = nvMap.present;
    e.deviceAllocatedBytes = nvMap.present ? *nvMap.kib * 1024 : 0;
    // nvmap memory is counted as used; a kernel that reports more than "used" gets 0 host memory.
    e.hostAllocatedBytes =
        e.usedPhysicalBytes > e.deviceAllocatedBytes ? e.usedPhysicalBytes - e.deviceAllocatedBytes : 0;
    e.freeSwapBytes = *swapFree.kib * 1024;
    if (memAvailable.kib) e.availableBytes = *memAvailable.kib * 1024;

    if (e.hostAllocatedBytes < e.freeSwapBytes) {
        e.branch = Branch::HostBelowFreeSwap;
        e.allocatableBytes =
            e.totalPhysicalBytes > e.deviceAllocatedBytes ? e.totalPhysicalBytes - e.deviceAllocatedBytes : 0;
    } else {
        e.branch = Branch::HostAtOrAboveFreeSwap;
        const std::uint64_t stuckInDram = e.hostAllocatedBytes - e.freeSwapBytes;
        e.allocatableBytes = e.totalPhysicalBytes > stuckInDram ? e.totalPhysicalBytes - stuckInDram : 0;
    }
    result.estimate = e;
    return result;
}

}  // namespace meminfo
