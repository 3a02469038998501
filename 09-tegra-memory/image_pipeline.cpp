// Lesson 09, program 2 — the CUDA for Tegra application note's image pipeline, three ways.
//
// The CPU writes an image, three kernels (k1 -> k2 -> k3) process it, the CPU reads the
// result. The note compares three ways to place the input and output: the dGPU way
// (pinned host buffers + device buffers + explicit copies), the Tegra way (managed
// memory + cuStreamAttachMemAsync hints, no copies) and pinned zero-copy (mapped pinned
// memory the kernels read and write through cuMemHostGetDevicePointer, no copies).
// Which is fastest depends on the device: this program times every pass of all three and
// names one only when its median is clearly ahead (otherwise: too close to call).
//
//   image_pipeline [--device N] [--bench]
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "tegra_device.h"

namespace {

constexpr int kWidth = 1024;  // the note's 1024 x 1024 int image: 4 MiB per buffer
constexpr int kHeight = 1024;
constexpr size_t kPixels = static_cast<size_t>(kWidth) * kHeight;
constexpr size_t kImageBytes = sizeof(int) * kPixels;

// The note's readImage(): the CPU produces the input image.
void readImage(int* image) {
    for (int y = 0; y < kHeight; ++y)
        for (int x = 0; x < kWidth; ++x) image[y * kWidth + x] = (x * 7 + y * 13) & 0xFF;
}

// The note's UseImageonCPU(): the CPU reads every output pixel.
long long useImageOnCpu(const int* image) {
    long long sum = 0;
    for (size_t i = 0; i < kPixels; ++i) sum += image[i];
    return sum;
}

// k1 -> k2 -> k3 on the CPU, for checking.
std::vector<int> cpuPipeline() {
    std::vector<int> a(kPixels), b(kPixels), c(kPixels), d(kPixels);
    readImage(a.data());
    for (int y = 0; y < kHeight; ++y)
        for (int x = 0; x < kWidth; ++x)
            b[y * kWidth + x] =
                a[y * kWidth + std::max(x - 1, 0)] + a[y * kWidth + x] + a[y * kWidth + std::min(x + 1, kWidth - 1)];
    for (int y = 0; y < kHeight; ++y)
        for (int x = 0; x < kWidth; ++x)
            c[y * kWidth + x] =
                b[std::max(y - 1, 0) * kWidth + x] + b[y * kWidth + x] + b[std::min(y + 1, kHeight - 1) * kWidth + x];
    for (size_t i = 0; i < kPixels; ++i) d[i] = 9 * 255 - c[i];
    return d;
}

// The three kernels on one stream. Every way keeps the intermediates (k1's and k2's
// outputs) in device memory: only the GPU touches them, the note's rule for device memory.
struct Stages {
    CUstream stream = nullptr;
    CUfunction k1 = nullptr, k2 = nullptr, k3 = nullptr;
    CUdeviceptr b = 0, c = 0;
};

void runStages(const Stages& s, CUdeviceptr in, CUdeviceptr out) {
    int width = kWidth, height = kHeight;
    const CUfunction stages[3] = {s.k1, s.k2, s.k3};
    CUdeviceptr from[3] = {in, s.b, s.c};
    CUdeviceptr to[3] = {s.b, s.c, out};
    for (int i = 0; i < 3; ++i) {
        void* params[] = {&from[i], &to[i], &width, &height};
        CHECK_DRIVER(cuLaunchKernel(stages[i], (kWidth + 15) / 16, (kHeight + 15) / 16, 1, 16, 16, 1, 0, s.stream,
                                    params, nullptr));
    }
}

// One way's result: the median whole pass (CPU write + GPU + CPU read) and the output.
struct Way {
    const char* name = "";
    bool ran = false;
    double medianMs = 0.0;
    long long checksum = 0;
    std::vector<int> output;
};

// Runs `pass` `passes` times, keeps the median wall time and copies the output out. The
// median, not one pass nor the best: a pass that another process slowed down moves it little.
template <typename Pass>
Way timeWay(const char* name, int passes, Pass pass, const int* output) {
    Way way{name, true, 0.0, 0, {}};
    std::vector<double> passMs;
    for (int i = 0; i < passes; ++i) {
        const auto start = std::chrono::steady_clock::now();
        way.checksum = pass();
        const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
        passMs.push_back(took.count());
    }
    std::sort(passMs.begin(), passMs.end());
    way.medianMs = passMs.size() % 2 ? passMs[passMs.size() / 2]
                                     : (passMs[passMs.size() / 2 - 1] + passMs[passMs.size() / 2]) / 2.0;
    way.output.assign(output, output + kPixels);
    std::printf("%s output checksum: %lld\n", name, way.checksum);
    return way;
}

// A way is favoured only when its median pass is more than kMargin faster than every other
// way's median. Closer than that, the order can flip from run to run or under load, and the
// program says so instead of naming one. The verdict decides nothing: which way wins is an
// observation about this device in this run, not a check.
constexpr double kMargin = 0.20;

// The verdict, from this run's medians. The note's expectation is printed beside it, as
// what to compare with, not as the answer.
void printVerdict(std::vector<const Way*> measured, bool integrated) {
    std::sort(measured.begin(), measured.end(), [](const Way* a, const Way* b) { return a->medianMs < b->medianMs; });
    const bool clear = measured.size() == 1 || measured[1]->medianMs > (1.0 + kMargin) * measured[0]->medianMs;
    std::printf("margin: a way is named only when every other median is more than %.0f%% slower\n", 100.0 * kMargin);
    std::printf("favoured on this device: %s\n", clear ? measured[0]->name : "too close to call");
    if (clear)
        std::printf("favoured because: the fastest median pass (CPU write + GPU + CPU read), by more than the margin\n");
    else
        std::printf("favoured because: %s and %s are within the margin of each other in this run: "
                    "measure your own workload\n",
                    measured[0]->name, measured[1]->name);
    std::printf("the note's expectation for this device: %s\n",
                integrated ? "a way without copies (Tegra or zero-copy): CPU and iGPU share one DRAM"
                           : "the dGPU way when kernels reuse data; zero-copy when each byte crosses the bus once");
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device"}, "[--device N] [--bench]", args))
        return course::kExitUsage;
    const bool bench = args.has("--bench");
    const int passes = bench ? 100 : 20;  // the median of many: the CPU part of a pass is noisy

    // Step 1: the attach hints are stream-ordered, so the program owns a stream. The context
    // needs no flag for the zero-copy way: cuda.h says CU_CTX_MAP_HOST "was deprecated as of
    // CUDA 11.0 and it no longer has any effect. All contexts as of CUDA 3.2 behave as though
    // the flag is enabled."
    course::printStep(1, "device, context, kernels, stream");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device name: %s\n", name);
    const int integrated = tegra::attribute(device, CU_DEVICE_ATTRIBUTE_INTEGRATED);
    const int managedMemory = tegra::attribute(device, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
    const int mapHost = tegra::attribute(device, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
    CUcontext context = nullptr;
    CHECK_DRIVER(course::ctxCreate(&context, 0, device));
    const std::string fatbinPath = course::kernelPath("tegra_kernels.fatbin");
    const auto fatbin = course::readFile(fatbinPath);
    if (!fatbin) return EXIT_FAILURE;
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoadData(&module, fatbin->data()));
    Stages s;
    CHECK_DRIVER(cuModuleGetFunction(&s.k1, module, "k1RowSum"));
    CHECK_DRIVER(cuModuleGetFunction(&s.k2, module, "k2ColumnSum"));
    CHECK_DRIVER(cuModuleGetFunction(&s.k3, module, "k3Invert"));
    CHECK_DRIVER(cuStreamCreate(&s.stream, CU_STREAM_DEFAULT));
    CHECK_DRIVER(cuMemAlloc(&s.b, kImageBytes));
    CHECK_DRIVER(cuMemAlloc(&s.c, kImageBytes));
    std::printf("kernels: %s\n", fatbinPath.substr(fatbinPath.rfind('/') + 1).c_str());

    // Step 2: the dGPU way — pinned host buffers so the copies run at full speed
    // (lesson 05), device buffers on the GPU, explicit copies both ways.
    course::printStep(2, "image pipeline, the dGPU way (pinned host + explicit copies)");
    void* pinnedIn = nullptr;
    void* pinnedOut = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&pinnedIn, kImageBytes));
    CHECK_DRIVER(cuMemAllocHost(&pinnedOut, kImageBytes));
    CUdeviceptr deviceIn = 0, deviceOut = 0;
    CHECK_DRIVER(cuMemAlloc(&deviceIn, kImageBytes));
    CHECK_DRIVER(cuMemAlloc(&deviceOut, kImageBytes));
    const Way dgpu = timeWay(
        "dGPU way", passes,
        [&] {
            readImage(static_cast<int*>(pinnedIn));
            CHECK_DRIVER(cuMemcpyHtoDAsync(deviceIn, pinnedIn, kImageBytes, s.stream));
            runStages(s, deviceIn, deviceOut);
            CHECK_DRIVER(cuMemcpyDtoHAsync(pinnedOut, deviceOut, kImageBytes, s.stream));
            CHECK_DRIVER(cuStreamSynchronize(s.stream));
            return useImageOnCpu(static_cast<const int*>(pinnedOut));
        },
        static_cast<const int*>(pinnedOut));
    CHECK_DRIVER(cuMemFree(deviceOut));
    CHECK_DRIVER(cuMemFree(deviceIn));
    CHECK_DRIVER(cuMemFreeHost(pinnedOut));
    CHECK_DRIVER(cuMemFreeHost(pinnedIn));

