// Lesson 21, program 1 — errors that leave the context usable, and errors that do not.
//
// A call the driver refuses before any work reaches the GPU returns its error. Observed on NVIDIA
// H100 80GB HBM3: a launch with more threads per block than the device allows was refused with
// CUDA_ERROR_INVALID_VALUE (cuLaunchKernel's documentation names no code for it), and the next good
// launch ran. A kernel that faults is different. cuda.h says of CUDA_ERROR_ILLEGAL_ADDRESS (and of
// most other errors a kernel raises): "This leaves the process in an inconsistent state and any
// further CUDA work will return the same error. To continue using CUDA, the process must be
// terminated and relaunched." So the faulting kernel runs in a child: this program started again.
// The child shows its later calls failing with the same error, then what destroying its context and
// making new ones did on this GPU and driver (an observation, not a documented recovery); the
// parent checks the child's report and checks that its own context still works (cuda.h speaks of
// the faulting process only and promises nothing about other processes: this is what the run shows,
// not a guarantee).
//
//   sticky_errors               the steps, with their checks
//   sticky_errors --device N    another GPU
//   sticky_errors --child 1     the child (started by the program itself, not by hand)
#include <cuda.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "children.h"
#include "lesson21.h"

namespace {

constexpr int kPoisonRole = 1;
constexpr unsigned long long kWords = 1024;
// The child's labels, which the parent reads back.
constexpr const char* kStoreLaunch = "cuLaunchKernel of the out-of-bounds store";
constexpr const char* kFirstError = "first error (cuCtxSynchronize after the store)";
constexpr const char* kLaterCalls[] = {"cuMemAlloc after it", "cuMemcpyHtoD after it",
                                       "cuLaunchKernel of a healthy kernel after it", "cuCtxSynchronize again"};
constexpr const char* kDeviceName = "cuDeviceGetName after it (asks the device, not the context)";
constexpr const char* kDestroyed = "cuDevicePrimaryCtxRelease (the last reference: the context is destroyed)";
constexpr const char* kReset = "cuDevicePrimaryCtxReset";
constexpr const char* kRetained = "cuDevicePrimaryCtxRetain (a new primary context)";
constexpr const char* kCreated = "cuCtxCreate (a new ordinary context)";
// The lines the child prints whatever each call answers: one for every step it takes.
constexpr const char* kEveryStep[] = {kStoreLaunch,   kFirstError,    kLaterCalls[0], kLaterCalls[1],
                                      kLaterCalls[2], kLaterCalls[3], kDeviceName,    kDestroyed,
                                      kReset,         kRetained,      kCreated};
constexpr const char* kNewPrimary = "a healthy kernel in the new primary context";
constexpr const char* kNewOrdinary = "a healthy kernel in the new ordinary context";

CUresult launchFill(CUfunction fill, CUdeviceptr words, unsigned int seed, unsigned int threads) {
    unsigned long long count = kWords;
    void* params[] = {&words, &count, &seed};
    return cuLaunchKernel(fill, lesson21::blocksFor(kWords), 1, 1, threads, 1, 1, 0, nullptr, params, nullptr);
}

// fillPattern with `seed`, then the words back: how many hold the pattern.
size_t fillAndCount(CUfunction fill, CUdeviceptr words, unsigned int seed) {
    CHECK_DRIVER(launchFill(fill, words, seed, lesson21::kThreads));
    std::vector<unsigned int> host(kWords);
    CHECK_DRIVER(cuMemcpyDtoH(host.data(), words, kWords * sizeof(unsigned int)));
    return lesson21::wordsHolding(host, seed, 0);
}

// In the current context: the module, a buffer, fillPattern, the words back. "ran, N of N words
// hold the pattern", or the first call that failed and its answer. (After a failure the module and
// the buffer are left to the context's destruction, which takes them with it.)
std::string healthyRun() {
    CUmodule module = nullptr;
    CUfunction fill = nullptr;
    CUdeviceptr words = 0;
    std::vector<unsigned int> host(kWords);
    const char* call = "cuModuleLoad";
    CUresult result = cuModuleLoad(&module, lesson21::faultsModulePath().c_str());
    if (result == CUDA_SUCCESS) {
        call = "cuModuleGetFunction";
        result = cuModuleGetFunction(&fill, module, "fillPattern");
    }
    if (result == CUDA_SUCCESS) {
        call = "cuMemAlloc";
        result = cuMemAlloc(&words, kWords * sizeof(unsigned int));
    }
    if (result == CUDA_SUCCESS) {
        call = "cuLaunchKernel";
        result = launchFill(fill, words, 0x21u, lesson21::kThreads);
    }
    if (result == CUDA_SUCCESS) {
        call = "cuMemcpyDtoH";
        result = cuMemcpyDtoH(host.data(), words, kWords * sizeof(unsigned int));
    }
    if (result != CUDA_SUCCESS) return std::string(call) + " returned " + course::driverErrorName(result);
    CHECK_DRIVER(cuMemFree(words));
    CHECK_DRIVER(cuModuleUnload(module));
    return "ran, " + std::to_string(lesson21::wordsHolding(host, 0x21u, 0)) + " of " + std::to_string(kWords) +
           " words hold the pattern";
}

// The child: a kernel stores 1 TiB past its buffer; then every later call, and a rebuilt context.
int poisonedChild(int ordinal) {
    children::beginChild();
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, lesson21::faultsModulePath().c_str()));
    CUfunction storeAt = nullptr;
    CUfunction fill = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&storeAt, module, "storeAt"));
    CHECK_DRIVER(cuModuleGetFunction(&fill, module, "fillPattern"));
    CUdeviceptr words = 0;
    CHECK_DRIVER(cuMemAlloc(&words, kWords * sizeof(unsigned int)));

    long long index = lesson21::kFarIndex;
    unsigned int value = 7;
    void* params[] = {&words, &index, &value};
    lesson21::show(kStoreLaunch, cuLaunchKernel(storeAt, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    lesson21::show(kFirstError, cuCtxSynchronize());
    CUdeviceptr more = 0;
    std::vector<unsigned int> host(kWords, 0);
    lesson21::show(kLaterCalls[0], cuMemAlloc(&more, 4096));
    lesson21::show(kLaterCalls[1], cuMemcpyHtoD(words, host.data(), kWords * sizeof(unsigned int)));
    lesson21::show(kLaterCalls[2], launchFill(fill, words, 0x21u, lesson21::kThreads));
    lesson21::show(kLaterCalls[3], cuCtxSynchronize());
    char name[256] = {};
    // Only an observation: cuDeviceGetName answered CUDA_SUCCESS on NVIDIA H100 80GB HBM3. cuda.h
    // makes no exception for calls about the device ("any further CUDA work will return the same
    // error"), and marks cuDeviceGetName too as one that may return errors of earlier launches.
    lesson21::show(kDeviceName, cuDeviceGetName(name, sizeof(name), device));

    // Not a documented recovery: what this GPU and driver did. Releasing the last reference
    // destroys the primary context, and the module and the buffer made in it go with it.
    std::printf("observed on this GPU and driver (cuda.h promises only a new process):\n");
    lesson21::show(kDestroyed, cuDevicePrimaryCtxRelease(device));
    lesson21::show(kReset, cuDevicePrimaryCtxReset(device));
    CUcontext fresh = nullptr;
    if (lesson21::show(kRetained, cuDevicePrimaryCtxRetain(&fresh, device)) == CUDA_SUCCESS) {
        if (lesson21::show("cuCtxSetCurrent", cuCtxSetCurrent(fresh)) == CUDA_SUCCESS)
            std::printf("%s: %s\n", kNewPrimary, healthyRun().c_str());
        lesson21::show("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease(device));
    }
    CUcontext created = nullptr;
    if (lesson21::show(kCreated, course::ctxCreate(&created, 0, device)) == CUDA_SUCCESS) {
        std::printf("%s: %s\n", kNewOrdinary, healthyRun().c_str());
        lesson21::show("cuCtxDestroy", cuCtxDestroy(created));
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device", "--child"}, "[--device N]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    if (args.values.count("--child") != 0) {
        if (args.valueOr("--child", 0) == kPoisonRole) return poisonedChild(ordinal);
        std::fprintf(stderr, "%s: no child role %lld (this program's child is started by the program itself)\n",
                     argv[0], args.valueOr("--child", 0));
        return course::kExitUsage;
    }
    course::Verdict verdict;

    course::printStep(1, "initialise the driver, a context, the module and a buffer");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    lesson21::describeDevice(ordinal, &device);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, lesson21::faultsModulePath().c_str()));
    CUfunction fill = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&fill, module, "fillPattern"));
    CUdeviceptr words = 0;
    CHECK_DRIVER(cuMemAlloc(&words, kWords * sizeof(unsigned int)));
    CHECK_DRIVER(cuMemsetD32(words, 0, kWords));
    int maxThreads = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&maxThreads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device));
    std::printf("threads per block at most (CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK): %d\n", maxThreads);

    // Step 2: the launch is refused before anything reaches the GPU; nothing else changes.
    course::printStep(2, "a non-sticky error: an invalid launch, then a good one");
    const unsigned int tooMany = 2u * static_cast<unsigned int>(maxThreads);
    const CUresult refused = REPORT_DRIVER(launchFill(fill, words, 0x0au, tooMany));
    std::printf("cuLaunchKernel with %u threads per block: %s\n", tooMany, course::driverErrorName(refused));
    verdict.check("an invalid launch is refused with CUDA_ERROR_INVALID_VALUE", refused == CUDA_ERROR_INVALID_VALUE);
    const CUresult afterRefusal = lesson21::show("cuCtxSynchronize after it", cuCtxSynchronize());
    const size_t holding = fillAndCount(fill, words, 0x0au);
    std::printf("good launch after it: %zu of %llu words hold the pattern\n", holding, kWords);
    verdict.check("the context still works after the non-sticky error",
                  afterRefusal == CUDA_SUCCESS && holding == kWords);

    // Step 3: the child's output comes back line by line, marked [child].
    course::printStep(3, "a sticky error, in a child process: a kernel stores out of bounds");
    children::Child child = children::startSelf(kPoisonRole, ordinal);
    const std::string ended = children::finish(child);
    std::printf("child: %s\n", ended.c_str());
    const std::string first = children::valueOf(child, kFirstError);
    verdict.check("the out-of-bounds store gives CUDA_ERROR_ILLEGAL_ADDRESS", first == "CUDA_ERROR_ILLEGAL_ADDRESS");
    bool allSame = !first.empty();
    for (const char* label : kLaterCalls) allSame = allSame && children::valueOf(child, label) == first;
    verdict.check("every later call in the child's context returns that error", allSame);
    // The exit code alone says nothing: the child returns 0 whatever its calls answered. Every
    // step's line must be there too.
    bool reported = ended == "exit code 0";
    for (const char* label : kEveryStep) reported = reported && !children::valueOf(child, label).empty();
    verdict.check("the child reported every step and exited 0", reported);
    const bool recovered = children::valueOf(child, kNewPrimary).rfind("ran", 0) == 0 ||
                           children::valueOf(child, kNewOrdinary).rfind("ran", 0) == 0;
    std::printf("a new context inside the poisoned process ran a healthy kernel (observed here): %s\n",
                recovered ? "yes" : "no");

    // Step 4: whether another process's fault reached this one's context: the buffer of step 2
    // should be intact, and a new launch should work on it.
    course::printStep(4, "the parent's own context, after the child's fault");
    CUfunction addOne = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&addOne, module, "addOne"));
    unsigned long long count = kWords;
    void* params[] = {&words, &count};
    CHECK_DRIVER(cuLaunchKernel(addOne, lesson21::blocksFor(kWords), 1, 1, lesson21::kThreads, 1, 1, 0, nullptr, params,
                                nullptr));
    std::vector<unsigned int> host(kWords);
    CHECK_DRIVER(cuMemcpyDtoH(host.data(), words, kWords * sizeof(unsigned int)));
    const size_t holdingAfter = lesson21::wordsHolding(host, 0x0au, 1);
    std::printf("step 2's buffer after a new launch of addOne: %zu of %llu words hold the pattern + 1\n", holdingAfter,
                kWords);
    verdict.check("the parent's context still works after the child's fault", holdingAfter == kWords);

    course::printStep(5, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(words));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("buffer, module and primary context: released\n");
    return verdict.finish();
}
