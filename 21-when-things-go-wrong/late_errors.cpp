// Lesson 21, program 2 — errors arrive late, and the errors device code raises on purpose.
//
// cuLaunchKernel queues the kernel and returns. Among its codes cuda.h lists CUDA_ERROR_LAUNCH_FAILED
// and _LAUNCH_TIMEOUT, and it marks the call \notefnerr: the Driver API reference's note that it
// "may also return error codes from previous, asynchronous launches". What the kernel it has just
// queued does, it cannot report unless the launch waits for the kernel (CUDA_LAUNCH_BLOCKING=1,
// below). That kernel's error comes back from a later call:
// cuda.h says of cuCtxSynchronize that it "returns an error if one of the preceding tasks failed",
// and of a sticky error that "any further CUDA work will return the same error". Observed on
// NVIDIA H100 80GB HBM3: a blocking copy of another buffer, one the kernel never touches, returned
// it (with GPU coredumps on, cuCtxSynchronize returned CUDA_SUCCESS instead: coredump.cpp).
// CUDA_LAUNCH_BLOCKING is an environment variable of the CUDA C++ Programming Guide (its
// appendix on environment variables), not of cuda.h; with it set to 1, the launch returned the
// kernel's error itself here. Then a device-side assert() and __trap(): the codes they end a
// kernel with (cuda.h names CUDA_ERROR_ASSERT for the assert; no header says which code a trap
// gives), and the lines the kernel printed, which the driver delivers from the device's printf
// buffer (CU_LIMIT_PRINTF_FIFO_SIZE) at the call that synchronises. The fault, the assert and (as
// observed here) the trap leave errors that cuda.h documents as sticky, so each runs in a child of
// its own.
//
//   late_errors               the steps, with their checks
//   late_errors --device N    another GPU
//   late_errors --child R     a child, role 1 to 4 (started by the program itself, not by hand)
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "children.h"
#include "lesson21.h"

namespace {

enum Role : int { kLate = 1, kLateBlocking = 2, kAssert = 3, kTrap = 4 };
// The kernel stops waiting for the host's flag after 10 s (kernels/faults.cu).
constexpr unsigned long long kFlagTimeoutNs = 10'000'000'000ull;
constexpr const char* kLaunch = "cuLaunchKernel";
constexpr const char* kQuery = "cuStreamQuery right after it (the kernel waits for the flag)";
constexpr const char* kSameAllocation = "the copy's buffer is the kernel's allocation (cuMemGetAddressRange)";
constexpr const char* kUnrelated = "cuMemcpyDtoH of another buffer, one the kernel never touches";
constexpr const char* kSynchronize = "cuCtxSynchronize (the kernel's printf lines come out first)";

// A child's start: the driver, the primary context and the lesson's module.
CUmodule childSetUp(int ordinal, CUdevice* device) {
    children::beginChild();
    CHECK_DRIVER(cuInit(0));
    CHECK_DRIVER(cuDeviceGet(device, ordinal));
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, *device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, lesson21::faultsModulePath().c_str()));
    return module;
}