    // Step 3: the Tegra way — input and output in managed memory, no copies. The
    // attach flag says who may touch the buffer; changing it is the note's prefetch
    // hint (table 2): HOST -> GLOBAL prefetches to the GPU, GLOBAL -> HOST to the CPU.
    course::printStep(3, "image pipeline, the Tegra way (managed memory + attach hints)");
    Way managed{"Tegra way", false, 0.0, 0, {}};
    if (!managedMemory) {
        std::printf(
            "section Tegra way: SKIP (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 0: no managed memory on this "
            "device, as on a dGPU attached to Tegra)\n");
    } else {
        CUdeviceptr managedIn = 0, managedOut = 0;
        // Attached to the host: the CPU may fill it while the GPU runs other work,
        // even where concurrentManagedAccess is 0.
        CHECK_DRIVER(cuMemAllocManaged(&managedIn, kImageBytes, CU_MEM_ATTACH_HOST));
        CHECK_DRIVER(cuMemAllocManaged(&managedOut, kImageBytes, CU_MEM_ATTACH_GLOBAL));
        managed = timeWay(
            "Tegra way", passes,
            [&] {
                readImage(tegra::hostView(managedIn));
                // length 0 = the whole allocation; the hint takes effect in stream order.
                CHECK_DRIVER(cuStreamAttachMemAsync(s.stream, managedIn, 0, CU_MEM_ATTACH_GLOBAL));
                // The previous pass handed the output to the host; the GPU needs it back before k3 writes.
                CHECK_DRIVER(cuStreamAttachMemAsync(s.stream, managedOut, 0, CU_MEM_ATTACH_GLOBAL));
                runStages(s, managedIn, managedOut);
                CHECK_DRIVER(cuStreamAttachMemAsync(s.stream, managedIn, 0, CU_MEM_ATTACH_HOST));
                CHECK_DRIVER(cuStreamAttachMemAsync(s.stream, managedOut, 0, CU_MEM_ATTACH_HOST));
                // Only after this may the CPU touch the buffers on a concurrentManagedAccess = 0 device.
                CHECK_DRIVER(cuStreamSynchronize(s.stream));
                return useImageOnCpu(tegra::hostView(managedOut));
            },
            tegra::hostView(managedOut));
        CHECK_DRIVER(cuMemFree(managedOut));
        CHECK_DRIVER(cuMemFree(managedIn));
    }

