// Lesson 07, program 4 — one device, one context, two APIs: the same answers.
//
// The runtime's device queries (cudaGetDeviceProperties, cudaDeviceGetAttribute,
// cudaMemGetInfo) and its limits (cudaDeviceGetLimit, cudaDeviceSetLimit) answer for the
// device of the current context, as the driver's do. This program asks both APIs the same
// questions in the primary context and compares the answers: a value set through one API
// is read back through the other.
//
//   device_identity [--device N]
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "interop.h"

namespace {

// The UUID in nvidia-smi's form: GPU-8-4-4-4-12 hex digits (as lesson 01 prints it).
void printUuid(const char* label, const char* bytes) {
    const auto* b = reinterpret_cast<const unsigned char*>(bytes);
    std::printf("%s: GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n", label, b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    // Step 1: the driver picks the device and makes its primary context current, the context
    // the runtime would take for itself. cudaGetDevice then names the current context's device
    // in the runtime's numbering: no ordinal is assumed to mean the same in both APIs.
    course::printStep(1, "the primary context, current for both APIs");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    CUcontext primary = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&primary, device));
    CHECK_DRIVER(cuCtxPushCurrent(primary));
    int runtimeDevice = -1;
    CHECK_RUNTIME(cudaGetDevice(&runtimeDevice));
    std::printf("cudaGetDevice: %d\n", runtimeDevice);
    course::Verdict verdict;

    // Step 2: the device's identity. The runtime fills one cudaDeviceProp; the driver answers
    // one question a call. Each driver answer is compared with the runtime's field.
    course::printStep(2, "the device, asked through both APIs");
    cudaDeviceProp prop{};
    CHECK_RUNTIME(cudaGetDeviceProperties(&prop, runtimeDevice));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("cuDeviceGetName: %s\n", name);
    std::printf("cudaDeviceProp::name: %s\n", prop.name);
    verdict.check("cuDeviceGetName matches the runtime's name", std::strcmp(name, prop.name) == 0);

    size_t totalBytes = 0;
    CHECK_DRIVER(cuDeviceTotalMem(&totalBytes, device));
    std::printf("cuDeviceTotalMem: %zu bytes\n", totalBytes);
    std::printf("cudaDeviceProp::totalGlobalMem: %zu bytes\n", prop.totalGlobalMem);
    verdict.check("cuDeviceTotalMem matches the runtime's totalGlobalMem", totalBytes == prop.totalGlobalMem);

    CUuuid uuid{};
    CHECK_DRIVER(cuDeviceGetUuid(&uuid, device));
    printUuid("cuDeviceGetUuid", uuid.bytes);
    printUuid("cudaDeviceProp::uuid", prop.uuid.bytes);
    verdict.check("cuDeviceGetUuid matches the runtime's uuid",
                  std::memcmp(uuid.bytes, prop.uuid.bytes, sizeof(uuid.bytes)) == 0);

    int major = 0;
    int minor = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
    int smCount = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
    int runtimeSmCount = 0;
    CHECK_RUNTIME(cudaDeviceGetAttribute(&runtimeSmCount, cudaDevAttrMultiProcessorCount, runtimeDevice));
    std::printf("compute capability, cuDeviceGetAttribute: %d.%d\n", major, minor);
    std::printf("compute capability, cudaDeviceProp::major.minor: %d.%d\n", prop.major, prop.minor);
    std::printf("multiprocessors, cuDeviceGetAttribute: %d\n", smCount);
    std::printf("multiprocessors, cudaDeviceGetAttribute: %d\n", runtimeSmCount);
    verdict.check("compute capability matches the runtime's major.minor", major == prop.major && minor == prop.minor);
    verdict.check("multiprocessor count matches cudaDeviceGetAttribute", smCount == runtimeSmCount);

