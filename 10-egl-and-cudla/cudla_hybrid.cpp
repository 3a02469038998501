// Lesson 10, program 3 — cuDLA in hybrid mode: a DLA task on a CUDA stream (Jetson only).
//
// Jetson Xavier and Orin (AGX, NX) carry DLA engines, fixed-function inference
// accelerators. cuDLA's hybrid mode submits a DLA task on a CUDA stream, so stream
// order covers the DLA too: CUDA fills the inputs, the DLA runs, CUDA reads the
// outputs, with no CPU wait in between. cudla.h and libcudla.so ship only in aarch64
// Jetson toolkits (JetPack): elsewhere this program names the device and SKIPs, saying why.
//
//   cudla_hybrid [--device N] [--loadable FILE]
//     --loadable FILE   a DLA loadable built by TensorRT (trtexec --useDLACore=0 --buildDLAStandalone ...)
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

#if __has_include(<cudla.h>)
#include <cudla.h>

#include <cstdint>
#include <cstdlib>

namespace {

// cuDLA has its own status type; a failure ends the program like CHECK_DRIVER does.
void checkDla(cudlaStatus status, const char* call) {
    if (status == cudlaSuccess) return;
    std::fflush(stdout);
    std::fprintf(stderr, "cuDLA call failed: %s: cudlaStatus %d\n", call, static_cast<int>(status));
    std::exit(EXIT_FAILURE);
}

// One tensor of the loadable: CUDA memory, zeroed on the DLA's stream, then registered so
// that the DLA (behind its own SMMU) can reach it. `registered` is the DLA's view of it.
struct Tensor {
    CUdeviceptr memory = 0;
    std::uint64_t* registered = nullptr;
};

Tensor prepareTensor(cudlaDevHandle dla, CUstream stream, const cudlaModuleTensorDescriptor& d, const char* role) {
    std::printf("DLA %s tensor %s: %llu bytes (n %llu, c %llu, h %llu, w %llu)\n", role, d.name,
                static_cast<unsigned long long>(d.size), static_cast<unsigned long long>(d.n),
                static_cast<unsigned long long>(d.c), static_cast<unsigned long long>(d.h),
                static_cast<unsigned long long>(d.w));
    Tensor tensor;
    CHECK_DRIVER(cuMemAlloc(&tensor.memory, d.size));
    CHECK_DRIVER(cuMemsetD8Async(tensor.memory, 0, d.size, stream));
    checkDla(
        cudlaMemRegister(dla, reinterpret_cast<const std::uint64_t*>(tensor.memory), d.size, &tensor.registered, 0),
        "cudlaMemRegister(dla, memory, size, &registered, 0)");
    return tensor;
}

}  // namespace
#endif

int main(int argc, char** argv) {
    // parseArguments takes integer options only, so the one string option is taken out first.
    const char* usage = "[--device N] [--loadable FILE]";
    std::string loadablePath;
    std::vector<char*> forwarded{argv[0]};
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--loadable") != 0) {
            forwarded.push_back(argv[i]);
        } else if (i + 1 < argc) {
            loadablePath = argv[++i];
        } else {
            std::fprintf(stderr, "%s: --loadable needs a file\nusage: %s %s\n", argv[0], argv[0], usage);
            return course::kExitUsage;
        }
    }
    course::Arguments args;
    if (!course::parseArguments(static_cast<int>(forwarded.size()), forwarded.data(), {}, {"--device"}, usage, args))
        return course::kExitUsage;

    // Step 1: cuDLA drives the DLA of a Jetson SoC; the GPU beside it is integrated.
    course::printStep(1, "the device, and whether it is integrated");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, args.deviceOrdinal()));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device name: %s\n", name);
    int integrated = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED, device));
    std::printf("integrated: %d\n", integrated);
#if !__has_include(<cudla.h>)
    // Decided at build time: without the header there is no cuDLA call this build could make.
    std::printf(
        "Result = SKIP (cudla.h was not found at build time: cuDLA ships only in aarch64 Jetson toolkits "
        "(JetPack), and only Jetson Xavier and Orin AGX/NX have DLA engines)\n");
    return course::kExitNotApplicable;