    // Step 4: pinned zero-copy — the kernels read the input and write the output in
    // pinned host memory, through the device addresses of the mapped allocations.
    // No copies: on an iGPU this is the same DRAM; on a dGPU every access crosses PCIe.
    course::printStep(4, "image pipeline, pinned zero-copy (mapped pinned memory, no copies)");
    Way zeroCopy{"zero-copy way", false, 0.0, 0, {}};
    if (!mapHost) {
        std::printf("section zero-copy way: SKIP (CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 0)\n");
    } else {
        void* mappedIn = nullptr;
        void* mappedOut = nullptr;
        CHECK_DRIVER(cuMemHostAlloc(&mappedIn, kImageBytes, CU_MEMHOSTALLOC_DEVICEMAP));
        CHECK_DRIVER(cuMemHostAlloc(&mappedOut, kImageBytes, CU_MEMHOSTALLOC_DEVICEMAP));
        CUdeviceptr mappedInDevice = 0, mappedOutDevice = 0;
        CHECK_DRIVER(cuMemHostGetDevicePointer(&mappedInDevice, mappedIn, 0));
        CHECK_DRIVER(cuMemHostGetDevicePointer(&mappedOutDevice, mappedOut, 0));
        zeroCopy = timeWay(
            "zero-copy way", passes,
            [&] {
                readImage(static_cast<int*>(mappedIn));
                runStages(s, mappedInDevice, mappedOutDevice);
                CHECK_DRIVER(cuStreamSynchronize(s.stream));
                return useImageOnCpu(static_cast<const int*>(mappedOut));
            },
            static_cast<const int*>(mappedOut));
        CHECK_DRIVER(cuMemFreeHost(mappedOut));
        CHECK_DRIVER(cuMemFreeHost(mappedIn));
    }