    // Both memory queries answer for the current context: the totals are the same number.
    // The free figures are printed by neither: they move with every allocation in the process
    // and on the GPU.
    size_t freeBytes = 0;
    size_t contextTotal = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &contextTotal));
    size_t runtimeFree = 0;
    size_t runtimeTotal = 0;
    CHECK_RUNTIME(cudaMemGetInfo(&runtimeFree, &runtimeTotal));
    std::printf("cuMemGetInfo total: %zu bytes\n", contextTotal);
    std::printf("cudaMemGetInfo total: %zu bytes\n", runtimeTotal);
    verdict.check("cuMemGetInfo's total matches cudaMemGetInfo's", contextTotal == runtimeTotal);

    // Step 3: one context, one setting. A limit belongs to the context, not to an API: the
    // runtime sets the malloc heap, the driver sets the printf FIFO, and each is read back
    // through the other API. The driver "is free to modify the requested value" (cuda.h,
    // cuCtxSetLimit), so each API's reading is compared with the other's, and with the value
    // before the change. No kernel has run: cuda.h allows both limits to be set only before
    // a kernel that uses device malloc or printf.
    course::printStep(3, "a limit set through one API, read through the other");
    constexpr size_t kHeapBytes = 48u << 20;  // chosen to differ from the value printed before
    constexpr size_t kFifoBytes = 3u << 20;
    size_t heapBefore = 0;
    CHECK_DRIVER(cuCtxGetLimit(&heapBefore, CU_LIMIT_MALLOC_HEAP_SIZE));
    CHECK_RUNTIME(cudaDeviceSetLimit(cudaLimitMallocHeapSize, kHeapBytes));
    size_t heapDriver = 0;
    CHECK_DRIVER(cuCtxGetLimit(&heapDriver, CU_LIMIT_MALLOC_HEAP_SIZE));
    size_t heapRuntime = 0;
    CHECK_RUNTIME(cudaDeviceGetLimit(&heapRuntime, cudaLimitMallocHeapSize));
    std::printf("malloc heap, cuCtxGetLimit before cudaDeviceSetLimit: %zu bytes\n", heapBefore);
    std::printf("malloc heap, cuCtxGetLimit after: %zu bytes\n", heapDriver);
    std::printf("malloc heap, cudaDeviceGetLimit after: %zu bytes\n", heapRuntime);
    verdict.check("cuCtxGetLimit reads the heap size cudaDeviceSetLimit set",
                  heapDriver == heapRuntime && heapDriver != heapBefore);

    size_t fifoBefore = 0;
    CHECK_RUNTIME(cudaDeviceGetLimit(&fifoBefore, cudaLimitPrintfFifoSize));
    CHECK_DRIVER(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, kFifoBytes));
    size_t fifoRuntime = 0;
    CHECK_RUNTIME(cudaDeviceGetLimit(&fifoRuntime, cudaLimitPrintfFifoSize));
    size_t fifoDriver = 0;
    CHECK_DRIVER(cuCtxGetLimit(&fifoDriver, CU_LIMIT_PRINTF_FIFO_SIZE));
    std::printf("printf FIFO, cudaDeviceGetLimit before cuCtxSetLimit: %zu bytes\n", fifoBefore);
    std::printf("printf FIFO, cudaDeviceGetLimit after: %zu bytes\n", fifoRuntime);
    std::printf("printf FIFO, cuCtxGetLimit after: %zu bytes\n", fifoDriver);
    verdict.check("cudaDeviceGetLimit reads the FIFO size cuCtxSetLimit set",
                  fifoRuntime == fifoDriver && fifoRuntime != fifoBefore);

    // Step 4: release in reverse order: pop, then the one release for the one retain (cuda.h:
    // "The context is automatically reset once the last reference to it is released").
    course::printStep(4, "release");
    CUcontext popped = nullptr;
    CHECK_DRIVER(cuCtxPopCurrent(&popped));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));

    // Step 5: each check above printed its line where the program learnt the answer.
    course::printStep(5, "check");
    return verdict.finish();
}
