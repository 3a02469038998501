// Lesson 22, program 1 — a library: device code loaded once, for every context.
//
// cuLibraryLoadFromFile and cuLibraryLoadData load device code without naming a context: with
// EAGER loading the driver loads it into every context at once (and into each new one when it is
// created), with LAZY loading into a context when a function is needed there (cuda.h:7885-7890).
// This program loads the same fatbin twice, from the file and from memory, and reads what a
// library tells: its kernels and their names, the library a kernel belongs to, where each
// parameter sits, a kernel's attributes (and sets one, so that a launch may use more dynamic
// shared memory than a block gets by default), a __device__ global and a __managed__ variable,
// the module the library has in the current context, and what a unified-function lookup answers.
//
//   libraries               the steps, with their checks
//   libraries --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "kernel_types.h"
#include "lesson22.h"
#include "opt_in.h"
#include "param_layout.h"

namespace {

// The kernels kernels/library_kernels.cu declares, sorted.
const std::vector<std::string> kKernelNames = {"addOffset", "dynamicSum", "mixedParams", "reverseTile"};

#if CUDA_VERSION >= 12040
constexpr int kElements = 4096;

// A library's kernels: cuLibraryGetKernelCount, then cuLibraryEnumerateKernels.
std::vector<CUkernel> kernelsOf(CUlibrary library) {
    unsigned int count = 0;
    CHECK_DRIVER(cuLibraryGetKernelCount(&count, library));
    std::vector<CUkernel> kernels(count);
    CHECK_DRIVER(cuLibraryEnumerateKernels(kernels.data(), count, library));
    return kernels;
}

// The names of those kernels (cuKernelGetName), sorted.
std::vector<std::string> kernelNames(const std::vector<CUkernel>& kernels) {
    std::vector<std::string> names;
    for (CUkernel kernel : kernels) {
        const char* name = nullptr;
        CHECK_DRIVER(cuKernelGetName(&name, kernel));
        names.emplace_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::string joined(const std::vector<std::string>& names) {
    std::string text;
    for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
    return text;
}

// Where the driver says each parameter sits (cuKernelGetParamInfo reads it from the kernel's
// image): index 0, 1, 2, ... until the driver refuses an index, which cuda.h requires to be
// "less than the number of parameters that kernel takes" (cuda.h:8504-8505).
std::vector<lesson22::ParamSlot> driverLayout(CUkernel kernel) {
    std::vector<lesson22::ParamSlot> slots;
    for (size_t index = 0; index < 64; ++index) {
        size_t offset = 0;
        size_t size = 0;
        const CUresult result = REPORT_DRIVER(cuKernelGetParamInfo(kernel, index, &offset, &size));
        if (result != CUDA_SUCCESS) {
            std::printf("cuKernelGetParamInfo(mixedParams, %zu): %s (past the last parameter)\n", index,
                        course::driverErrorName(result));
            break;
        }
        slots.push_back({offset, size});
    }
    return slots;
}

// addOffset over kElements ints, in the current context. The launch does not wait.
void launchAddOffset(CUkernel kernel, CUdeviceptr out) {
    int n = kElements;
    void* params[] = {&out, &n};
    CHECK_DRIVER(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), (kElements + 255) / 256, 1, 1, 256, 1, 1, 0,
                                nullptr, params, nullptr));
}

// How many of addOffset's kElements ints came out as i + offset.
int countOffsetBy(CUdeviceptr out, int offset) {
    std::vector<int> host(kElements);
    CHECK_DRIVER(cuMemcpyDtoH(host.data(), out, kElements * sizeof(int)));  // waits for the kernel
    int correct = 0;
    for (int i = 0; i < kElements; ++i) correct += host[i] == i + offset ? 1 : 0;
    return correct;
}

// Step 6, the __managed__ gLaunches, cleared and read by the host through the pointer given: only
// where the device can allocate managed memory (lesson22.h), and only while no kernel runs, so
// nothing depends on CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS (cuda.h:817). The launches do
// not wait: cuCtxSynchronize does, before the host reads.
void countLaunchesFromHost(course::Verdict& verdict, CUdevice device, CUlibrary library, CUkernel addOffset,
                           CUdeviceptr out) {
    const char* name = "gLaunches, one unsigned int read from the host, counted both launches";
    if (!lesson22::managedMemory(device)) {
        std::printf("check %s: SKIP (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY is 0 on this device)\n", name);
        return;
    }
    CUdeviceptr launchesAddress = 0;
    size_t launchesBytes = 0;
    CHECK_DRIVER(cuLibraryGetManaged(&launchesAddress, &launchesBytes, library, "gLaunches"));
    auto* launches = reinterpret_cast<unsigned int*>(launchesAddress);
    *launches = 0;
    launchAddOffset(addOffset, out);
    launchAddOffset(addOffset, out);
    CHECK_DRIVER(cuCtxSynchronize());
    std::printf("gLaunches: %zu bytes, read from the host after two launches: %u\n", launchesBytes, *launches);
    verdict.check(name, launchesBytes == sizeof(unsigned int) && *launches == 2);
}

#if CUDA_VERSION >= 12050
// How many of `kernels` name `library` as theirs (cuKernelGetLibrary).
size_t naming(const std::vector<CUkernel>& kernels, CUlibrary library) {
    size_t count = 0;
    for (CUkernel kernel : kernels) {
        CUlibrary owner = nullptr;
        CHECK_DRIVER(cuKernelGetLibrary(&owner, kernel));
        count += owner == library ? 1 : 0;
    }
    return count;
}
#endif

// Step 3: cuKernelGetLibrary on every kernel of both libraries (ABI version 12050 in
// cudaTypedefs.h, above the 12.4 the program asks for: its own guard, on the headers and on the
// driver).
void checkOwners(course::Verdict& verdict, CUlibrary fromFile, const std::vector<CUkernel>& fileKernels,
                 CUlibrary fromMemory, const std::vector<CUkernel>& memoryKernels) {
#if CUDA_VERSION >= 12050
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    if (driverVersion < 12050) {
        std::printf("cuKernelGetLibrary: SKIP (this step asks for a driver for CUDA 12.5 or newer)\n");
        return;
    }
    const size_t fileNaming = naming(fileKernels, fromFile);
    const size_t memoryNaming = naming(memoryKernels, fromMemory);
    std::printf("cuKernelGetLibrary: %zu of the file's %zu kernels name its library, %zu of the %zu loaded from "
                "memory name theirs\n",
                fileNaming, fileKernels.size(), memoryNaming, memoryKernels.size());
    verdict.check("every kernel names the library it came from",
                  !fileKernels.empty() && fileNaming == fileKernels.size() && !memoryKernels.empty() &&
                      memoryNaming == memoryKernels.size());
#else
    (void)verdict, (void)fromFile, (void)fileKernels, (void)fromMemory, (void)memoryKernels;
    std::printf("cuKernelGetLibrary: SKIP (this step asks for CUDA 12.5 headers)\n");
#endif
}

// Step 4: the driver's layout of mixedParams next to the one computed from its C++ signature.
bool layoutsAgree(CUkernel mixedParams) {
    const auto fromDriver = driverLayout(mixedParams);
    const auto fromTypes = lesson22::layoutOf<char, double, short, lesson22::FloatAndDouble, double*>();
    for (size_t i = 0; i < std::max(fromDriver.size(), fromTypes.size()); ++i) {
        const lesson22::ParamSlot none{0, 0};
        const auto& d = i < fromDriver.size() ? fromDriver[i] : none;
        const auto& t = i < fromTypes.size() ? fromTypes[i] : none;
        std::printf("parameter %zu: driver offset %zu size %zu, C++ offset %zu size %zu\n", i, d.offset, d.size,
                    t.offset, t.size);
    }
    return fromDriver == fromTypes;
}

#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    const std::string path = course::kernelPath("library_kernels.fatbin");