// Roles 1 and 2: a kernel that waits for a flag in mapped host memory, then stores out of bounds.
int lateChild(int ordinal, bool launchBlocks) {
    CUdevice device = 0;
    CUmodule module = childSetUp(ordinal, &device);
    CUfunction kernel = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&kernel, module, "storeAtWhenFlagged"));
    void* flagMemory = nullptr;
    CHECK_DRIVER(cuMemHostAlloc(&flagMemory, sizeof(int), CU_MEMHOSTALLOC_DEVICEMAP));
    volatile int* flag = static_cast<volatile int*>(flagMemory);
    *flag = 0;
    CUdeviceptr flagOnDevice = 0;
    CHECK_DRIVER(cuMemHostGetDevicePointer(&flagOnDevice, flagMemory, 0));
    CUdeviceptr words = 0;
    CUdeviceptr unrelated = 0;
    CHECK_DRIVER(cuMemAlloc(&words, 4096));
    CHECK_DRIVER(cuMemAlloc(&unrelated, 4096));
    // The buffer the late call copies. That it is another allocation than the kernel's is what
    // makes the call unrelated: the driver's own answer, asked before anything faults.
    const CUdeviceptr copied = unrelated;
    CUdeviceptr copiedBase = 0;
    CHECK_DRIVER(cuMemGetAddressRange(&copiedBase, nullptr, copied));
    std::printf("%s: %s\n", kSameAllocation, copiedBase == words ? "yes" : "no");
    const char* blocking = std::getenv("CUDA_LAUNCH_BLOCKING");
    std::printf("CUDA_LAUNCH_BLOCKING: %s\n", blocking != nullptr ? blocking : "(not set)");
    // With CUDA_LAUNCH_BLOCKING=1 the launch returned only when its kernel had ended (observed on the
    // H100): no one could set the flag meanwhile, so it is set first.
    if (launchBlocks) *flag = 1;
    long long index = lesson21::kFarIndex;
    unsigned long long timeout = kFlagTimeoutNs;
    void* params[] = {&flagOnDevice, &words, &index, &timeout};
    lesson21::show(kLaunch, cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    if (!launchBlocks) {
        lesson21::show(kQuery, cuStreamQuery(nullptr));
        *flag = 1;
        std::printf("host: flag set, the kernel goes on to its store\n");
    }
    unsigned int host[1024] = {};
    lesson21::show(kUnrelated, cuMemcpyDtoH(host, copied, sizeof(host)));
    // Destroying the context (its last reference) takes the module, the buffers and the pinned flag with it.
    lesson21::show("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease(device));
    return 0;
}

// Role 3: the printf FIFO's size, then a kernel that prints four values and asserts each is positive.
int assertChild(int ordinal) {
    CUdevice device = 0;
    size_t fifo = 0;
    CUmodule module = childSetUp(ordinal, &device);
    CHECK_DRIVER(cuCtxGetLimit(&fifo, CU_LIMIT_PRINTF_FIFO_SIZE));
    std::printf("printf FIFO (CU_LIMIT_PRINTF_FIFO_SIZE), default: %zu bytes\n", fifo);
    // Only before the first launch of a kernel that prints; the driver may round the value.
    CHECK_DRIVER(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 64 * 1024));
    CHECK_DRIVER(cuCtxGetLimit(&fifo, CU_LIMIT_PRINTF_FIFO_SIZE));
    std::printf("printf FIFO after cuCtxSetLimit(64 KiB): %zu bytes\n", fifo);
    CUfunction kernel = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&kernel, module, "assertPositive"));
    const int values[] = {3, 2, 1, 0};
    CUdeviceptr onDevice = 0;
    CHECK_DRIVER(cuMemAlloc(&onDevice, sizeof(values)));
    CHECK_DRIVER(cuMemcpyHtoD(onDevice, values, sizeof(values)));
    int count = 4;
    void* params[] = {&onDevice, &count};
    lesson21::show(kLaunch, cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    lesson21::show(kSynchronize, cuCtxSynchronize());
    CUdeviceptr more = 0;
    lesson21::show("cuMemAlloc after it", cuMemAlloc(&more, 4096));
    lesson21::show("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease(device));
    return 0;
}

// Role 4: a kernel that prints a line and executes __trap().
int trapChild(int ordinal) {
    CUdevice device = 0;
    CUmodule module = childSetUp(ordinal, &device);
    CUfunction kernel = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&kernel, module, "trapAfterPrinting"));
    lesson21::show(kLaunch, cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
    lesson21::show(kSynchronize, cuCtxSynchronize());
    lesson21::show("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease(device));
    return 0;
}

// Starts a child, prints its lines as they come, reaps it. CUDA_LAUNCH_BLOCKING is the parent's to
// choose for each child: whatever the parent's own environment holds is not passed on.
children::Child runChild(int role, int ordinal, bool launchBlocking) {
    children::Environment environment;
    if (launchBlocking)
        environment.set = {"CUDA_LAUNCH_BLOCKING=1"};
    else
        environment.unset = {"CUDA_LAUNCH_BLOCKING"};
    children::Child child = children::startSelf(role, ordinal, environment);
    std::printf("child: %s\n", children::finish(child).c_str());
    return child;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device", "--child"}, "[--device N]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    if (args.values.count("--child") != 0) {
        switch (args.valueOr("--child", 0)) {
            case kLate: return lateChild(ordinal, false);
            case kLateBlocking: return lateChild(ordinal, true);
            case kAssert: return assertChild(ordinal);
            case kTrap: return trapChild(ordinal);
            default:
                std::fprintf(stderr, "%s: no child role %lld (children are started by the program itself)\n", argv[0],
                             args.valueOr("--child", 0));
                return course::kExitUsage;
        }
    }
    course::Verdict verdict;

    course::printStep(1, "initialise the driver");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    lesson21::describeDevice(ordinal, &device);

    // Step 2: the kernel waits for the child's host code to set a flag, so what happens between
    // the launch and the fault is not left to timing.
    course::printStep(2, "a kernel's error arrives late, on an unrelated call");
    const children::Child late = runChild(kLate, ordinal, false);
    verdict.check("the launch returns CUDA_SUCCESS before the kernel has completed",
                  children::valueOf(late, kLaunch) == "CUDA_SUCCESS");
    // cuda.h: CUDA_ERROR_NOT_READY means the operations "have not completed yet".
    verdict.check("cuStreamQuery after the launch: CUDA_ERROR_NOT_READY (not completed)",
                  children::valueOf(late, kQuery) == "CUDA_ERROR_NOT_READY");
    verdict.check("the late call copies another allocation than the kernel's",
                  children::valueOf(late, kSameAllocation) == "no");
    verdict.check("an unrelated later call returns the kernel's CUDA_ERROR_ILLEGAL_ADDRESS",
                  children::valueOf(late, kUnrelated) == "CUDA_ERROR_ILLEGAL_ADDRESS");

    course::printStep(3, "the same kernel with CUDA_LAUNCH_BLOCKING=1");
    const children::Child blocking = runChild(kLateBlocking, ordinal, true);
    verdict.check("with CUDA_LAUNCH_BLOCKING=1 the launch itself returns the kernel's error",
                  children::valueOf(blocking, kLaunch) == "CUDA_ERROR_ILLEGAL_ADDRESS");

    course::printStep(4, "a device-side assert(), and the device's printf buffer");
    const children::Child asserted = runChild(kAssert, ordinal, false);
    verdict.check("a failed device assert returns CUDA_ERROR_ASSERT",
                  children::valueOf(asserted, kSynchronize) == "CUDA_ERROR_ASSERT");
    // The order of the child's lines: what the kernel printed came out before cuCtxSynchronize
    // returned (the child prints that call's line when it has returned).
    verdict.check("the kernel's printf lines and the assert's message come out before cuCtxSynchronize returns",
                  children::printedBefore(asserted, "device printf: values[3] = 0", kSynchronize) &&
                      children::printedBefore(asserted, "Assertion", kSynchronize) &&
                      children::printed(asserted, "values[i] > 0"));

    course::printStep(5, "__trap()");
    const children::Child trapped = runChild(kTrap, ordinal, false);
    // Any error: no header says which code a trap ends a kernel with.
    const std::string trapResult = children::valueOf(trapped, kSynchronize);
    verdict.check("__trap() stops the kernel with an error", trapResult.rfind("CUDA_ERROR_", 0) == 0);
    verdict.check("the line printed before __trap() comes out before cuCtxSynchronize returns",
                  children::printedBefore(trapped, "device printf: calling __trap()", kSynchronize));

    course::printStep(6, "check");
    return verdict.finish();
}
