// Lesson 05, program 5 — what pinned memory buys: copy bandwidth, pageable vs pinned,
// and pinned copies against the PCIe link's theoretical rate.
//
// The link's rate comes from Linux sysfs for this GPU's PCI address (pcie_link.h); the
// ratio divides two numbers of this run on this machine, never a figure from elsewhere.
// Checks: pinned copies beat pageable ones by a stated margin, and no measured rate
// exceeds what the link can carry (a rate above it means the timing is wrong).
//
//   bandwidth [--device N]           64 KiB, 1 MiB, 16 MiB
//   bandwidth [--device N] --bench   up to 256 MiB, more trials, "bench:" lines
// Both bind the thread to the CPUs near the GPU while they measure, and restore it after.
#include <cuda.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "pcie_link.h"

namespace {

std::string sizeText(size_t bytes) {
    return bytes >= (size_t{1} << 20) ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes >> 10) + " KiB";
}

// Pinned must beat pageable by at least this factor (median rates at the largest size).
// Observed at 16 MiB: 3.75-5.47 x on H100s, 3.30-5.72 x on H200s. A pageable copy's own rate
// varies from run to run (two measurements of the same pageable upload in one run were 1.43 x
// and 1.72 x apart on H100s), so the bound sits above that and well below the real factor.
constexpr double kPinnedOverPageable = 2.0;

// cuda.h: cuEventElapsedTime gives "milliseconds with a resolution of around 0.5 microseconds",
// an approximate figure, not a bound. A Rate: GB/s, and the same bytes over the interval made
// 0.5 us longer, which allows for that resolution; the allowance can only lower a rate.
constexpr double kEventResolutionMs = 0.5e-3;
struct Rate {
    double gigabytesPerSecond, withResolution;
};

// Bandwidth in GB/s (1e9 bytes per second) of `bytes`-sized copies: one batch of warm-up
// copies (a pageable copy's first batch at a size can run much slower than the next: on an H100
// one pageable upload measured 8 GB/s, the same copy right after it 14 GB/s), then `trials` batches of `copiesPerTrial` back-to-back copies on one stream, each
// batch between two events. Returns the median batch. The interval is the time between
// the stream reaching `start` and reaching `stop`, so it counts whatever held the stream
// in between as well as the DMA: the host still submitting the next copy (a large share
// at 64 KiB) and, for pageable memory, the CPU staging each chunk. cuda.h: for events
// recorded in a non-NULL stream "the resulting time may be greater than expected"; and
// the interval is read only to about its resolution, so it is also returned that much longer.
Rate measureBandwidth(bool upload, void* host, CUdeviceptr device, size_t bytes, int copiesPerTrial, int trials,
                      CUstream stream, CUevent start, CUevent stop) {
    auto copy = [&] {
        if (upload)
            CHECK_DRIVER(cuMemcpyHtoDAsync(device, host, bytes, stream));
        else
            CHECK_DRIVER(cuMemcpyDtoHAsync(host, device, bytes, stream));
    };
    for (int i = 0; i < copiesPerTrial; ++i) copy();
    std::vector<double> intervals;  // milliseconds
    for (int trial = 0; trial < trials; ++trial) {
        CHECK_DRIVER(cuEventRecord(start, stream));
        for (int i = 0; i < copiesPerTrial; ++i) copy();
        CHECK_DRIVER(cuEventRecord(stop, stream));
        CHECK_DRIVER(cuEventSynchronize(stop));
        float milliseconds = 0.0f;
        CHECK_DRIVER(cuEventElapsedTime(&milliseconds, start, stop));
        intervals.push_back(milliseconds);
    }
    std::sort(intervals.begin(), intervals.end());
    const double median = intervals[intervals.size() / 2];
    const double gigabytes = static_cast<double>(bytes) * copiesPerTrial / 1e9;
    return {gigabytes / (median * 1e-3), gigabytes / ((median + kEventResolutionMs) * 1e-3)};
}

