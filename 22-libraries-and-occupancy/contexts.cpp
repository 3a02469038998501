// Lesson 22, program 2 — one CUkernel in several contexts, and what lazy loading does.
//
// A library is loaded once, with no context current. Each context that uses it gets the
// library's code as a module of its own (cuLibraryGetModule), a CUfunction of its own for each
// kernel (cuKernelGetFunction), and its own copy of each global (cuLibraryGetGlobal). This
// program loads the library, then uses it from the primary context, from a second context on the
// same GPU and, where there is one, from the primary context of a second GPU. With lazy loading
// a context's functions reach its GPU only when needed; cuFuncIsLoaded tells whether one has,
// cuFuncLoad loads it now. --bench times loading and first launches in both loading modes.
//
//   contexts               the steps, with their checks
//   contexts --device N    another GPU first (the second GPU is the next ordinal)
//   contexts --bench       also the timings, from two runs of this program (EAGER, LAZY)
#include <cuda.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "lesson22.h"
#include "load_timing.h"

namespace {

// A context this program uses the library from, and what the library gave it there.
struct ContextUse {
    CUcontext context = nullptr;
    CUdevice device = 0;
    int ordinal = 0;
    bool primary = true;
    CUmodule module = nullptr;      // the library's module in this context
    CUfunction function = nullptr;  // addOffset's function in this context
    CUdeviceptr out = 0;            // this context's output buffer
};

// "Module loading mode is controlled by CUDA_MODULE_LOADING env variable" (cuda.h:7490); cuda.h
// refers to the CUDA programming guide for it (7892-7893) and does not say when the driver reads
// it. Unless the environment chose a mode, this program sets LAZY before cuInit, its first driver
// call, so that the states it prints do not depend on the driver's default; step 1 then prints
// the mode cuModuleGetLoadingMode reports, which shows whether the driver took it.
void chooseLoadingMode() {
    if (const char* chosen = std::getenv("CUDA_MODULE_LOADING")) {
        std::printf("CUDA_MODULE_LOADING: %s (from the environment)\n", chosen);
        return;
    }
    if (setenv("CUDA_MODULE_LOADING", "LAZY", 1) != 0) {
        std::printf("CUDA_MODULE_LOADING: not set (setenv: %s); the driver's default applies\n", std::strerror(errno));
        return;
    }
    std::printf("CUDA_MODULE_LOADING: LAZY (set by this program before cuInit)\n");
}

#if CUDA_VERSION >= 12040
constexpr int kElements = 4096;
constexpr unsigned int kLaunchesStart = 100;  // gLaunches before step 6's launches (the image holds 0)

// The value context i writes into its gOffset in step 6.
int tagOf(size_t i) {
    return 1000 * static_cast<int>(i + 1);
}

unsigned int loadedCount(const std::vector<CUfunction>& functions) {
    unsigned int loaded = 0;
    for (CUfunction function : functions) {
        CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_UNLOADED;
        CHECK_DRIVER(cuFuncIsLoaded(&state, function));
        loaded += state == CU_FUNCTION_LOADING_STATE_LOADED ? 1 : 0;
    }
    return loaded;
}

// What step 4 found in one context: how many functions, and how many cuFuncIsLoaded called
// loaded before and after cuFuncLoad.
struct LoadCounts {
    unsigned int count = 0;
    unsigned int before = 0;
    unsigned int after = 0;
};

// Step 4 in one context: the library's module there, its functions (cuModuleEnumerateFunctions
// may return them "partially loaded" with lazy loading, cuda.h:7553), how many are loaded, and
// how many after cuFuncLoad ("Finalizes function loading", cuda.h:17403). cuLibraryGetModule
// returns CUDA_ERROR_NOT_FOUND "If module handle is not found" (cuda.h:8088); cuda.h does not say
// whether under LAZY a context has one before any launch there, and CHECK_DRIVER ends the run if not.
LoadCounts loadEveryFunction(ContextUse& use, CUlibrary library, size_t index) {
    CHECK_DRIVER(cuCtxPushCurrent(use.context));
    CHECK_DRIVER(cuLibraryGetModule(&use.module, library));
    unsigned int count = 0;
    CHECK_DRIVER(cuModuleGetFunctionCount(&count, use.module));
    std::vector<CUfunction> functions(count);
    CHECK_DRIVER(cuModuleEnumerateFunctions(functions.data(), count, use.module));
    const unsigned int before = loadedCount(functions);
    for (CUfunction function : functions) CHECK_DRIVER(cuFuncLoad(function));
    const unsigned int after = loadedCount(functions);
    CHECK_DRIVER(cuCtxPopCurrent(nullptr));
    std::printf("context %zu functions loaded: %u of %u before cuFuncLoad, %u of %u after\n", index, before, count,
                after, count);
    return {count, before, after};
}

// Step 4 in every context, and its check. Where every function was loaded before cuFuncLoad
// (EAGER, say), the calls had nothing to do and the check cannot tell whether they ran: SKIP.
void loadInEveryContext(course::Verdict& verdict, std::vector<ContextUse>& uses, CUlibrary library) {
    bool allLoaded = true;
    bool anyUnloaded = false;
    for (size_t i = 0; i < uses.size(); ++i) {
        const LoadCounts counts = loadEveryFunction(uses[i], library, i);
        allLoaded = allLoaded && counts.count > 0 && counts.after == counts.count;
        anyUnloaded = anyUnloaded || counts.before < counts.count;
    }
    const char* name = "cuFuncLoad loaded every function in every context";
    if (anyUnloaded)
        verdict.check(name, allLoaded);
    else
        std::printf("check %s: SKIP (every function was loaded before cuFuncLoad)\n", name);
}

// Step 6, first half, in one context: this context's copy of gOffset (cuLibraryGetGlobal
// answers for the current context), set to `tag`. Returns its address.
CUdeviceptr writeOwnGlobal(const ContextUse& use, CUlibrary library, int tag) {
    CHECK_DRIVER(cuCtxPushCurrent(use.context));
    CUdeviceptr global = 0;
    CHECK_DRIVER(cuLibraryGetGlobal(&global, nullptr, library, "gOffset"));
    CHECK_DRIVER(cuMemcpyHtoD(global, &tag, sizeof(tag)));
    CHECK_DRIVER(cuCtxPopCurrent(nullptr));
    return global;
}

// gLaunches as the host sees it: the pointer cuLibraryGetManaged gives in context 0 ("managed
// memory for library library is shared across devices", cuda.h:8200). nullptr where a device
// used here cannot allocate managed memory (lesson22::managedMemory): the host then leaves it alone.
unsigned int* hostLaunchCounter(const std::vector<ContextUse>& uses, CUlibrary library) {
    for (const ContextUse& use : uses)
        if (!lesson22::managedMemory(use.device)) return nullptr;
    CUdeviceptr address = 0;
    CHECK_DRIVER(cuCtxPushCurrent(uses[0].context));
    CHECK_DRIVER(cuLibraryGetManaged(&address, nullptr, library, "gLaunches"));
    CHECK_DRIVER(cuCtxPopCurrent(nullptr));
    return reinterpret_cast<unsigned int*>(address);
}

// Step 6, second half, in one context: the CUkernel launched here (with a NULL stream the launch
// goes to the current context, cuda.h:17492-17496) into a buffer of this context; the number of
// elements that came out as i + tag. The copy back waits for the kernel.
int launchHere(ContextUse& use, CUkernel kernel, int tag) {
    CHECK_DRIVER(cuCtxPushCurrent(use.context));
    CHECK_DRIVER(cuMemAlloc(&use.out, kElements * sizeof(int)));
    int n = kElements;
    void* params[] = {&use.out, &n};
    CHECK_DRIVER(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), kElements / 256, 1, 1, 256, 1, 1, 0, nullptr,
                                params, nullptr));
    std::vector<int> host(kElements);
    CHECK_DRIVER(cuMemcpyDtoH(host.data(), use.out, kElements * sizeof(int)));
    CHECK_DRIVER(cuCtxPopCurrent(nullptr));
    int correct = 0;
    for (int i = 0; i < kElements; ++i) correct += host[i] == i + tag ? 1 : 0;
    return correct;
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench", "--load-timing"}, {"--device"},
                                "[--device N] [--bench]  (--load-timing: one timed run, started by --bench)", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    if (args.has("--load-timing")) return lesson22::loadTimingChild(ordinal);

    course::printStep(1, "choose the loading mode, initialise, check the versions");
    chooseLoadingMode();
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    lesson22::printDevice(device, ordinal);
    const std::string shortfall = lesson22::versionShortfall(lesson22::kLibraryVersionNeeded);
    if (!shortfall.empty()) return lesson22::skip(shortfall);