    course::printStep(1, "initialise, check the versions, make the primary context current");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    lesson22::printDevice(device, ordinal);
    const std::string shortfall = lesson22::versionShortfall(lesson22::kLibraryVersionNeeded);
    if (!shortfall.empty()) return lesson22::skip(shortfall);
#if CUDA_VERSION >= 12040
    course::Verdict verdict;
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));

    // Step 2: no JIT options, no library options (the nullptr, nullptr, 0 pairs). The same
    // bytes loaded twice give two libraries. Without CU_LIBRARY_BINARY_IS_PRESERVED the driver
    // keeps a copy of the image of its own (cuda.h:2489-2490).
    course::printStep(2, "load the fatbin twice: from the file and from memory");
    CUlibrary fromFile = nullptr;
    CHECK_DRIVER(cuLibraryLoadFromFile(&fromFile, path.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    const std::string image = lesson22::readModuleFile(path);
    CUlibrary fromMemory = nullptr;
    CHECK_DRIVER(cuLibraryLoadData(&fromMemory, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    const std::vector<CUkernel> fileKernels = kernelsOf(fromFile);
    const std::vector<CUkernel> memoryKernels = kernelsOf(fromMemory);
    std::printf("cuLibraryLoadFromFile(kernels/library_kernels.fatbin): a library of %zu kernels\n", fileKernels.size());
    std::printf("cuLibraryLoadData (the same %zu bytes, from memory): %s library, of %zu kernels\n", image.size(),
                fromMemory != fromFile ? "another" : "the same", memoryKernels.size());

    course::printStep(3, "the kernels of a library, their names, the library each belongs to");
    const std::vector<std::string> names = kernelNames(fileKernels);
    std::printf("kernels in the library: %zu (%s)\n", names.size(), joined(names).c_str());
    verdict.check("the library lists exactly the kernels the .cu declares", names == kKernelNames);
    CUkernel addOffset = nullptr;
    CUkernel addOffsetCopy = nullptr;
    CHECK_DRIVER(cuLibraryGetKernel(&addOffset, fromFile, "addOffset"));
    CHECK_DRIVER(cuLibraryGetKernel(&addOffsetCopy, fromMemory, "addOffset"));
    std::printf("addOffset of the two libraries: %s handles\n", addOffset != addOffsetCopy ? "two" : "the same");
    checkOwners(verdict, fromFile, fileKernels, fromMemory, memoryKernels);

    // Step 4: the driver reads the layout from the kernel's image; the host computes it from
    // the C++ types of the same signature (param_layout.h). A kernel and a host that disagree
    // on a signature show here, before any launch passes arguments at the wrong offsets.
    course::printStep(4, "where each parameter sits: cuKernelGetParamInfo against the C++ types");
    CUkernel mixedParams = nullptr;
    CHECK_DRIVER(cuLibraryGetKernel(&mixedParams, fromFile, "mixedParams"));
    verdict.check("parameter offsets and sizes follow the C++ signature", layoutsAgree(mixedParams));

    // Step 5: a kernel's attributes are per device: cuKernelSetAttribute sets one "on the kernel
    // kernel for the requested device dev" (cuda.h:8339-8340).
    course::printStep(5, "attributes: read, then set the dynamic shared memory limit");
    CUkernel reverseTile = nullptr;
    CUkernel dynamicSum = nullptr;
    CHECK_DRIVER(cuLibraryGetKernel(&reverseTile, fromFile, "reverseTile"));
    CHECK_DRIVER(cuLibraryGetKernel(&dynamicSum, fromFile, "dynamicSum"));
    int registers = 0;
    int maxThreads = 0;
    int staticShared = 0;
    CHECK_DRIVER(cuKernelGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS, reverseTile, device));
    CHECK_DRIVER(cuKernelGetAttribute(&maxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, reverseTile, device));
    CHECK_DRIVER(cuKernelGetAttribute(&staticShared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, reverseTile, device));
    std::printf("reverseTile: %d registers per thread, at most %d threads per block, %d bytes of static shared\n",
                registers, maxThreads, staticShared);
    verdict.check("attributes follow the kernel's declarations",
                  maxThreads == lesson22::kBoundedThreads &&
                      staticShared == static_cast<int>(lesson22::kTileFloats * sizeof(float)));
    lesson22::optInToDynamicShared(verdict, dynamicSum, device);

    // Step 6: the global belongs to the library's copy in the current context; the managed
    // variable is one allocation the host reads through the returned pointer.
    course::printStep(6, "a __device__ global and a __managed__ variable");
    CUdeviceptr offset = 0;
    size_t offsetBytes = 0;
    CHECK_DRIVER(cuLibraryGetGlobal(&offset, &offsetBytes, fromFile, "gOffset"));
    int initial = 0;
    CHECK_DRIVER(cuMemcpyDtoH(&initial, offset, sizeof(initial)));
    const int written = 1000;
    CHECK_DRIVER(cuMemcpyHtoD(offset, &written, sizeof(written)));
    CUdeviceptr out = 0;
    CHECK_DRIVER(cuMemAlloc(&out, kElements * sizeof(int)));
    launchAddOffset(addOffset, out);
    const int correct = countOffsetBy(out, written);
    std::printf("gOffset: %zu bytes, %d in the image, %d written through cuLibraryGetGlobal\n", offsetBytes, initial,
                written);
    std::printf("addOffset: %d of %d elements = i + %d\n", correct, kElements, written);
    verdict.check("addOffset read the gOffset written through cuLibraryGetGlobal", correct == kElements);
    // The same bytes loaded again are another library, with a gOffset of its own.
    CUdeviceptr copyOffset = 0;
    CHECK_DRIVER(cuLibraryGetGlobal(&copyOffset, nullptr, fromMemory, "gOffset"));
    int copyValue = 0;
    CHECK_DRIVER(cuMemcpyDtoH(&copyValue, copyOffset, sizeof(copyValue)));
    std::printf("gOffset of the library loaded from memory: %s address, holds %d\n",
                copyOffset == offset ? "the same" : "another", copyValue);
    verdict.check("the library loaded from memory has its own gOffset, as in the image",
                  copyOffset != offset && copyValue == initial);
    countLaunchesFromHost(verdict, device, fromFile, addOffset, out);

    // Step 7: in each context the library has a module; the driver owns it.
    course::printStep(7, "the library's module in this context, and a unified function");
    CUmodule module = nullptr;
    CHECK_DRIVER(cuLibraryGetModule(&module, fromFile));
    CUdeviceptr moduleOffset = 0;
    CHECK_DRIVER(cuModuleGetGlobal(&moduleOffset, nullptr, module, "gOffset"));
    std::printf("cuModuleGetGlobal(gOffset) of the library's module: %s address\n",
                moduleOffset == offset ? "the same" : "another");
    verdict.check("the library's module in this context holds the same gOffset", moduleOffset == offset);
    const CUresult unloaded = REPORT_DRIVER(cuModuleUnload(module));
    std::printf("cuModuleUnload of the library's module: %s\n", course::driverErrorName(unloaded));
    verdict.check("cuModuleUnload refuses the library's module", unloaded == CUDA_ERROR_NOT_PERMITTED);
    // cuda.h:8226-8228: CUDA_ERROR_NOT_FOUND when no unified function has that name, and it may
    // return that when no device has the attribute. Printed, not checked: an NVIDIA H200 (driver
    // 580) reported the attribute as 1 and returned CUDA_ERROR_INVALID_VALUE for this name, a
    // code of the call's list (8238) that its text does not explain.
    int unifiedPointers = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&unifiedPointers, CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS, device));
    void* unified = nullptr;
    const CUresult lookup = REPORT_DRIVER(cuLibraryGetUnifiedFunction(&unified, fromFile, "addOffset"));
    std::printf("CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS: %d\n", unifiedPointers);
    std::printf("cuLibraryGetUnifiedFunction(addOffset): %s\n", course::driverErrorName(lookup));

    course::printStep(8, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(out));
    CHECK_DRIVER(cuLibraryUnload(fromMemory));
    CHECK_DRIVER(cuLibraryUnload(fromFile));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: 1 buffer, 2 libraries, the primary context\n");
    return verdict.finish();
#endif
}
