// dlopen_driver — a CUDA driver program that starts on any machine, GPU or not.
//
// It does not link libcuda: the Makefile builds it with -ldl only, so the loader does
// not look for libcuda.so.1 when the program starts, and the program itself can say
// what is missing instead of dying with "error while loading shared libraries". It
// opens the driver with dlopen, takes exactly one symbol with dlsym (cuGetProcAddress)
// and resolves every other function through it, each at the version of the PFN_
// typedef it is cast to. Installers, probes and language bindings work this way.
//
// Self-contained on purpose (lesson 08 teaches it): copy it into your own tool.
//
// Exit status: 0 PASS; 1 no driver, NVIDIA's stub library, no device, or a failed call.
#include <cuda.h>          // types and constants only: no function of it is linked
#include <cudaTypedefs.h>  // PFN_<name>_v<version>: one function pointer type per ABI
#include <dlfcn.h>
#include <link.h>  // struct link_map, to print where the library was found

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

// Names for the codes this program meets before it can ask the driver for names.
const char* knownName(CUresult result) {
    switch (result) {
        case CUDA_SUCCESS: return "CUDA_SUCCESS";
        case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
        case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
        case CUDA_ERROR_STUB_LIBRARY: return "CUDA_ERROR_STUB_LIBRARY";
        case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
        case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
        default: return "an unnamed CUresult";
    }
}

// The driver's functions this program uses, each typed as the ABI it asks for.
struct Driver {
    PFN_cuGetErrorName_v6000 getErrorName = nullptr;
    PFN_cuInit_v2000 init = nullptr;
    PFN_cuDriverGetVersion_v2020 driverGetVersion = nullptr;
    PFN_cuDeviceGetCount_v2000 deviceGetCount = nullptr;
    PFN_cuDeviceGet_v2000 deviceGet = nullptr;
    PFN_cuDeviceGetName_v2000 deviceGetName = nullptr;
    PFN_cuCtxCreate_v3020 ctxCreate = nullptr;
    PFN_cuCtxDestroy_v4000 ctxDestroy = nullptr;
    PFN_cuMemAlloc_v3020 memAlloc = nullptr;
    PFN_cuMemFree_v3020 memFree = nullptr;
    PFN_cuMemcpyHtoD_v3020 memcpyHtoD = nullptr;
    PFN_cuMemcpyDtoH_v3020 memcpyDtoH = nullptr;

    // "CUDA_ERROR_X (code N)", from the driver once it can answer.
    void describe(CUresult result, char* text, size_t size) const {
        const char* name = nullptr;
        if (getErrorName == nullptr || getErrorName(result, &name) != CUDA_SUCCESS || name == nullptr)
            name = knownName(result);
        std::snprintf(text, size, "%s (code %d)", name, static_cast<int>(result));
    }
};

// cuGetProcAddress itself, in whichever form the driver exports. CUDA 12.0 added a
// status out-parameter under the name cuGetProcAddress_v2; drivers 11.3 to 11.8 have
// only the first form, which every later driver still exports as cuGetProcAddress.
struct EntryPoint {
#if CUDA_VERSION >= 12000
    PFN_cuGetProcAddress_v12000 withStatus = nullptr;
#endif
    PFN_cuGetProcAddress_v11030 first = nullptr;

    CUresult operator()(const char* symbol, int cudaVersion, void** function) const {
        *function = nullptr;
#if CUDA_VERSION >= 12000
        if (withStatus != nullptr) {
            CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
            return withStatus(symbol, function, cudaVersion, CU_GET_PROC_ADDRESS_DEFAULT, &status);
        }
#endif
        return first(symbol, function, cudaVersion, CU_GET_PROC_ADDRESS_DEFAULT);
    }
};

// Where the dynamic loader found the library (to tell the stub from the driver).
const char* loadedFrom(void* library) {
    link_map* map = nullptr;
    if (dlinfo(library, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) return "?";
    return map->l_name;
}

void explainStub(void* library) {
    std::fprintf(stderr,
                 "libcuda.so.1 here is NVIDIA's stub library (%s), not a driver.\n"
                 "  The stub exists so that programs can be linked on machines without a GPU; every call\n"
                 "  into it returns CUDA_ERROR_STUB_LIBRARY. Install the NVIDIA driver, or take the\n"
                 "  toolkit's stubs folder off LD_LIBRARY_PATH.\n",
                 loadedFrom(library));
}

void printStep(int number, const char* title) {
    std::printf("\n== Step %d: %s ==\n", number, title);
}

}  // namespace

int main() {
    // Step 1: the driver library. It comes with the NVIDIA driver (not with the
    // toolkit), so on a machine without one this is where the program stops, politely.
    printStep(1, "load the driver library");
    void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
        const char* why = dlerror();
        std::fprintf(stderr,
                     "no NVIDIA driver found: libcuda.so.1 is installed with the driver, not with the CUDA toolkit.\n"
                     "  dlopen said: %s\n"
                     "  This program links only libdl, so it starts anyway and can tell you. On a machine with an\n"
                     "  NVIDIA GPU, install the driver; nvidia-smi works once it is there.\n",
                     why != nullptr ? why : "(no reason given)");
        return EXIT_FAILURE;
    }
    std::printf("dlopen(\"libcuda.so.1\"): %s\n", loadedFrom(library));

    // Step 2: the one symbol taken by name. Everything else comes through it.
    printStep(2, "find cuGetProcAddress");
    EntryPoint entry;
    const char* entryName = "cuGetProcAddress";
#if CUDA_VERSION >= 12000
    entry.withStatus = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(library, "cuGetProcAddress_v2"));
    if (entry.withStatus != nullptr) entryName = "cuGetProcAddress_v2";
