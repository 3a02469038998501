// Lesson 08 — driver entry points: one name, several ABIs.
//
// When a driver function gets a new signature, the old one stays, each under its own
// exported name (cuCtxCreate, cuCtxCreate_v2, _v3, _v4). cuda.h picks one at compile time with
// a #define; cuGetProcAddress picks one at run time for the CUDA version the caller
// names, and the caller casts the answer to the PFN_<name>_v<version> typedef from
// cudaTypedefs.h that describes the same version. This program asks for symbols at
// several versions and names what came back, shows the status codes, the per-thread
// default-stream variants, a function newer than the oldest toolkit the course supports
// (CUDA 11.4), and the runtime's way.
//
//   08-entry-points [--device N]
// standalone/dlopen_driver.cpp uses the same technique in a program that does not
// link libcuda at all.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "lookup_names.h"
#include "runtime_lookup.h"

// The name cuda.h's #defines turn a plain name into, as text.
#define COMPILED_NAME_TEXT(name) #name
#define COMPILED_NAME(name) COMPILED_NAME_TEXT(name)

namespace {

using lesson08::describe;
using lesson08::Lookup;
using lesson08::statusName;

// Asks without judging: some of this lesson's requests fail on purpose, and
// REPORT_DRIVER reports those on stderr and hands the code back.
Lookup lookUp(const char* symbol, int cudaVersion, cuuint64_t flags) {
    Lookup answer;
    answer.result = REPORT_DRIVER(course::getProcAddress(symbol, &answer.function, cudaVersion, flags, &answer.status));
    return answer;
}

// Resolves a function this program cannot do without, cast to the typedef that
// describes the requested version. The typedef and the version must name the same ABI.
template <class Function>
Function resolve(const char* symbol, int cudaVersion) {
    void* function = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    CHECK_DRIVER(course::getProcAddress(symbol, &function, cudaVersion, CU_GET_PROC_ADDRESS_DEFAULT, &status));
    if (function == nullptr) {
        std::fprintf(stderr, "%s @ %d: no function (%s)\n", symbol, cudaVersion, statusName(status));
        std::exit(EXIT_FAILURE);
    }
    return reinterpret_cast<Function>(function);
}

// Step 3: each family's name at its versions. Checks that every version up to the driver's
// gave a function and that the versions whose typedefs differ gave as many different functions.
void compareAbis(void* library, int driverVersion, course::Verdict& verdict) {
    struct Family {
        const char* symbol;
        std::vector<int> versions;
        std::vector<int> abis;  // versions whose typedefs differ: each must give its own function
        bool checked;           // false: print what the driver does, do not judge it
    };
    const Family families[] = {
        {"cuCtxCreate", {3020, 11040, 12050, 13000}, {3020, 11040, 12050}, true},
        {"cuStreamBeginCapture", {10000, 10010}, {10000, 10010}, true},
        {"cuCtxSynchronize", {2000, 13000}, {2000, 13000}, false},
    };
    for (const Family& family : families) {
        std::vector<void*> abiFunctions;  // the answers at family.abis, in that order
        bool everyVersionFound = true;
        for (const int version : family.versions) {
            const Lookup answer = lookUp(family.symbol, version, CU_GET_PROC_ADDRESS_DEFAULT);
            std::printf("%s @ %d: %s\n", family.symbol, version, describe(library, family.symbol, answer).c_str());
            // Every version up to the driver's must give a function.
            if (version <= driverVersion)
                everyVersionFound = everyVersionFound && answer.result == CUDA_SUCCESS && answer.function;
            if (std::find(family.abis.begin(), family.abis.end(), version) != family.abis.end())
                abiFunctions.push_back(answer.function);
        }
        const std::string symbol = family.symbol;
        verdict.check((symbol + " found at every version up to the driver's").c_str(), everyVersionFound);
        if (family.abis.back() > driverVersion) continue;  // this driver cannot answer the newest one
        // No NULL, and no two equal: sorted, no neighbours are the same.
        std::vector<void*> sorted = abiFunctions;
        std::sort(sorted.begin(), sorted.end());
        const bool different = std::find(sorted.begin(), sorted.end(), nullptr) == sorted.end() &&
                               std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
        std::string versions;
        for (const int version : family.abis) versions += (versions.empty() ? "@ " : ", @ ") + std::to_string(version);
        std::printf("%s %s: %s\n", family.symbol, versions.c_str(),
                    different ? "different functions" : "NOT all different");
        if (family.checked) verdict.check((symbol + " gives a different function for each ABI").c_str(), different);
    }
}

// Step 4: an unknown name, a name asked for below its first version, the same name at that
// version, and a version above the driver's. Checks the status of the first three.
void showStatuses(void* library, int driverVersion, int askVersion, course::Verdict& verdict) {
    const Lookup unknown = lookUp("cuDoesNotExist", askVersion, CU_GET_PROC_ADDRESS_DEFAULT);
    std::printf("cuDoesNotExist @ %d: %s\n", askVersion, describe(library, "cuDoesNotExist", unknown).c_str());
    // cuDeviceGetExecAffinitySupport arrived in CUDA 11.4 (PFN_..._v11040).
    const Lookup tooOld = lookUp("cuDeviceGetExecAffinitySupport", 11030, CU_GET_PROC_ADDRESS_DEFAULT);
    std::printf("cuDeviceGetExecAffinitySupport @ 11030: %s\n",
                describe(library, "cuDeviceGetExecAffinitySupport", tooOld).c_str());
    const Lookup inTime = lookUp("cuDeviceGetExecAffinitySupport", 11040, CU_GET_PROC_ADDRESS_DEFAULT);
    std::printf("cuDeviceGetExecAffinitySupport @ 11040: %s\n",
                describe(library, "cuDeviceGetExecAffinitySupport", inTime).c_str());
    const int aboveDriver = driverVersion + 10;  // the next minor release
    const Lookup future = lookUp("cuMemAlloc", aboveDriver, CU_GET_PROC_ADDRESS_DEFAULT);
    std::printf("cuMemAlloc @ %d (above the driver's %d): %s\n", aboveDriver, driverVersion,
                describe(library, "cuMemAlloc", future).c_str());
    // The 11.x shim can only say "not found"; the CUDA 12 status tells the two apart.
    const CUdriverProcAddressQueryResult expectedTooOld =
        CUDA_VERSION >= 12000 ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    verdict.check("unknown name gives no function and symbol not found",
                  unknown.result == CUDA_SUCCESS && unknown.function == nullptr &&
                      unknown.status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    verdict.check("name below its first version gives no function and its status",
                  tooOld.result == CUDA_SUCCESS && tooOld.function == nullptr && tooOld.status == expectedTooOld);
    verdict.check("name at its first version found", inTime.result == CUDA_SUCCESS && inTime.function != nullptr);
}

// Step 5: cuMemcpyAsync (a stream function) and cuMemAlloc (none) under both stream flags.
// Checks that only cuMemcpyAsync gives two functions.
void comparePerThreadVariants(void* library, int askVersion, course::Verdict& verdict) {
    const Lookup copyLegacy = lookUp("cuMemcpyAsync", askVersion, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    const Lookup copyPerThread = lookUp("cuMemcpyAsync", askVersion, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    const Lookup allocLegacy = lookUp("cuMemAlloc", askVersion, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    const Lookup allocPerThread = lookUp("cuMemAlloc", askVersion, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    std::printf("cuMemcpyAsync, LEGACY_STREAM: %s\n", describe(library, "cuMemcpyAsync", copyLegacy).c_str());
    std::printf("cuMemcpyAsync, PER_THREAD_DEFAULT_STREAM: %s\n",
                describe(library, "cuMemcpyAsync", copyPerThread).c_str());
    std::printf("cuMemAlloc, PER_THREAD_DEFAULT_STREAM: %s (%s)\n",
                describe(library, "cuMemAlloc", allocPerThread).c_str(),
                allocPerThread.function == allocLegacy.function ? "same as LEGACY_STREAM: no per-thread variant"
                                                                : "differs from LEGACY_STREAM");
    verdict.check("cuMemcpyAsync has a per-thread variant", copyLegacy.function != nullptr &&
                                                                  copyPerThread.function != nullptr &&
                                                                  copyLegacy.function != copyPerThread.function);
    verdict.check("cuMemAlloc has one function under both flags",
                  allocLegacy.function != nullptr && allocPerThread.function == allocLegacy.function);
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    // Step 1: the versions that decide what a lookup may ask for. A request above the
    // driver's own version cannot be answered (step 4).
    course::printStep(1, "initialise the driver, read the versions");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    std::printf("driver CUDA version: %s (cuDriverGetVersion = %d)\n", course::formatCudaVersion(driverVersion).c_str(),
                driverVersion);
    std::printf("compiled with cuda.h: %s (CUDA_VERSION = %d)\n", course::formatCudaVersion(CUDA_VERSION).c_str(),
                CUDA_VERSION);
    // This program linked libcuda.so.1, so it is loaded: RTLD_NOLOAD returns that same
    // library (it loads nothing), and dlsym on it gives the addresses of its exports.
    void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (library == nullptr) {
        std::fprintf(stderr, "dlopen(\"libcuda.so.1\", RTLD_NOLOAD) failed: %s\n", dlerror());
        return EXIT_FAILURE;
    }

    // Step 2: at compile time, cuda.h's #defines decide which export a plain name
    // calls. Stringifying the name after expansion shows the choice.
    course::printStep(2, "what cuda.h compiled");
    std::printf("cuCtxCreate compiles as: %s\n", COMPILED_NAME(cuCtxCreate));
    std::printf("cuStreamBeginCapture compiles as: %s\n", COMPILED_NAME(cuStreamBeginCapture));
    std::printf("cuCtxSynchronize compiles as: %s\n", COMPILED_NAME(cuCtxSynchronize));
    std::printf("cuGetProcAddress compiles as: %s\n", COMPILED_NAME(cuGetProcAddress));

    // Step 3: at run time, ask for one name at several versions. Each answer is compared
    // with dlsym of the exported versioned names, which names the ABI that came back.
    course::printStep(3, "one name, several ABIs");
    course::Verdict verdict;
    compareAbis(library, driverVersion, verdict);

    // Step 4: the three ways a lookup gives no function. An unknown name and a name
    // that exists only from a later version both return CUDA_SUCCESS with a NULL
    // pointer, as cuda.h says (the Programming Guide's 4.20.3.1 says CUDA_ERROR_NOT_FOUND, its
    // 4.20.5 CUDA_SUCCESS); only the status tells them apart. Above the driver's: an error.
    course::printStep(4, "what the status says");
    // The version this program's cuda.h describes, but never above what the driver can
    // answer (a toolkit may be a minor release newer than the driver).
    const int askVersion = std::min(CUDA_VERSION, driverVersion);
    showStatuses(library, driverVersion, askVersion, verdict);

    // Step 5: functions that take a stream have a second export, _ptsz, in which stream
    // 0 means this thread's own default stream (CU_STREAM_PER_THREAD) instead of the
    // legacy NULL stream that synchronises with every blocking stream of the context.
    // The flag chooses which one a lookup returns; functions without one fall back.
    course::printStep(5, "per-thread default stream variants");
    comparePerThreadVariants(library, askVersion, verdict);

    // Step 6: call through resolved pointers. Each typedef names the version it
    // describes; asking for that same version keeps the call right on every driver,
    // whatever later versions of the function appear (a version read at run time would
    // not). 3020 is CUDA 3.2, where the 64-bit CUdeviceptr forms arrived.
    course::printStep(6, "call through resolved pointers");
    const auto ctxCreate = resolve<PFN_cuCtxCreate_v3020>("cuCtxCreate", 3020);
    const auto ctxDestroy = resolve<PFN_cuCtxDestroy_v4000>("cuCtxDestroy", 4000);
    const auto memAlloc = resolve<PFN_cuMemAlloc_v3020>("cuMemAlloc", 3020);
    const auto memsetD32 = resolve<PFN_cuMemsetD32_v3020>("cuMemsetD32", 3020);
    const auto memcpyDtoH = resolve<PFN_cuMemcpyDtoH_v3020>("cuMemcpyDtoH", 3020);
    const auto memFree = resolve<PFN_cuMemFree_v3020>("cuMemFree", 3020);
    Lookup resolvedAlloc;
    resolvedAlloc.function = reinterpret_cast<void*>(memAlloc);
    std::printf("cuMemAlloc @ 3020, called as PFN_cuMemAlloc_v3020: %s\n",
                describe(library, "cuMemAlloc", resolvedAlloc).c_str());

    CUcontext context = nullptr;
    CHECK_DRIVER(ctxCreate(&context, 0, device));  // the 3-argument form: (ctx, flags, dev)
    constexpr unsigned int kCount = 1024;
    constexpr unsigned int kPattern = 0xC0FFEEu;
    CUdeviceptr buffer = 0;
    CHECK_DRIVER(memAlloc(&buffer, kCount * sizeof(unsigned int)));
    CHECK_DRIVER(memsetD32(buffer, kPattern, kCount));
    std::vector<unsigned int> host(kCount, 0);
    CHECK_DRIVER(memcpyDtoH(host.data(), buffer, kCount * sizeof(unsigned int)));
    CHECK_DRIVER(memFree(buffer));
    unsigned int matching = 0;
    for (const unsigned int value : host) matching += value == kPattern ? 1 : 0;
    std::printf("round trip through resolved pointers: %u of %u correct\n", matching, kCount);
    verdict.check("round trip through resolved pointers exact", matching == kCount);

    // Step 7: a function newer than the oldest toolkit the course supports (11.4).
    // cuStreamGetDevice arrived in CUDA 12.8; a program built with an older toolkit has
    // neither its declaration nor its typedef, so it writes the typedef from the
    // documentation, with the version it describes; from 12.8 cudaTypedefs.h has it. First
    // it asks at the driver's own version whether the driver has the name at all, then it
    // resolves the ABI its typedef describes (12080, not the driver's version), and calls
    // only if found.
    course::printStep(7, "a function newer than CUDA 11.4");
#if CUDA_VERSION >= 12080
    using StreamGetDeviceV12080 = PFN_cuStreamGetDevice_v12080;
    const char* typedefName = "PFN_cuStreamGetDevice_v12080 from cudaTypedefs.h";
#else
    using StreamGetDeviceV12080 = CUresult(CUDAAPI*)(CUstream, CUdevice*);
    const char* typedefName = "a hand-written typedef for the 12080 ABI";
#endif
    const Lookup probe = lookUp("cuStreamGetDevice", driverVersion, CU_GET_PROC_ADDRESS_DEFAULT);
    if (probe.result != CUDA_SUCCESS || probe.function == nullptr) {
        std::printf(
            "cuStreamGetDevice: not in this driver (%s, %s); update the driver to use it, the program "
            "carries on without it\n",
            course::formatCudaVersion(driverVersion).c_str(), statusName(probe.status));
    } else {
        const auto streamGetDevice = resolve<StreamGetDeviceV12080>("cuStreamGetDevice", 12080);
        CUstream stream = nullptr;
        CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
        CUdevice streamDevice = -1;
        CHECK_DRIVER(streamGetDevice(stream, &streamDevice));
        CHECK_DRIVER(cuStreamDestroy(stream));
        const bool streamsDevice = streamDevice == device;
        std::printf("cuStreamGetDevice: found in driver %s; called through %s: device %d (%s)\n",
                    course::formatCudaVersion(driverVersion).c_str(), typedefName, static_cast<int>(streamDevice),
                    streamsDevice ? "the stream's device" : "WRONG");
        verdict.check("cuStreamGetDevice names the stream's device", streamsDevice);
    }

    // Step 8: the runtime has its own front door to the same table. Since 12.5 it takes
    // a version like cuGetProcAddress; before, it could only use the runtime's own.
    course::printStep(8, "the runtime's way");
    lesson08::lookUpThroughRuntime(library, reinterpret_cast<void*>(memAlloc), verdict);

    // Step 9: release in reverse order, the context through the resolved pointer.
    course::printStep(9, "release");
    CHECK_DRIVER(ctxDestroy(context));
    dlclose(library);
    std::printf("context destroyed, library handle closed\n");

    // Step 10: each check above printed its line where the program learnt the answer.
    course::printStep(10, "check");
    return verdict.finish();
}
