// Lesson 22, program 3 — what a module holds: its functions, their names, their module.
//
// A module (lesson 06) belongs to the context that loaded it. The driver lists a module's
// functions (cuModuleGetFunctionCount, cuModuleEnumerateFunctions), names each one
// (cuFuncGetName) and goes back from a function to its module (cuFuncGetModule); lesson22.h
// gives the ABI version cudaTypedefs.h names for each.
// This program loads a fatbin from memory with cuModuleLoadFatBinary, and the same bytes again
// with cuModuleLoadData, lists both modules' functions, finds the kernel declared without
// extern "C" under the name the compiler gave it, and launches two functions taken from the list.
//
//   modules               the steps, with their checks
//   modules --device N    another GPU
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "lesson22.h"

namespace {

// kernels/module_kernels.cu: three kernels with C linkage, and scale(float*, float, int) without.
const std::vector<std::string> kExternC = {"addOne", "fillIndex", "noop"};
const std::string kMangledScale = "_Z5scalePffi";  // the Itanium C++ ABI's name for it (module_kernels.cu)

#if CUDA_VERSION >= 12040
constexpr size_t kKernelsDeclared = 4;
constexpr int kElements = 4096;

// A module's functions, in the order the driver lists them. With lazy loading they may be
// "partially loaded" (cuda.h:7553); the calls below load what they need.
std::vector<CUfunction> functionsOf(CUmodule module) {
    unsigned int count = 0;
    CHECK_DRIVER(cuModuleGetFunctionCount(&count, module));
    std::vector<CUfunction> functions(count);
    CHECK_DRIVER(cuModuleEnumerateFunctions(functions.data(), count, module));
    return functions;
}

// A std::string made from a null pointer is undefined behaviour: "" stands for no name.
std::string nameOf(CUfunction function) {
    const char* name = nullptr;
    CHECK_DRIVER(cuFuncGetName(&name, function));
    return name != nullptr ? name : "";
}

// The listed function called `name`, or nullptr.
CUfunction listed(const std::vector<CUfunction>& functions, const std::string& name) {
    for (CUfunction function : functions)
        if (nameOf(function) == name) return function;
    return nullptr;
}

// How many of the functions name `module` as theirs (cuFuncGetModule).
size_t naming(const std::vector<CUfunction>& functions, CUmodule module) {
    size_t count = 0;
    for (CUfunction function : functions) {
        CUmodule owner = nullptr;
        CHECK_DRIVER(cuFuncGetModule(&owner, function));
        count += owner == module ? 1 : 0;
    }
    return count;
}

// function(x, n) over kElements floats.
void launch(CUfunction function, CUdeviceptr x) {
    int n = kElements;
    void* params[] = {&x, &n};
    CHECK_DRIVER(cuLaunchKernel(function, kElements / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    const std::string path = course::kernelPath("module_kernels.fatbin");

    course::printStep(1, "initialise, check the versions, make the primary context current");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    [[maybe_unused]] const int capability = lesson22::printDevice(device, ordinal);
    const std::string shortfall = lesson22::versionShortfall(lesson22::kLibraryVersionNeeded);
    if (!shortfall.empty()) return lesson22::skip(shortfall);
#if CUDA_VERSION >= 12040
    course::Verdict verdict;
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));

    // Step 2: cuModuleLoadFatBinary takes "a collection of different cubin and/or PTX files, all
    // representing the same device code" (cuda.h:7411); cuModuleLoadData takes a fatbin too.
    course::printStep(2, "load the fatbin from memory twice: cuModuleLoadFatBinary, cuModuleLoadData");
    const std::string image = lesson22::readModuleFile(path);
    CUmodule module = nullptr;
    CUmodule second = nullptr;
    CHECK_DRIVER(cuModuleLoadFatBinary(&module, image.data()));
    CHECK_DRIVER(cuModuleLoadData(&second, image.data()));
    unsigned int firstCount = 0;
    unsigned int secondCount = 0;
    CHECK_DRIVER(cuModuleGetFunctionCount(&firstCount, module));
    CHECK_DRIVER(cuModuleGetFunctionCount(&secondCount, second));
    std::printf("cuModuleLoadFatBinary (%zu bytes): a module of %u functions\n", image.size(), firstCount);
    std::printf("cuModuleLoadData (the same bytes): %s module, of %u functions\n",
                second != module ? "another" : "the same", secondCount);
    verdict.check("each load holds as many functions as the .cu declares",
                  firstCount == kKernelsDeclared && secondCount == kKernelsDeclared);

    course::printStep(3, "list the module's functions and their names");
    const std::vector<CUfunction> functions = functionsOf(module);
    std::vector<std::string> names;
    for (CUfunction function : functions) names.push_back(nameOf(function));
    std::sort(names.begin(), names.end());
    std::string list;
    for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
    std::printf("functions in the module: %zu (%s)\n", functions.size(), list.c_str());
    bool everyExternC = true;
    for (const std::string& name : kExternC)
        everyExternC = everyExternC && std::find(names.begin(), names.end(), name) != names.end();
    verdict.check("the module lists every kernel the .cu declares",
                  functions.size() == kKernelsDeclared && everyExternC);

    course::printStep(4, "cuFuncGetModule: each listed function names its module");
    const std::vector<CUfunction> secondFunctions = functionsOf(second);
    const size_t firstNaming = naming(functions, module);
    const size_t secondNaming = naming(secondFunctions, second);
    const size_t secondNamingFirst = naming(secondFunctions, module);
    std::printf("functions of the first module naming it: %zu of %zu\n", firstNaming, functions.size());
    std::printf("functions of the second module naming it: %zu of %zu\n", secondNaming, secondFunctions.size());
    std::printf("functions of the second module naming the first: %zu of %zu\n", secondNamingFirst,
                secondFunctions.size());
    // Two loads of the same bytes are two modules: none of the second's functions is the first's.
    verdict.check("every listed function names its module, and the two modules are distinct",
                  !functions.empty() && firstNaming == functions.size() && secondNaming == secondFunctions.size() &&
                      second != module && secondNamingFirst == 0);

    // Step 5: cuFuncGetName "may return a mangled name if the function is not declared as having
    // C linkage" (cuda.h:17337-17338), and cuda.h says of kernel names given to the linker that
    // "kernel names can be mangled by the compiler in which case the mangled name needs to be
    // specified" (cuda.h:1391-1392). What cuModuleGetFunction answers for either name is printed.
    course::printStep(5, "a kernel without extern \"C\": listed and found by its mangled name only");
    CUfunction byPlainName = nullptr;
    CUfunction byMangledName = nullptr;
    const CUresult plain = REPORT_DRIVER(cuModuleGetFunction(&byPlainName, module, "scale"));
    const CUresult mangled = REPORT_DRIVER(cuModuleGetFunction(&byMangledName, module, kMangledScale.c_str()));
    std::printf("cuModuleGetFunction(\"scale\"): %s\n", course::driverErrorName(plain));
    std::printf("cuModuleGetFunction(\"%s\"): %s\n", kMangledScale.c_str(), course::driverErrorName(mangled));
    const bool listedMangled = std::find(names.begin(), names.end(), kMangledScale) != names.end();
    std::printf("%s in the list of step 3: %s\n", kMangledScale.c_str(), listedMangled ? "yes" : "no");
    verdict.check("the C++ kernel is listed and found by its mangled name only",
                  listedMangled && plain == CUDA_ERROR_NOT_FOUND && mangled == CUDA_SUCCESS);

    course::printStep(6, "launch two functions taken from the list");
    CUdeviceptr x = 0;
    CHECK_DRIVER(cuMemAlloc(&x, kElements * sizeof(float)));
    CHECK_DRIVER(cuMemsetD32(x, 0, kElements));
    CUfunction fillIndex = listed(functions, "fillIndex");
    CUfunction addOne = listed(functions, "addOne");
    int correct = 0;
    if (fillIndex != nullptr && addOne != nullptr) {
        int binaryVersion = 0;
        CHECK_DRIVER(cuFuncGetAttribute(&binaryVersion, CU_FUNC_ATTRIBUTE_BINARY_VERSION, fillIndex));
        std::printf("fillIndex runs: SASS for sm_%d (this GPU: sm_%d)\n", binaryVersion, capability);
        launch(fillIndex, x);
        launch(addOne, x);
        std::vector<float> host(kElements);
        CHECK_DRIVER(cuMemcpyDtoH(host.data(), x, kElements * sizeof(float)));
        for (int i = 0; i < kElements; ++i) correct += host[i] == static_cast<float>(i + 1) ? 1 : 0;
    }
    std::printf("fillIndex then addOne: %d of %d elements = i + 1\n", correct, kElements);
    verdict.check("functions taken from the list run", correct == kElements);

    course::printStep(7, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(x));
    CHECK_DRIVER(cuModuleUnload(second));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: 1 buffer, 2 modules, the primary context\n");
    return verdict.finish();
#endif
}