    // Step 5: the same answer every way (and the CPU's): the checks. Then the clock, which
    // decides nothing.
    course::printStep(5, "compare the three ways and time them");
    const std::vector<int> reference = cpuPipeline();
    course::Verdict verdict;
    bool agree = true;
    std::vector<const Way*> measured;
    const Way* const ways[] = {&dgpu, &managed, &zeroCopy};
    for (const Way* way : ways) {
        if (!way->ran) continue;
        const bool matches = way->output == reference;
        std::printf("%s matches the CPU reference: %s\n", way->name, tegra::yesNo(matches));
        verdict.check((std::string(way->name) + " matches the CPU reference").c_str(), matches);
        agree = agree && matches;
        measured.push_back(way);
    }
    std::printf("pipelines agree: %s\n", tegra::yesNo(agree));
    for (const Way* way : measured)
        std::printf("%s, median of %d passes: %.3f ms\n", way->name, passes, way->medianMs);
    for (const Way* way : measured)
        if (way != &dgpu) std::printf("%s / dGPU way: %.2fx\n", way->name, way->medianMs / dgpu.medianMs);
    printVerdict(measured, integrated != 0);
    if (bench)
        for (const Way* way : measured)
            std::printf("bench: image pipeline 1024x1024, %s = %.3f ms\n", way->name, way->medianMs);

    course::printStep(6, "release and check");
    CHECK_DRIVER(cuMemFree(s.c));
    CHECK_DRIVER(cuMemFree(s.b));
    CHECK_DRIVER(cuStreamDestroy(s.stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuCtxDestroy(context));
    return verdict.finish();
}
