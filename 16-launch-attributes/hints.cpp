// Lesson 16, program 4 — hints, and an attribute that is not one: the memory sync domain.
//
// Some attributes change what a launch means (clusters, cooperative, programmatic
// serialization: programs 1-3), and the driver refuses a launch it cannot carry out as
// asked. Others only tell the driver and the hardware what would help: a priority, an L2
// access policy window. Those are accepted and give the same result; nothing says whether
// they were acted on. The memory synchronization domain is neither: it changes what a
// memory fence inside the kernel orders. cuda.h: kernels in different domains are
// "system-scope distanced", so a GPU-scope fence no longer orders memory between them. This
// program launches one small kernel (no fences, read by the host after a stream
// synchronize) with each attribute, checks every result, and shows which values the driver
// checks.
//
//   hints               the steps, with their checks
//   hints --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "launch_helpers.h"

#if CUDA_VERSION >= 12000
namespace {

constexpr int kCount = 1 << 20;  // 4 MiB of ints
constexpr unsigned int kThreads = 256;

// Launches fill_index with one attribute (or none), prints what the driver returned and,
// when it accepted the launch, whether the kernel's output is right (allCorrect collects it).
struct Launcher {
    CUfunction kernel;
    CUdeviceptr out;
    CUstream stream;
    int launches = 0;  // each launch writes i + launches: an old result cannot pass
    bool allCorrect = true;

    bool launch(const char* label, const CUlaunchAttribute* attribute) {
        int n = kCount;
        int value = ++launches;
        CUlaunchAttribute copy = attribute != nullptr ? *attribute : CUlaunchAttribute{};
        CUlaunchConfig config =
            lesson16::launchConfig(kCount / kThreads, kThreads, stream, &copy, attribute != nullptr ? 1 : 0);
        void* params[] = {&out, &n, &value};
        const CUresult result = REPORT_DRIVER(cuLaunchKernelEx(&config, kernel, params, nullptr));
        if (result != CUDA_SUCCESS) {
            std::printf("%s: %s, not launched\n", label, course::driverErrorName(result));
            return false;
        }
        const std::vector<int> values = lesson16::copyBack(out, kCount, stream);
        bool correct = true;
        for (int i = 0; i < kCount; ++i) correct = correct && values[static_cast<size_t>(i)] == i + value;
        std::printf("%s: CUDA_SUCCESS, result %s\n", label, correct ? "correct" : "WRONG");
        allCorrect = allCorrect && correct;
        return true;
    }
};

CUlaunchAttribute priority(int value) {
    CUlaunchAttribute attribute{};
    attribute.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attribute.value.priority = value;
    return attribute;
}

// An L2 window over the first `bytes` of `base`: hits persist, misses stream. Lines marked
// persisting stay in L2's set-aside after the kernel, for later kernels too, until
// cuCtxResetPersistingL2Cache (or the hardware) returns them to normal.
CUlaunchAttribute accessWindow(CUdeviceptr base, size_t bytes) {
    CUlaunchAttribute attribute{};
    attribute.id = CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
    attribute.value.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(base);
    attribute.value.accessPolicyWindow.num_bytes = bytes;
    attribute.value.accessPolicyWindow.hitRatio = 1.0f;
    attribute.value.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
    attribute.value.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
    return attribute;
}

}  // namespace
#endif

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    course::printStep(1, "initialise, read the limits the attributes refer to");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", ordinal, name);
#if CUDA_VERSION < 12000
    return lesson16::skipForOldHeaders("launch attribute hints");
#else
    int maxWindow = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&maxWindow, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, device));
    int syncDomains = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&syncDomains, CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT, device));
    std::printf("max access policy window: %d bytes\n", maxWindow);
    std::printf("memory synchronization domains: %d\n", syncDomains);

    course::printStep(2, "retain the primary context, load the kernel, allocate");
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("launch_kernels.fatbin").c_str()));
    CUfunction kernel = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&kernel, module, "fill_index"));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr out = 0;
    CHECK_DRIVER(cuMemAlloc(&out, kCount * sizeof(int)));
    // Priorities are per context: the range is known only with a context current.
    int leastPriority = 0;
    int greatestPriority = 0;
    CHECK_DRIVER(cuCtxGetStreamPriorityRange(&leastPriority, &greatestPriority));
    std::printf("stream priority range: %d (least) to %d (greatest)\n", leastPriority, greatestPriority);
    size_t persistingL2 = 0;
    CHECK_DRIVER(cuCtxGetLimit(&persistingL2, CU_LIMIT_PERSISTING_L2_CACHE_SIZE));
    std::printf("persisting L2 set-aside: %zu bytes\n", persistingL2);

    course::printStep(3, "no attribute: cuLaunchKernelEx as cuLaunchKernel");
    Launcher launcher{kernel, out, stream};
    launcher.launch("no attribute", nullptr);

    // Step 4: hints. Accepted, same result. The window asks L2 to keep these lines in its
    // persisting set-aside (the context limit read above); whether any line stays there is
    // the hardware's business, and nothing reports it. Lines that did persist would stay
    // for every later kernel: reset them once the work that wanted them is done.
    course::printStep(4, "hints: accepted, the same result, no promise");
    CUlaunchAttribute attribute = priority(greatestPriority);
    verdict.check("a priority hint accepted", launcher.launch("PRIORITY greatest", &attribute));
    attribute = accessWindow(out, std::min<size_t>(kCount * sizeof(int), static_cast<size_t>(maxWindow)));
    verdict.check("an access policy window within the maximum accepted",
                  launcher.launch("ACCESS_POLICY_WINDOW", &attribute));
    if (maxWindow > 0) {  // a device without access policy windows has no persisting lines
        CHECK_DRIVER(cuCtxResetPersistingL2Cache());
        std::printf("persisting L2 lines reset (cuCtxResetPersistingL2Cache)\n");
    }

    // Step 5: not a hint. In the remote domain a GPU-scope fence in this kernel would no
    // longer order its writes for kernels of the default domain (cuda.h: "system-scope
    // distanced"); a kernel that hands data to another one while both run must then use
    // system-scope fences. fill_index uses no fence and the host reads it after a stream
    // synchronize, so its result is the same; what changed cannot be seen here.
    course::printStep(5, "a memory sync domain: what fences order, not a hint");
    attribute = CUlaunchAttribute{};
    attribute.id = CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN;
    attribute.value.memSyncDomain = CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE;
    verdict.check("the remote memory sync domain accepted", launcher.launch("MEM_SYNC_DOMAIN remote", &attribute));

    // Step 6: values outside what the device reports. A priority beyond the range is
    // accepted (for streams the documentation says it is clamped into the range; a launch
    // gives no way to tell); a window larger than the device's maximum is refused.
    course::printStep(6, "values outside the device's limits");
    attribute = priority(greatestPriority - 100);
    launcher.launch("PRIORITY beyond the greatest", &attribute);
    attribute = accessWindow(out, static_cast<size_t>(maxWindow) + 1);
    verdict.check("an access policy window above the maximum refused",
                  !launcher.launch("ACCESS_POLICY_WINDOW above the max", &attribute));
    verdict.check("every accepted launch wrote the right result", launcher.allCorrect);

    course::printStep(7, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(out));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: buffer, stream, module, primary context\n");
    return verdict.finish();
#endif
}
