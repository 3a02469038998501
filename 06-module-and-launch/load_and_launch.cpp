// Lesson 06, program 3 of 6 — load a module four ways, launch with kernelParams.
//
// Device code reaches the driver as a module: PTX text (compiled by the driver's JIT), a
// cubin (SASS for one GPU family) or a fatbin (several cubins plus PTX). This program loads
// the same kernels from each and as a library, checks that every copy computes the same
// sums, writes a module global, launches with kernelParams, and asks for launches wider
// than a function allows: the driver refuses each, with the code launch_limits.h expects
// (documented in cuda.h for the register case, observed on the H200 for the other two).
//
//   load_and_launch [--device N]
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "cubin_arch.h"
#include "driver_env.h"
#include "function_checks.h"
#include "launch_limits.h"

namespace {

using lesson06::printCodeTaken;
using lesson06::VectorAddCheck;

// Step 6: the fatbin image as a library (CUDA 12.0+), its vectorAdd taken as a CUkernel.
// The handle launched must be the library's kernel, not the fatbin module's vectorAdd (whose
// sums are the same): cuKernelGetLibrary names the kernel's library, and a CUkernel is another
// object than any CUfunction of a module, so the two handles differ.
void libraryVectorAddExact([[maybe_unused]] const std::string& fatbinImage, [[maybe_unused]] CUfunction fatbinVectorAdd,
                           [[maybe_unused]] const VectorAddCheck& check, [[maybe_unused]] course::Verdict& verdict) {
#if CUDA_VERSION >= 12000
    CUlibrary library = nullptr;
    CHECK_DRIVER(cuLibraryLoadData(&library, fatbinImage.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    CUkernel libraryVectorAdd = nullptr;
    CHECK_DRIVER(cuLibraryGetKernel(&libraryVectorAdd, library, "vectorAdd"));
    const CUfunction launched = reinterpret_cast<CUfunction>(libraryVectorAdd);
    bool ownKernel = launched != fatbinVectorAdd;
#if CUDA_VERSION >= 12050  // cuKernelGetLibrary came with CUDA 12.5 (headers and driver)
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    if (driverVersion >= 12050) {
        CUlibrary owner = nullptr;
        CHECK_DRIVER(cuKernelGetLibrary(&owner, libraryVectorAdd));
        ownKernel = ownKernel && owner == library;
    }
#endif
    std::printf("vectorAdd launched from the library is the library's kernel, not the fatbin module's: %s\n",
                ownKernel ? "yes" : "NO");
    verdict.check("library's vectorAdd is the library's kernel", ownKernel);
    verdict.check("vector add via the library kernel exact", check.run(launched, "cuLibraryLoadData (CUkernel)"));
    CHECK_DRIVER(cuLibraryUnload(library));
#else
    std::printf("section library: SKIP (cuLibraryLoadData needs CUDA 12.0; compiled with %s)\n",
                course::formatCudaVersion(CUDA_VERSION).c_str());
#endif
}

// Step 7: writes 3.0 into the module's __constant__ gScale and checks scaleByGlobal reads it.
void scaleByGlobalReadsHostWrite(CUmodule module, CUfunction scaleByGlobal, const VectorAddCheck& v,
                                 course::Verdict& verdict) {
    CUdeviceptr scaleAddress = 0;
    std::size_t scaleBytes = 0;
    CHECK_DRIVER(cuModuleGetGlobal(&scaleAddress, &scaleBytes, module, "gScale"));
    float scale = 0.0f;
    CHECK_DRIVER(cuMemcpyDtoH(&scale, scaleAddress, sizeof(scale)));
    std::printf("gScale: %zu bytes, %g in the module image\n", scaleBytes, scale);
    verdict.check("gScale is one float", scaleBytes == sizeof(float));
    scale = 3.0f;
    CHECK_DRIVER(cuMemcpyHtoD(scaleAddress, &scale, sizeof(scale)));
    float stored = 0.0f;
    CHECK_DRIVER(cuMemcpyDtoH(&stored, scaleAddress, sizeof(stored)));
    std::printf("gScale after cuMemcpyHtoD: %g\n", stored);
    verdict.check("gScale reads back the host write", stored == scale);

    CUdeviceptr x = v.x, z = v.z;
    int count = static_cast<int>(v.hostX.size());
    void* params[] = {&x, &z, &count};
    CHECK_DRIVER(cuLaunchKernel(scaleByGlobal, (count + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    CHECK_DRIVER(cuCtxSynchronize());
    std::vector<float> result(v.hostX.size());
    CHECK_DRIVER(cuMemcpyDtoH(result.data(), z, result.size() * sizeof(float)));
    int wrong = 0;
    for (int i = 0; i < count; ++i) wrong += result[i] != scale * v.hostX[i];
    std::printf("scaleByGlobal used gScale = %g: %s\n", scale, wrong == 0 ? "exact" : "WRONG");
    verdict.check("scaleByGlobal used the host-written gScale", wrong == 0);
}

// Step 8: one thread per block more than each function's own CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK.
// cuLaunchKernel refuses each before anything runs; launch_limits.h says which code each gets.
void tooWideLaunchesRefused(CUdevice device, CUmodule module, CUfunction saxpy, course::Verdict& verdict) {
    CUfunction boundedKernel = nullptr;
    CUfunction registerHungry = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&boundedKernel, module, "boundedKernel"));
    CHECK_DRIVER(cuModuleGetFunction(&registerHungry, module, "registerHungry"));
    int deviceMaxThreads = 0;
    int registersPerBlock = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&deviceMaxThreads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&registersPerBlock, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, device));
    int saxpyMaxThreads = 0, boundedMaxThreads = 0, hungryMaxThreads = 0;
    CHECK_DRIVER(cuFuncGetAttribute(&saxpyMaxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, saxpy));
    CHECK_DRIVER(cuFuncGetAttribute(&boundedMaxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, boundedKernel));
    CHECK_DRIVER(cuFuncGetAttribute(&hungryMaxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, registerHungry));
    // The one limit the source states: boundedKernel's __launch_bounds__, shared with the kernel.
    verdict.check("boundedKernel's limit is its __launch_bounds__",
                  boundedMaxThreads == lesson06::kBoundedKernelThreads);
    float a = 0.0f;
    CUdeviceptr none = 0;  // never dereferenced: the launches are refused
    int count = 0;
    void* params[] = {&a, &none, &none, &count};
    void* hungryParams[] = {&none, &count};
    const CUresult saxpyWide =
        REPORT_DRIVER(cuLaunchKernel(saxpy, 1, 1, 1, saxpyMaxThreads + 1, 1, 1, 0, nullptr, params, nullptr));
    const CUresult boundedWide = REPORT_DRIVER(
        cuLaunchKernel(boundedKernel, 1, 1, 1, boundedMaxThreads + 1, 1, 1, 0, nullptr, nullptr, nullptr));
    const CUresult hungryWide = REPORT_DRIVER(
        cuLaunchKernel(registerHungry, 1, 1, 1, hungryMaxThreads + 1, 1, 1, 0, nullptr, hungryParams, nullptr));
    bool documented = true;
    for (const auto& [name, function, maxThreads, result] :
         {std::tuple{"saxpy", saxpy, saxpyMaxThreads, saxpyWide},
          std::tuple{"boundedKernel", boundedKernel, boundedMaxThreads, boundedWide},
          std::tuple{"registerHungry", registerHungry, hungryMaxThreads, hungryWide}}) {
        int registers = 0;
        CHECK_DRIVER(cuFuncGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS, function));
        std::printf("cuLaunchKernel with %d threads per block (%s max %d, device max %d): %s\n", maxThreads + 1, name,
                    maxThreads, deviceMaxThreads, course::driverErrorName(result));
        const bool asDocumented =
            result == lesson06::tooWideLaunchCode(maxThreads, registers, deviceMaxThreads, registersPerBlock);
        verdict.check(("too-wide launch of " + std::string(name) + " refused with the expected code").c_str(),
                      asDocumented);
        documented = asDocumented && documented;
    }
    std::printf("too-wide launches refused with the expected codes: %s\n", documented ? "yes" : "NO");
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;

    // Step 1: the module files sit next to the executable (kernels/), found through /proc/self/exe,
    // so any working directory works. A missing one is named with its full path, before cuInit.
    course::printStep(1, "find the module files");
    const std::string fatbinPath = course::kernelPath("vector_ops.fatbin");
    const std::optional<std::string> fatbinImage = course::readFile(fatbinPath);
    const std::optional<std::string> cubinImage = course::readFile(course::kernelPath("vector_ops.cubin"));
    const std::optional<std::string> ptxImage = course::readFile(course::kernelPath("vector_ops.ptx"));
    if (!fatbinImage || !cubinImage || !ptxImage) {
        std::fprintf(stderr, "The lesson's module files are built next to its programs: run make build-06.\n");
        return EXIT_FAILURE;
    }
    std::printf("module file: kernels/vector_ops.fatbin (%zu bytes)\n", fatbinImage->size());
    std::printf("module file: kernels/vector_ops.cubin (%zu bytes)\n", cubinImage->size());
    std::printf("module file: kernels/vector_ops.ptx (%zu bytes)\n", ptxImage->size());

    // Step 2: the driver reads the variables that steer module loading once, in cuInit. The JIT
    // cache goes off (unless you chose), so that step 5 really compiles. The primary context
    // (lesson 04) is retained, then made current: retaining alone does not make it current.
    course::printStep(2, "driver, device and the primary context");
    lesson06::disableJitCacheUnlessChosen();
    lesson06::printDriverEnvironment();
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    int ccMajor = 0;
    int ccMinor = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&ccMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&ccMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
    std::printf("device %d compute capability: %d.%d\n", args.deviceOrdinal(), ccMajor, ccMinor);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));

    // Step 3: way 1, cuModuleLoad from a file. The fatbin is the format to ship: the driver
    // takes the SASS built for this GPU, or JIT-compiles the PTX inside for a newer one.
    // A module belongs to the context that is current when it is loaded.
    // The full path matters: a relative one is resolved from the working directory, not the program's.
    course::printStep(3, "load the fatbin from a file, get functions, pick a launch shape");
    course::Verdict verdict;
    CUmodule fileModule = nullptr;
    const CUresult fileLoaded = REPORT_DRIVER(cuModuleLoad(&fileModule, fatbinPath.c_str()));
    std::printf("cuModuleLoad(kernels/vector_ops.fatbin): %s\n", fileLoaded == CUDA_SUCCESS ? "loaded" : "NOT loaded");
    if (!verdict.check("cuModuleLoad finds the fatbin by its full path", fileLoaded == CUDA_SUCCESS)) {
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));  // the only thing held so far
        return verdict.finish();
    }
    CUfunction vectorAdd = nullptr;
    CUfunction saxpy = nullptr;
    CUfunction scaleByGlobal = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&vectorAdd, fileModule, "vectorAdd"));
    CHECK_DRIVER(cuModuleGetFunction(&saxpy, fileModule, "saxpy"));
    CHECK_DRIVER(cuModuleGetFunction(&scaleByGlobal, fileModule, "scaleByGlobal"));
    printCodeTaken("vectorAdd from the fatbin", vectorAdd);
    // The block size that gives the most resident threads per SM for this kernel, and the
    // number of such blocks that fills every SM once: all a grid-stride kernel needs.
    int fillGridBlocks = 0;
    int blockThreads = 0;
    CHECK_DRIVER(cuOccupancyMaxPotentialBlockSize(&fillGridBlocks, &blockThreads, vectorAdd, nullptr, 0, 0));
    std::printf("occupancy: %d threads per block, %d blocks fill the GPU\n", blockThreads, fillGridBlocks);
    verdict.check("occupancy's answer agrees with the device and the function",
                  lesson06::occupancyAnswerHolds(device, vectorAdd, fillGridBlocks, blockThreads));

    // 1 Mi + 3 elements: the float4 loop covers 1 Mi, the scalar tail the last 3.
    constexpr int kCount = (1 << 20) + 3;
    constexpr std::size_t kBytes = kCount * sizeof(float);
    std::vector<float> hostX(kCount);
    std::vector<float> hostY(kCount);
    for (int i = 0; i < kCount; ++i) {
        hostX[i] = static_cast<float>(i) * 0.25f;
        hostY[i] = 1.0f / static_cast<float>(1 + i % 13);
    }
    CUdeviceptr x = 0;
    CUdeviceptr y = 0;
    CUdeviceptr z = 0;
    CHECK_DRIVER(cuMemAlloc(&x, kBytes));
    CHECK_DRIVER(cuMemAlloc(&y, kBytes));
    CHECK_DRIVER(cuMemAlloc(&z, kBytes));
    CHECK_DRIVER(cuMemcpyHtoD(x, hostX.data(), kBytes));
    CHECK_DRIVER(cuMemcpyHtoD(y, hostY.data(), kBytes));
    const int gridBlocks = std::min(fillGridBlocks, (kCount / 4 + blockThreads - 1) / blockThreads);
    std::printf("vectorAdd launch shape: %d blocks x %d threads for %d elements\n", gridBlocks, blockThreads, kCount);
    const VectorAddCheck check{x, y, z, hostX, hostY, gridBlocks, blockThreads};
    verdict.check("vector add via the fatbin file exact", check.run(vectorAdd, "cuModuleLoad (fatbin file)"));

    // Step 4: way 2, cuModuleLoadData: an image already in memory (read from a file here;
    // embedded in the executable, downloaded or decrypted in real deployments).
    course::printStep(4, "the cubin, from memory");
    if (lesson06::cubinRunsOn(lesson06::kCubinArch, ccMajor, ccMinor)) {
        CUmodule imageModule = nullptr;
        CHECK_DRIVER(cuModuleLoadData(&imageModule, cubinImage->data()));
        CUfunction imageVectorAdd = nullptr;
        CHECK_DRIVER(cuModuleGetFunction(&imageVectorAdd, imageModule, "vectorAdd"));
        verdict.check("cubin's vectorAdd is located in the cubin's module",
                      lesson06::locatedIn("vectorAdd from the cubin", imageVectorAdd, imageModule));
        verdict.check("vector add via the cubin image exact",
                      check.run(imageVectorAdd, "cuModuleLoadData (cubin image)"));
        CHECK_DRIVER(cuModuleUnload(imageModule));
    } else {
        std::printf(
            "section cubin: SKIP (cubin built for sm_%d, device is sm_%d%d; rebuild it here with "
            "make clean && make build-06, or CUBIN_ARCH=%d%d)\n",
            lesson06::kCubinArch, ccMajor, ccMinor, ccMajor, ccMinor);
    }

    // Step 5: way 3, the PTX text, also with cuModuleLoadData: the driver's JIT compiles it for
    // this GPU inside the call (program 2 passes JIT options to see what it says). With
    // CUDA_DISABLE_PTX_JIT=1 the driver refuses PTX, and says so with its own error code.
    course::printStep(5, "the PTX, compiled by the driver's JIT");
    CUmodule ptxModule = nullptr;
    const CUresult ptxLoaded = REPORT_DRIVER(cuModuleLoadData(&ptxModule, ptxImage->c_str()));
    if (ptxLoaded == CUDA_ERROR_JIT_COMPILATION_DISABLED) {
        std::printf("section PTX: SKIP (the driver refused the PTX with %s: CUDA_DISABLE_PTX_JIT is set)\n",
                    course::driverErrorName(ptxLoaded));
    } else {
        CHECK_DRIVER(ptxLoaded);
        CUfunction ptxVectorAdd = nullptr;
        CHECK_DRIVER(cuModuleGetFunction(&ptxVectorAdd, ptxModule, "vectorAdd"));
        printCodeTaken("vectorAdd from the PTX", ptxVectorAdd);
        verdict.check("PTX's vectorAdd is located in the PTX's module",
                      lesson06::locatedIn("vectorAdd from the PTX", ptxVectorAdd, ptxModule));
        verdict.check("vector add via the JIT-compiled PTX exact",
                      check.run(ptxVectorAdd, "cuModuleLoadData (PTX, JIT)"));
        CHECK_DRIVER(cuModuleUnload(ptxModule));
    }

    // Step 6: way 4, cuLibraryLoadData (CUDA 12.0+): a context-independent library. The
    // driver loads it into every context that uses one of its kernels, so a library or plug-in
    // can load its code once without owning a context. A CUkernel may be passed to
    // cuLaunchKernel cast to CUfunction, as the reference allows: it runs in the current context.
    course::printStep(6, "the fatbin as a context-independent library");
    libraryVectorAddExact(*fatbinImage, vectorAdd, check, verdict);

    // Step 7: a module global. cuModuleGetGlobal returns the device address and size of a
    // __device__ or __constant__ variable by name; ordinary copies then read and write it.
    course::printStep(7, "write a __constant__ global from the host");
    scaleByGlobalReadsHostWrite(fileModule, scaleByGlobal, check, verdict);

    // Step 8: kernelParams, the usual argument style, then launches wider than allowed.
    course::printStep(8, "launch with a kernelParams array, and wider than allowed");
    lesson06::saxpyWithinTolerance(saxpy, check, verdict);
    tooWideLaunchesRefused(device, fileModule, saxpy, verdict);

    // Step 9: release in reverse order of creation. Unloading a module frees its code and
    // globals; the primary context stays alive while anyone (the runtime too) retains it.
    course::printStep(9, "release and check");
    CHECK_DRIVER(cuMemFree(z));
    CHECK_DRIVER(cuMemFree(y));
    CHECK_DRIVER(cuMemFree(x));
    CHECK_DRIVER(cuModuleUnload(fileModule));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: 3 buffers, 1 module, the primary context\n");
    return verdict.finish();
}