// Binds this thread to the CPUs next to the GPU, as nvbandwidth does, so that the pinned
// buffers allocated next come from the GPU's NUMA node. Linux lists those CPUs in sysfs
// under the device's PCI address ("0-15,32-47"); only those the thread may already use are
// kept. `previous` is the affinity to put back once the measurements are done.
struct Binding {
    bool changed = false;
    cpu_set_t previous;
    std::string text;  // the list bound to, or why the affinity was left as it was
};
Binding bindToCpusNearGpu(const std::string& busId) {
    Binding binding;
    CPU_ZERO(&binding.previous);
    if (sched_getaffinity(0, sizeof(binding.previous), &binding.previous) != 0) {
        binding.text = "unchanged (sched_getaffinity: " + std::string(std::strerror(errno)) + ")";
        return binding;
    }
    const std::string path = "/sys/bus/pci/devices/" + pcie::sysfsDeviceName(busId) + "/local_cpulist";
    std::ifstream file(path);
    std::string cpuList;
    if (!std::getline(file, cpuList) || cpuList.empty()) {
        binding.text = "unchanged (cannot read " + path + ")";
        return binding;
    }
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    std::istringstream ranges(cpuList);
    for (std::string range; std::getline(ranges, range, ',');) {
        int first = 0;
        int last = 0;
        const int fields = std::sscanf(range.c_str(), "%d-%d", &first, &last);
        if (fields < 1) continue;
        if (fields == 1) last = first;
        for (int cpu = first; cpu <= last && cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &cpus);
    }
    CPU_AND(&cpus, &cpus, &binding.previous);
    if (CPU_COUNT(&cpus) == 0) {
        binding.text = "unchanged (none of the GPU's local CPUs " + cpuList + " is allowed to this thread)";
    } else if (CPU_EQUAL(&cpus, &binding.previous)) {
        binding.text = cpuList + " (every CPU this thread may use already)";
    } else if (sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
        binding.text = "unchanged (sched_setaffinity: " + std::string(std::strerror(errno)) + ")";
    } else {
        binding.changed = true;
        binding.text = cpuList;
    }
    return binding;
}

// Puts the thread's affinity back: "yes", "nothing to restore", or why it failed.
std::string restoreAffinity(const Binding& binding) {
    if (!binding.changed) return "nothing to restore";
    if (sched_setaffinity(0, sizeof(binding.previous), &binding.previous) != 0)
        return "NO (sched_setaffinity: " + std::string(std::strerror(errno)) + ")";
    return "yes";
}

// "32.0 GT/s x16 (gen5, 128b/130b encoding)", or "n/a (why)".
std::string linkText(const pcie::Link& link) {
    if (!link.known) return "n/a (" + link.reason + ")";
    char text[96];
    std::snprintf(text, sizeof(text), "%.1f GT/s x%d (gen%d, %s encoding)", link.gigaTransfers, link.lanes,
                  link.generation, link.encoding);
    return text;
}

// measured / theoretical as "0.866 x its theoretical rate" (a plain ratio, not a
// percentage, so that the number carries a unit), or "n/a (why)" when the rate is not known.
std::string ratioText(double measured, const pcie::Link& link) {
    if (!link.known) return "n/a (" + link.reason + ")";
    char text[48];
    std::snprintf(text, sizeof(text), "%.3f x its theoretical rate", measured / link.gigabytesPerSecond);
    return text;
}

