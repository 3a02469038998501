// Lesson 06, program 5 of 6 — the parameter buffer: cuLaunchKernel's other argument style.
//
// With `extra` and CU_LAUNCH_PARAM_BUFFER_POINTER the program passes all of a kernel's
// arguments packed into one buffer, so it must put each one at the offset the kernel reads
// it from. This program launches echoParams (a float, a float4, a padded struct, an int and
// a pointer) both ways, prints its offsets beside the driver's, and shows which buffer size
// the driver accepts.
//
//   param_buffer [--device N]
#include <cuda.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "driver_env.h"
#include "param_buffer.h"
#include "param_types.h"

namespace {

constexpr int kEchoFloats = 11;
using EchoValues = std::array<float, kEchoFloats>;

// Runs echoParams once with either kernelParams or extra and returns the 11 floats it wrote.
EchoValues launchEcho(CUfunction echoParams, CUdeviceptr out, void** kernelParams, void** extra) {
    CHECK_DRIVER(cuLaunchKernel(echoParams, 1, 1, 1, 1, 1, 1, 0, nullptr, kernelParams, extra));
    CHECK_DRIVER(cuCtxSynchronize());
    EchoValues values{};
    CHECK_DRIVER(cuMemcpyDtoH(values.data(), out, sizeof(values)));
    return values;
}

// Step 4's table: each argument's offset, size and alignment as ParamBuffer placed it, and,
// where cuFuncGetParamInfo exists (CUDA 12.4+), the layout the driver reads from the kernel's
// image beside it. True when every offset and size agrees (or the driver cannot say).
bool layoutAgrees([[maybe_unused]] CUfunction echoParams, const std::array<std::size_t, 5>& offsets, int driverVersion) {
    const std::array<std::size_t, 5> sizes = {sizeof(float), sizeof(float4), sizeof(FloatAndFloat4), sizeof(int),
                                              sizeof(CUdeviceptr)};
    const std::array<std::size_t, 5> alignments = {alignof(float), alignof(float4), alignof(FloatAndFloat4),
                                                   alignof(int), alignof(CUdeviceptr)};
    const std::array<const char*, 5> labels = {"a (float)", "v (float4)", "s (FloatAndFloat4)", "n (int)",
                                               "out (float*)"};
    bool driverKnowsLayout = false;
#if CUDA_VERSION >= 12040
    driverKnowsLayout = driverVersion >= 12040;
#endif
    bool agree = true;
    for (std::size_t i = 0; i < offsets.size(); ++i) {
        std::printf("param %zu %s: offset %zu, size %zu, align %zu", i, labels[i], offsets[i], sizes[i], alignments[i]);
#if CUDA_VERSION >= 12040
        if (driverKnowsLayout) {
            std::size_t driverOffset = 0;
            std::size_t driverSize = 0;
            CHECK_DRIVER(cuFuncGetParamInfo(echoParams, i, &driverOffset, &driverSize));
            const bool same = driverOffset == offsets[i] && driverSize == sizes[i];
            std::printf("; driver: offset %zu, size %zu%s", driverOffset, driverSize, same ? "" : " MISMATCH");
            agree = same && agree;
        }
#endif
        std::printf("\n");
    }
    if (!driverKnowsLayout)
        std::printf("driver's layout: not shown (cuFuncGetParamInfo needs CUDA 12.4 in both cuda.h and the driver; "
                    "built with %s, the driver is %s)\n",
                    course::formatCudaVersion(CUDA_VERSION).c_str(), course::formatCudaVersion(driverVersion).c_str());
    return agree;
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;

    // Step 1: the fatbin next to the executable (kernels/), found through /proc/self/exe.
    course::printStep(1, "find the module file");
    const std::optional<std::string> fatbinImage = course::readFile(course::kernelPath("vector_ops.fatbin"));
    if (!fatbinImage) {
        std::fprintf(stderr, "The lesson's module files are built next to its programs: run make build-06.\n");
        return EXIT_FAILURE;
    }
    std::printf("module file: kernels/vector_ops.fatbin (%zu bytes)\n", fatbinImage->size());

    // Step 2: the usual start: driver, device, primary context made current, the module.
    course::printStep(2, "driver, device, primary context, module");
    lesson06::printDriverEnvironment();
    CHECK_DRIVER(cuInit(0));
    int driverVersion = 0;
    CHECK_DRIVER(cuDriverGetVersion(&driverVersion));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoadData(&module, fatbinImage->data()));
    CUfunction echoParams = nullptr;
    CUfunction scaleByGlobal = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&echoParams, module, "echoParams"));
    CHECK_DRIVER(cuModuleGetFunction(&scaleByGlobal, module, "scaleByGlobal"));
    std::printf("module: loaded, echoParams and scaleByGlobal found\n");

    // Step 3: kernelParams: one pointer per parameter, each to a host variable of exactly the
    // parameter's type; the driver knows the layout from the module. echoParams writes back
    // every value it received: the test of whether each argument landed in the right place.
    course::printStep(3, "echoParams with a kernelParams array");
    float echoA = 1.5f;
    float4 echoV = {2.0f, 3.0f, 4.0f, 5.0f};
    FloatAndFloat4 echoS = {6.0f, {7.0f, 8.0f, 9.0f, 10.0f}};
    int echoN = 11;
    const EchoValues expected = {1.5f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f};
    CUdeviceptr outArray = 0;
    CUdeviceptr outBuffer = 0;
    CHECK_DRIVER(cuMemAlloc(&outArray, sizeof(EchoValues)));
    CHECK_DRIVER(cuMemAlloc(&outBuffer, sizeof(EchoValues)));
    void* params[] = {&echoA, &echoV, &echoS, &echoN, &outArray};
    const EchoValues fromArray = launchEcho(echoParams, outArray, params, nullptr);
    std::printf("echoParams via kernelParams: %s\n", fromArray == expected ? "every field arrived" : "WRONG");
    course::Verdict verdict;
    verdict.check("every field arrived via kernelParams", fromArray == expected);

    // Step 4: the same arguments packed by the program into one buffer, passed in `extra`.
    // ParamBuffer::add places each at the next multiple of alignof(its type), as a C struct
    // places its members, and returns that offset.
    course::printStep(4, "echoParams with one parameter buffer");
    lesson06::ParamBuffer buffer;
    const std::array<std::size_t, 5> offsets = {buffer.add(echoA), buffer.add(echoV), buffer.add(echoS),
                                                buffer.add(echoN), buffer.add(outBuffer)};
    verdict.check("parameter offsets and sizes agree with the driver's",
                  layoutAgrees(echoParams, offsets, driverVersion));
    std::size_t bufferSize = buffer.size();
    std::printf("parameter buffer size: %zu bytes\n", bufferSize);
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &bufferSize,
                     CU_LAUNCH_PARAM_END};
    const EchoValues fromBuffer = launchEcho(echoParams, outBuffer, nullptr, extra);
    const bool same = std::memcmp(fromBuffer.data(), fromArray.data(), sizeof(fromBuffer)) == 0;
    std::printf("echoParams via parameter buffer: %s\n", fromBuffer == expected ? "every field arrived" : "WRONG");
    std::printf("parameter buffer launch equals kernelParams launch: %s\n", same ? "yes" : "NO");
    verdict.check("every field arrived via the parameter buffer", fromBuffer == expected);
    verdict.check("parameter buffer launch equals kernelParams launch", same);

    // Step 5: the size is the end of the last parameter, not sizeof of a struct with the same
    // members: scaleByGlobal(const float*, float*, int) ends at 20 bytes, while such a struct
    // has 4 bytes of tail padding (24). What the driver answers to 24 is printed.
    course::printStep(5, "the buffer size the driver accepts");
    constexpr int kCount = 1027;
    std::vector<float> hostX(kCount);
    for (int i = 0; i < kCount; ++i) hostX[i] = static_cast<float>(i) * 0.25f;
    CUdeviceptr x = 0;
    CUdeviceptr y = 0;
    CHECK_DRIVER(cuMemAlloc(&x, kCount * sizeof(float)));
    CHECK_DRIVER(cuMemAlloc(&y, kCount * sizeof(float)));
    CHECK_DRIVER(cuMemcpyHtoD(x, hostX.data(), kCount * sizeof(float)));
    CHECK_DRIVER(cuMemsetD32(y, 0, kCount));
    lesson06::ParamBuffer scaleBuffer;
    scaleBuffer.add(x);
    scaleBuffer.add(y);
    scaleBuffer.add(kCount);
    std::size_t exactSize = scaleBuffer.size();
    std::size_t paddedSize = lesson06::alignUp(exactSize, alignof(CUdeviceptr));
    std::vector<unsigned char> paddedBuffer(paddedSize, 0);  // the same bytes, then the padding
    std::memcpy(paddedBuffer.data(), scaleBuffer.data(), exactSize);
    void* padded[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, paddedBuffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &paddedSize,
                      CU_LAUNCH_PARAM_END};
    const CUresult paddedResult = REPORT_DRIVER(
        cuLaunchKernel(scaleByGlobal, (kCount + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, nullptr, padded));
    if (paddedResult == CUDA_SUCCESS) CHECK_DRIVER(cuCtxSynchronize());
    std::printf("buffer size with tail padding: %zu bytes -> %s\n", paddedSize, course::driverErrorName(paddedResult));
    void* exact[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, scaleBuffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &exactSize,
                     CU_LAUNCH_PARAM_END};
    CHECK_DRIVER(cuLaunchKernel(scaleByGlobal, (kCount + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, nullptr, exact));
    CHECK_DRIVER(cuCtxSynchronize());
    std::vector<float> result(kCount);
    CHECK_DRIVER(cuMemcpyDtoH(result.data(), y, kCount * sizeof(float)));
    int wrong = 0;
    for (int i = 0; i < kCount; ++i) wrong += result[i] != hostX[i];  // gScale is 1 in the module image
    std::printf("buffer size to the end of the last parameter: %zu bytes -> %s\n", exactSize,
                wrong == 0 ? "exact" : "WRONG");
    verdict.check("buffer size with tail padding refused", paddedResult != CUDA_SUCCESS);
    verdict.check("buffer size to the end of the last parameter launches exactly", wrong == 0);

    // Step 6: release in reverse order of creation.
    course::printStep(6, "release and check");
    CHECK_DRIVER(cuMemFree(y));
    CHECK_DRIVER(cuMemFree(x));
    CHECK_DRIVER(cuMemFree(outBuffer));
    CHECK_DRIVER(cuMemFree(outArray));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuCtxSetCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: 4 buffers, 1 module, the primary context\n");
    return verdict.finish();
}