#endif
    entry.first = reinterpret_cast<PFN_cuGetProcAddress_v11030>(dlsym(library, "cuGetProcAddress"));
    if (entry.first == nullptr) {
        std::fprintf(stderr, "libcuda.so.1 (%s) has no cuGetProcAddress: the driver is older than CUDA 11.3\n",
                     loadedFrom(library));
        dlclose(library);
        return EXIT_FAILURE;
    }
    std::printf("entry point: %s\n", entryName);

    // Step 3: resolve each function at the version its typedef describes. The stub
    // library answers this very first request with CUDA_ERROR_STUB_LIBRARY.
    printStep(3, "resolve the functions");
    Driver driver;
    int resolved = 0;
    auto need = [&](const char* symbol, int cudaVersion, auto& slot) {
        void* function = nullptr;
        const CUresult result = entry(symbol, cudaVersion, &function);
        if (result == CUDA_ERROR_STUB_LIBRARY) {
            explainStub(library);
            return false;
        }
        if (result != CUDA_SUCCESS || function == nullptr) {
            char text[96];
            driver.describe(result, text, sizeof(text));
            std::fprintf(stderr, "%s(\"%s\", %d): %s, pointer %s\n", entryName, symbol, cudaVersion, text,
                         function != nullptr ? "set" : "NULL");
            return false;
        }
        slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(function);
        ++resolved;
        return true;
    };
    const bool all = need("cuGetErrorName", 6000, driver.getErrorName) && need("cuInit", 2000, driver.init) &&
                     need("cuDriverGetVersion", 2020, driver.driverGetVersion) &&
                     need("cuDeviceGetCount", 2000, driver.deviceGetCount) &&
                     need("cuDeviceGet", 2000, driver.deviceGet) &&
                     need("cuDeviceGetName", 2000, driver.deviceGetName) &&
                     need("cuCtxCreate", 3020, driver.ctxCreate) && need("cuCtxDestroy", 4000, driver.ctxDestroy) &&
                     need("cuMemAlloc", 3020, driver.memAlloc) && need("cuMemFree", 3020, driver.memFree) &&
                     need("cuMemcpyHtoD", 3020, driver.memcpyHtoD) && need("cuMemcpyDtoH", 3020, driver.memcpyDtoH);
    if (!all) {
        dlclose(library);
        return EXIT_FAILURE;
    }
    std::printf("resolved: %d functions\n", resolved);

    // Every call from here on is checked; a failure is named by the driver itself.
    auto failed = [&](CUresult result, const char* call) {
        if (result == CUDA_SUCCESS) return false;
        if (result == CUDA_ERROR_STUB_LIBRARY) {
            explainStub(library);
        } else {
            char text[96];
            driver.describe(result, text, sizeof(text));
            std::fprintf(stderr, "%s failed: %s\n", call, text);
            if (result == CUDA_ERROR_NO_DEVICE)
                std::fprintf(stderr, "  the driver sees no CUDA device; check nvidia-smi and CUDA_VISIBLE_DEVICES\n");
        }
        return true;
    };

    // Step 4: the usual start, through the resolved pointers.
    printStep(4, "initialise and list the devices");
    if (failed(driver.init(0), "cuInit(0)")) {
        dlclose(library);
        return EXIT_FAILURE;
    }
    int driverVersion = 0;
    int deviceCount = 0;
    if (failed(driver.driverGetVersion(&driverVersion), "cuDriverGetVersion") ||
        failed(driver.deviceGetCount(&deviceCount), "cuDeviceGetCount")) {
        dlclose(library);
        return EXIT_FAILURE;
    }
    std::printf("driver CUDA version: %d.%d\n", driverVersion / 1000, (driverVersion % 1000) / 10);
    std::printf("device count: %d\n", deviceCount);
    for (int ordinal = 0; ordinal < deviceCount; ++ordinal) {
        CUdevice device = 0;
        char name[256] = {};
        if (failed(driver.deviceGet(&device, ordinal), "cuDeviceGet") ||
            failed(driver.deviceGetName(name, sizeof(name), device), "cuDeviceGetName")) {
            dlclose(library);
            return EXIT_FAILURE;
        }
        std::printf("device %d name: %s\n", ordinal, name);
    }

    // Step 5: a small allocation round trip on device 0, released in reverse order.
    printStep(5, "an allocation round trip on device 0");
    constexpr int kCount = 1024;
    std::vector<int> sent(kCount);
    std::vector<int> received(kCount, 0);
    for (int i = 0; i < kCount; ++i) sent[i] = i * 7;
    CUdevice device = 0;
    CUcontext context = nullptr;
    CUdeviceptr buffer = 0;
    bool ok = !failed(driver.deviceGet(&device, 0), "cuDeviceGet") &&
              !failed(driver.ctxCreate(&context, 0, device), "cuCtxCreate");
    if (ok) {
        ok = !failed(driver.memAlloc(&buffer, sizeof(int) * kCount), "cuMemAlloc");
        if (ok) {
            ok = !failed(driver.memcpyHtoD(buffer, sent.data(), sizeof(int) * kCount), "cuMemcpyHtoD") &&
                 !failed(driver.memcpyDtoH(received.data(), buffer, sizeof(int) * kCount), "cuMemcpyDtoH");
            ok = !failed(driver.memFree(buffer), "cuMemFree") && ok;
        }
        ok = !failed(driver.ctxDestroy(context), "cuCtxDestroy") && ok;
    }
    const bool same = ok && std::memcmp(sent.data(), received.data(), sizeof(int) * kCount) == 0;
    std::printf("round trip: %zu bytes, %s\n", sizeof(int) * kCount, same ? "identical" : "DIFFERENT");

    dlclose(library);
    std::printf("Result = %s\n", same ? "PASS" : "FAIL");
    return same ? EXIT_SUCCESS : EXIT_FAILURE;
}