// The same ratio in percent for the bench lines.
std::string percentText(double measured, const pcie::Link& link) {
    if (!link.known) return "n/a (" + link.reason + ")";
    char text[32];
    std::snprintf(text, sizeof(text), "%.1f %%", 100.0 * measured / link.gigabytesPerSecond);
    return text;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const bool bench = args.has("--bench");
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    // Step 1: the primary context (lesson 04), and the GPU's PCI address. The thread is
    // bound near the GPU in every run, so that the default run and --bench measure the same
    // thing; the binding is undone at the end.
    course::printStep(1, "the device and its PCI address");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char busId[32] = {};
    CHECK_DRIVER(cuDeviceGetPCIBusId(busId, sizeof(busId), device));
    std::printf("PCI bus id: %s\n", busId);
    const Binding binding = bindToCpusNearGpu(busId);
    std::printf("host thread bound to the GPU's local CPUs: %s\n", binding.text.c_str());
    // Where the GPU shares memory with the CPU, or reaches pageable memory through the
    // host's page tables (Grace Hopper, for example: there "cuMemAllocHost may not page-lock
    // the allocated memory", cuda.h), pinned and pageable copies need not differ, and host
    // memory need not travel over a PCIe link.
    int integrated = 0;
    int hostPageTables = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&hostPageTables, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
                                      device));
    const bool discretePcie = integrated == 0 && hostPageTables == 0;
    std::printf("integrated: %s; pageable memory access uses host page tables: %s\n", integrated ? "yes" : "no",
                hostPageTables ? "yes" : "no");
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUevent start = nullptr;
    CUevent stop = nullptr;
    CHECK_DRIVER(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuEventCreate(&stop, CU_EVENT_DEFAULT));

    // Step 2: buffers are allocated once at the largest size (allocating and pinning is
    // far slower than copying); each size copies a prefix of them.
    course::printStep(2, bench ? "bandwidth, pageable vs pinned (bench sweep)" : "bandwidth, pageable vs pinned");
    const std::vector<size_t> sizes = bench ? std::vector<size_t>{size_t{64} << 10, size_t{1} << 20, size_t{16} << 20,
                                                                  size_t{64} << 20, size_t{256} << 20}
                                            : std::vector<size_t>{size_t{64} << 10, size_t{1} << 20, size_t{16} << 20};
    const int copiesPerTrial = bench ? 4 : 2;
    const int trials = bench ? 7 : 5;
    const size_t largest = sizes.back();
    CUdeviceptr deviceBuffer = 0;
    CHECK_DRIVER(cuMemAlloc(&deviceBuffer, largest));
    // Set on the same stream as the copies, so it is ordered before them; D2H copies then read defined data.
    CHECK_DRIVER(cuMemsetD8Async(deviceBuffer, 0, largest, stream));
    void* pinned = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&pinned, largest));
    std::memset(pinned, 0, largest);
    // Zero-filled, so every page is touched now and no page fault lands inside a timing.
    std::vector<unsigned char> pageable(largest, 0);
    std::printf(
        "method: %d warm-up copies, then %d trials of %d back-to-back copies between two events on one stream; "
        "median trial; GB/s = 1e9 bytes/s\n",
        copiesPerTrial, trials, copiesPerTrial);
    std::printf("| size | H2D pageable | H2D pinned | D2H pageable | D2H pinned |\n");
    std::printf("| --- | --- | --- | --- | --- |\n");
    double rates[4] = {};  // H2D pageable, H2D pinned, D2H pageable, D2H pinned; the largest size's stay
    double fastest = 0.0;  // the highest rate of the whole table, for step 3
    // The highest of the rates with their intervals 0.5 us longer, for step 3's check, and
    // whether that allowance lowered every rate, as it must.
    double fastestWithResolution = 0.0;
    bool allowanceLowersEveryRate = true;
    for (const size_t size : sizes) {
        const Rate measured[4] = {
            measureBandwidth(true, pageable.data(), deviceBuffer, size, copiesPerTrial, trials, stream, start, stop),
            measureBandwidth(true, pinned, deviceBuffer, size, copiesPerTrial, trials, stream, start, stop),
            measureBandwidth(false, pageable.data(), deviceBuffer, size, copiesPerTrial, trials, stream, start, stop),
            measureBandwidth(false, pinned, deviceBuffer, size, copiesPerTrial, trials, stream, start, stop)};
        for (int i = 0; i < 4; ++i) {
            rates[i] = measured[i].gigabytesPerSecond;
            fastest = std::max(fastest, rates[i]);
            fastestWithResolution = std::max(fastestWithResolution, measured[i].withResolution);
            allowanceLowersEveryRate = allowanceLowersEveryRate && measured[i].withResolution < rates[i];
        }
        std::printf("| %s | %.2f GB/s | %.2f GB/s | %.2f GB/s | %.2f GB/s |\n", sizeText(size).c_str(), rates[0],
                    rates[1], rates[2], rates[3]);
    }
    const std::string at = sizeText(largest);
    std::printf("pinned / pageable at %s: H2D %.2f x, D2H %.2f x (the checks need at least %.2f x)\n", at.c_str(),
                rates[1] / rates[0], rates[3] / rates[2], kPinnedOverPageable);
    if (discretePcie) {
        verdict.check("pinned upload faster than pageable", rates[1] >= kPinnedOverPageable * rates[0]);
        verdict.check("pinned download faster than pageable", rates[3] >= kPinnedOverPageable * rates[2]);
    } else {
        std::printf("section pinned vs pageable: SKIP (integrated GPU or host page tables: no staging needed)\n");
    }

    // Step 3: the link's rate, read from sysfs while pinned uploads keep it busy: an idle
    // GPU may train its link down to a slower speed to save power.
    course::printStep(3, "the PCIe link's theoretical rate (sysfs)");
    for (int i = 0; i < 8; ++i) CHECK_DRIVER(cuMemcpyHtoDAsync(deviceBuffer, pinned, largest, stream));
    const pcie::Link link = pcie::readLink("/sys", busId, "current");
    const pcie::Link maxLink = pcie::readLink("/sys", busId, "max");
    CHECK_DRIVER(cuStreamSynchronize(stream));
    std::printf("sysfs device: /sys/bus/pci/devices/%s\n", link.device.c_str());
    std::printf("PCIe link while copying (current_link_*): %s\n", linkText(link).c_str());
    std::printf("PCIe link at most (max_link_*): %s\n", linkText(maxLink).c_str());
    if (link.known)
        std::printf("PCIe theoretical rate per direction: %.2f GB/s (%.1f GT/s x %d lanes x %s / 8)\n",
                    link.gigabytesPerSecond, link.gigaTransfers, link.lanes, link.encoding);
    else
        std::printf("PCIe theoretical rate per direction: n/a (%s)\n", link.reason.c_str());
    std::printf("H2D pinned %s vs PCIe link: %s\n", at.c_str(), ratioText(rates[1], link).c_str());
    std::printf("D2H pinned %s vs PCIe link: %s\n", at.c_str(), ratioText(rates[3], link).c_str());
    // No copy can outrun the link at its best (max_link_*: what device and slot can do). Each
    // rate is compared with its interval 0.5 us longer, allowing for the event timer's
    // resolution (about 0.5 us by cuda.h): one above the bound even then means the events did
    // not bracket the copies. The allowance must lower every rate, or the comparison would
    // be kinder to the events than the printed rates are.
    if (discretePcie && maxLink.known) {
        std::printf(
            "fastest rate of the table: %.2f GB/s (%.2f GB/s with each interval 0.5 us longer); PCIe link at most: "
            "%.2f GB/s per direction\n",
            fastest, fastestWithResolution, maxLink.gigabytesPerSecond);
        verdict.check("the resolution allowance lowers every rate", allowanceLowersEveryRate);
        verdict.check("every rate, with the timer's resolution allowed for, within the link's theoretical maximum",
                      fastestWithResolution <= maxLink.gigabytesPerSecond);
    } else {
        std::printf("section rates vs link: SKIP (%s)\n",
                    discretePcie ? maxLink.reason.c_str() : "integrated GPU or host page tables: not over this link");
    }
    if (bench) {
        std::printf("bench: H2D pinned %s = %.2f GB/s\n", at.c_str(), rates[1]);
        std::printf("bench: D2H pinned %s = %.2f GB/s\n", at.c_str(), rates[3]);
        std::printf("bench: H2D pageable %s = %.2f GB/s\n", at.c_str(), rates[0]);
        std::printf("bench: D2H pageable %s = %.2f GB/s\n", at.c_str(), rates[2]);
        if (link.known) std::printf("bench: PCIe link theoretical = %.2f GB/s\n", link.gigabytesPerSecond);
        std::printf("bench: H2D pinned vs PCIe link = %s\n", percentText(rates[1], link).c_str());
        std::printf("bench: D2H pinned vs PCIe link = %s\n", percentText(rates[3], link).c_str());
    }

    // Step 4: give everything back, newest first; the thread's affinity last, as it was set first.
    course::printStep(4, "release everything, newest first");
    CHECK_DRIVER(cuMemFreeHost(pinned));
    CHECK_DRIVER(cuMemFree(deviceBuffer));
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context: released\n");
    std::printf("host thread affinity restored: %s\n", restoreAffinity(binding).c_str());
    return verdict.finish();
}