#else
    if (integrated == 0) {
        std::printf("Result = SKIP (cuDLA works only with a Jetson's integrated GPU; this device is discrete)\n");
        return course::kExitNotApplicable;
    }
    // Hybrid mode allocates through the primary context of the current device, so that is
    // the context made current here (destroy every cuDLA device before releasing it).
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    CHECK_DRIVER(cuCtxPushCurrent(primary));

    // Step 2: the DLA engines and a device handle in hybrid mode (CUDLA_CUDA_DLA).
    course::printStep(2, "DLA engines and a hybrid-mode device");
    std::uint64_t dlaCount = 0;
    checkDla(cudlaDeviceGetCount(&dlaCount), "cudlaDeviceGetCount(&dlaCount)");
    std::printf("DLA engines: %llu\n", static_cast<unsigned long long>(dlaCount));
    const auto loadable = loadablePath.empty() ? std::nullopt : course::readFile(loadablePath);
    const char* skipReason = nullptr;
    if (dlaCount == 0)
        skipReason = "this Jetson has no DLA engine (Orin Nano has none)";
    else if (loadablePath.empty())
        skipReason = "no loadable: run with --loadable FILE, a DLA loadable built by TensorRT";
    else if (!loadable)
        skipReason = "the loadable could not be read (see the message above)";
    cudlaDevHandle dla = nullptr;
    if (dlaCount > 0) {
        checkDla(cudlaCreateDevice(0, &dla, CUDLA_CUDA_DLA), "cudlaCreateDevice(0, &dla, CUDLA_CUDA_DLA)");
        std::printf("cudlaCreateDevice(0, hybrid): cudlaSuccess\n");
    }

    // Step 3: load the loadable and read its tensor descriptors.
    course::printStep(3, "module and tensors");
    course::Verdict verdict;
    if (skipReason != nullptr) {
        std::printf("section cuDLA task: SKIP (%s)\n", skipReason);
    } else {
        CUstream stream = nullptr;
        CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
        cudlaModule dlaModule = nullptr;
        checkDla(cudlaModuleLoadFromMemory(dla, reinterpret_cast<const std::uint8_t*>(loadable->data()),
                                           loadable->size(), &dlaModule, 0),
                 "cudlaModuleLoadFromMemory(dla, loadable, size, &dlaModule, 0)");
        cudlaModuleAttribute attribute{};
        checkDla(cudlaModuleGetAttributes(dlaModule, CUDLA_NUM_INPUT_TENSORS, &attribute), "CUDLA_NUM_INPUT_TENSORS");
        std::vector<cudlaModuleTensorDescriptor> inputs(attribute.numInputTensors);
        checkDla(cudlaModuleGetAttributes(dlaModule, CUDLA_NUM_OUTPUT_TENSORS, &attribute), "CUDLA_NUM_OUTPUT_TENSORS");
        std::vector<cudlaModuleTensorDescriptor> outputs(attribute.numOutputTensors);
        attribute.inputTensorDesc = inputs.data();
        checkDla(cudlaModuleGetAttributes(dlaModule, CUDLA_INPUT_TENSOR_DESCRIPTORS, &attribute),
                 "CUDLA_INPUT_TENSOR_DESCRIPTORS");
        attribute.outputTensorDesc = outputs.data();
        checkDla(cudlaModuleGetAttributes(dlaModule, CUDLA_OUTPUT_TENSOR_DESCRIPTORS, &attribute),
                 "CUDLA_OUTPUT_TENSOR_DESCRIPTORS");
        std::vector<Tensor> inputTensors, outputTensors;
        std::vector<std::uint64_t*> inputPointers, outputPointers;
        for (const auto& d : inputs) inputTensors.push_back(prepareTensor(dla, stream, d, "input"));
        for (const auto& d : outputs) outputTensors.push_back(prepareTensor(dla, stream, d, "output"));
        for (const Tensor& t : inputTensors) inputPointers.push_back(t.registered);
        for (const Tensor& t : outputTensors) outputPointers.push_back(t.registered);

        // Step 4: the task goes on the CUDA stream behind the memsets: stream order covers the DLA.
        course::printStep(4, "submit on a CUDA stream and synchronise");
        cudlaTask task{};
        task.moduleHandle = dlaModule;
        task.inputTensor = inputPointers.data();
        task.numInputTensors = static_cast<std::uint32_t>(inputPointers.size());
        task.outputTensor = outputPointers.data();
        task.numOutputTensors = static_cast<std::uint32_t>(outputPointers.size());
        checkDla(cudlaSubmitTask(dla, &task, 1, stream, 0), "cudlaSubmitTask(dla, &task, 1, stream, 0)");
        // A DLA hardware error surfaces at CUDA synchronisation as CUDA_ERROR_EXTERNAL_DEVICE;
        // cudlaGetLastError on the handle then says which.
        const CUresult synced = REPORT_DRIVER(cuStreamSynchronize(stream));
        const cudlaStatus hardware = cudlaGetLastError(dla);
        std::printf("cuStreamSynchronize after the DLA task: %s\n", course::driverErrorName(synced));
        std::printf("cudlaGetLastError: %d\n", static_cast<int>(hardware));
        verdict.check("DLA task completes on the CUDA stream", synced == CUDA_SUCCESS);
        verdict.check("cudlaGetLastError reports no DLA error", hardware == cudlaSuccess);
        for (const Tensor& t : outputTensors)
            checkDla(cudlaMemUnregister(dla, t.registered), "cudlaMemUnregister(output)");
        for (const Tensor& t : inputTensors)
            checkDla(cudlaMemUnregister(dla, t.registered), "cudlaMemUnregister(input)");
        for (const Tensor& t : outputTensors) CHECK_DRIVER(cuMemFree(t.memory));
        for (const Tensor& t : inputTensors) CHECK_DRIVER(cuMemFree(t.memory));
        checkDla(cudlaModuleUnload(dlaModule, 0), "cudlaModuleUnload(dlaModule, 0)");
        CHECK_DRIVER(cuStreamDestroy(stream));
    }

    // Step 5: the cuDLA device goes before the primary context it allocates through.
    course::printStep(5, "release and check");
    if (dla != nullptr) checkDla(cudlaDestroyDevice(dla), "cudlaDestroyDevice(dla)");
    CHECK_DRIVER(cuCtxPopCurrent(nullptr));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    if (dlaCount == 0) {
        std::printf("Result = SKIP (%s)\n", skipReason);
        return course::kExitNotApplicable;
    }
    return verdict.finish();
#endif
}