#if CUDA_VERSION >= 12040
    course::Verdict verdict;
    CUmoduleLoadingMode mode{};
    CHECK_DRIVER(cuModuleGetLoadingMode(&mode));
    std::printf("module loading mode: %s\n", mode == CU_MODULE_LAZY_LOADING ? "LAZY" : "EAGER");

    // Step 2: nothing is current yet: no context has been made or retained on this thread.
    course::printStep(2, "load the library with no context current");
    CUcontext current = nullptr;
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    std::printf("current context: %s\n", current == nullptr ? "none" : "one (unexpected)");
    CUlibrary library = nullptr;
    CHECK_DRIVER(cuLibraryLoadFromFile(&library, course::kernelPath("library_kernels.fatbin").c_str(), nullptr, nullptr,
                                       0, nullptr, nullptr, 0));
    CUkernel kernel = nullptr;
    CHECK_DRIVER(cuLibraryGetKernel(&kernel, library, "addOffset"));
    const char* kernelName = nullptr;
    CHECK_DRIVER(cuKernelGetName(&kernelName, kernel));
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    std::printf("cuLibraryGetKernel gave: %s; current context after loading: %s\n", kernelName,
                current == nullptr ? "none" : "one");

    // Step 3: the contexts. cuCtxCreate pushes the new context; it is popped at once, so that
    // every step below says which context it works in (push ... pop).
    course::printStep(3, "the contexts: primary, a second one on the same GPU, a second GPU");
    int deviceCount = 0;
    CHECK_DRIVER(cuDeviceGetCount(&deviceCount));
    std::vector<ContextUse> uses(2);
    uses[0].device = uses[1].device = device;
    uses[0].ordinal = uses[1].ordinal = ordinal;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&uses[0].context, device));
    CHECK_DRIVER(course::ctxCreate(&uses[1].context, 0, device));
    CHECK_DRIVER(cuCtxPopCurrent(nullptr));
    uses[1].primary = false;
    if (deviceCount >= 2) {
        ContextUse other;
        other.ordinal = (ordinal + 1) % deviceCount;
        CHECK_DRIVER(cuDeviceGet(&other.device, other.ordinal));
        CHECK_DRIVER(cuDevicePrimaryCtxRetain(&other.context, other.device));
        uses.push_back(other);
        std::printf("second GPU: device %d\n", other.ordinal);
    } else {
        std::printf("second GPU: none (%d device): the steps use two contexts of one GPU\n", deviceCount);
    }
    for (size_t i = 0; i < uses.size(); ++i)
        std::printf("context %zu: device %d, %s\n", i, uses[i].ordinal,
                    uses[i].primary ? "primary context" : "made with cuCtxCreate");
    // cuCtxCreate made its context current (pushed it); the pop above leaves nothing current, so
    // that the push ... pop of every later step is all that decides where a call goes.
    CHECK_DRIVER(cuCtxGetCurrent(&current));
    std::printf("current context after making them: %s\n", current == nullptr ? "none" : "one");
    verdict.check("no context is current once the contexts are made", current == nullptr);

    course::printStep(4, "lazy loading: each context's functions before and after cuFuncLoad");
    loadInEveryContext(verdict, uses, library);

    // Step 5: one CUkernel, one CUfunction per context, each in that context's module.
    course::printStep(5, "cuKernelGetFunction: the kernel's function in each context");
    bool ownModules = true;
    std::set<CUfunction> distinct;
    for (size_t i = 0; i < uses.size(); ++i) {
        CHECK_DRIVER(cuCtxPushCurrent(uses[i].context));
        CHECK_DRIVER(cuKernelGetFunction(&uses[i].function, kernel));
        CUmodule owner = nullptr;
        CHECK_DRIVER(cuFuncGetModule(&owner, uses[i].function));
        const char* name = nullptr;
        CHECK_DRIVER(cuFuncGetName(&name, uses[i].function));
        CHECK_DRIVER(cuCtxPopCurrent(nullptr));
        std::printf("context %zu function: %s, in %s\n", i, name,
                    owner == uses[i].module ? "this context's module of the library" : "another module");
        ownModules = ownModules && owner == uses[i].module;
        distinct.insert(uses[i].function);
    }
    std::printf("distinct CUfunction handles: %zu for %zu contexts\n", distinct.size(), uses.size());
    verdict.check("each context has its own function of the kernel, in its own module",
                  ownModules && distinct.size() == uses.size());

    // Step 6: every context writes its own gOffset first, and only then does any context launch:
    // one gOffset shared by all contexts would hold the last value written, and every context
    // but the last would get the wrong sum. gLaunches is a __managed__ variable: "managed memory
    // for library library is shared across devices" (cuda.h:8200), so it counts every launch. The
    // host starts it at kLaunchesStart, not at the 0 the image holds, so that the count shows the
    // host's write reached the variable the kernels count in.
    course::printStep(6, "each context's gOffset, and the same CUkernel launched in each");
    std::set<CUdeviceptr> globals;
    for (size_t i = 0; i < uses.size(); ++i) globals.insert(writeOwnGlobal(uses[i], library, tagOf(i)));
    std::printf("gOffset addresses: %zu distinct for %zu contexts\n", globals.size(), uses.size());
    unsigned int* launches = hostLaunchCounter(uses, library);
    if (launches != nullptr) *launches = kLaunchesStart;  // only while no kernel runs (see libraries.cpp)
    bool allRight = true;
    for (size_t i = 0; i < uses.size(); ++i) {
        const int correct = launchHere(uses[i], kernel, tagOf(i));
        std::printf("context %zu launch: gOffset set to %d, addOffset gave %d of %d elements = i + %d\n", i, tagOf(i),
                    correct, kElements, tagOf(i));
        allRight = allRight && correct == kElements;
    }
    verdict.check("the one CUkernel ran in every context, reading that context's own gOffset", allRight);
    const char* countName = "gLaunches, one managed variable for every context, counted every launch";
    if (launches != nullptr) {
        std::printf("gLaunches, set to %u from the host, after one launch in each of %zu contexts: %u\n",
                    kLaunchesStart, uses.size(), *launches);
        verdict.check(countName, *launches == kLaunchesStart + uses.size());
    } else {
        std::printf("check %s: SKIP (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY is 0 on a device used here)\n", countName);
    }

    course::printStep(7, "timings: library load and first launches, EAGER and LAZY");
    if (args.has("--bench"))
        lesson22::runLoadTimings(verdict, ordinal);
    else
        std::printf("timings: run with --bench\n");

    // Step 8: each buffer is freed in its own context; the library outlives them all.
    course::printStep(8, "release everything, newest first");
    for (size_t i = uses.size(); i-- > 0;) {
        CHECK_DRIVER(cuCtxPushCurrent(uses[i].context));
        CHECK_DRIVER(cuMemFree(uses[i].out));
        CHECK_DRIVER(cuCtxPopCurrent(nullptr));
        if (uses[i].primary)
            CHECK_DRIVER(cuDevicePrimaryCtxRelease(uses[i].device));
        else
            CHECK_DRIVER(cuCtxDestroy(uses[i].context));
    }
    CHECK_DRIVER(cuLibraryUnload(library));
    std::printf("released: %zu buffers, %zu contexts, the library\n", uses.size(), uses.size());
    return verdict.finish();
#endif
}
