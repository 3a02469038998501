// Lesson 05 — memory: device, pinned, memset, copies, and what pinned memory buys.
//
// The driver knows three kinds of memory: device memory (cuMemAlloc), page-locked
// ("pinned") host memory that it allocated or registered, and ordinary pageable host
// memory, which it never saw. This lesson fills device memory with cuMemsetD8/D16/D32,
// copies between all three, shows how the GPU addresses pinned memory, measures what
// pinned memory buys in bandwidth, and proves that everything was given back.
//
//   05-memory-alloc                  checks at 4 MiB, small bandwidth sweep
//   05-memory-alloc --size BYTES     the memset and copy checks at BYTES (a positive multiple of 4)
//   05-memory-alloc --bench          bandwidth sweep up to 256 MiB, with "bench:" lines
//   05-memory-alloc --device N       another GPU
#include <cuda.h>
#include <sched.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace {

const char* memoryTypeName(unsigned int type) {
    switch (type) {
        case CU_MEMORYTYPE_HOST: return "CU_MEMORYTYPE_HOST";
        case CU_MEMORYTYPE_DEVICE: return "CU_MEMORYTYPE_DEVICE";
        case CU_MEMORYTYPE_ARRAY: return "CU_MEMORYTYPE_ARRAY";
        case CU_MEMORYTYPE_UNIFIED: return "CU_MEMORYTYPE_UNIFIED";
        default: return "(unknown CUmemorytype)";
    }
}

// The memory type the driver records for an address. A host pointer is passed as the
// integer CUdeviceptr: with unified addressing host and device share one address space.
unsigned int memoryTypeOf(CUdeviceptr address) {
    unsigned int type = 0;
    CHECK_DRIVER(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address));
    return type;
}

std::string sizeText(size_t bytes) {
    return bytes >= (size_t{1} << 20) ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes >> 10) + " KiB";
}

enum class Direction { HostToDevice, DeviceToHost };

// One asynchronous copy on `stream`. With pinned `host` memory the call only queues
// the copy; with pageable memory the driver must stage it (see step 8).
void copyAsync(Direction direction, void* host, CUdeviceptr device, size_t bytes, CUstream stream) {
    if (direction == Direction::HostToDevice)
        CHECK_DRIVER(cuMemcpyHtoDAsync(device, host, bytes, stream));
    else
        CHECK_DRIVER(cuMemcpyDtoHAsync(host, device, bytes, stream));
}

// Bandwidth in GB/s (1e9 bytes per second) of `bytes`-sized copies: one warm-up copy,
// then `trials` batches of `copiesPerTrial` back-to-back copies on one stream, each
// batch between two events. Returns the median batch. The events time the GPU's side
// only, so nothing the host does between the calls is counted.
double measureBandwidth(Direction direction, void* host, CUdeviceptr device, size_t bytes, int copiesPerTrial,
                        int trials, CUstream stream, CUevent start, CUevent stop) {
    copyAsync(direction, host, device, bytes, stream);
    std::vector<double> rates;
    for (int trial = 0; trial < trials; ++trial) {
        CHECK_DRIVER(cuEventRecord(start, stream));
        for (int copy = 0; copy < copiesPerTrial; ++copy) copyAsync(direction, host, device, bytes, stream);
        CHECK_DRIVER(cuEventRecord(stop, stream));
        CHECK_DRIVER(cuEventSynchronize(stop));
        float milliseconds = 0.0f;
        CHECK_DRIVER(cuEventElapsedTime(&milliseconds, start, stop));
        rates.push_back(static_cast<double>(bytes) * copiesPerTrial / (milliseconds * 1e-3) / 1e9);
    }
    std::sort(rates.begin(), rates.end());
    return rates[rates.size() / 2];
}

// Binds this thread to the CPUs next to the GPU, as nvbandwidth does, so that the
// pinned buffers allocated next come from the GPU's NUMA node. Linux lists those CPUs
// in sysfs under the device's PCI address ("0-15,32-47"). Returns the list, or why the
// thread's affinity was left as it was.
std::string bindToCpusNearGpu(CUdevice device) {
    char busId[32] = {};
    CHECK_DRIVER(cuDeviceGetPCIBusId(busId, sizeof(busId), device));
    std::string pciAddress = busId;
    for (char& c : pciAddress) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string path = "/sys/bus/pci/devices/" + pciAddress + "/local_cpulist";
    std::ifstream file(path);
    std::string cpuList;
    if (!std::getline(file, cpuList) || cpuList.empty()) return "unchanged (cannot read " + path + ")";

    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    std::istringstream ranges(cpuList);
    for (std::string range; std::getline(ranges, range, ',');) {
        int first = 0;
        int last = 0;
        const int fields = std::sscanf(range.c_str(), "%d-%d", &first, &last);
        if (fields < 1) continue;
        if (fields == 1) last = first;
        for (int cpu = first; cpu <= last && cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &cpus);
    }
    if (sched_setaffinity(0, sizeof(cpus), &cpus) != 0)
        return "unchanged (sched_setaffinity: " + std::string(std::strerror(errno)) + ")";
    return cpuList;
}

// nvbandwidth v0.8 on the course's H100 (pinned memory, copy engines):
// host_to_device_memcpy_ce and device_to_host_memcpy_ce. Other machines differ.
constexpr double kNvbandwidthHostToDevice = 50.99;
constexpr double kNvbandwidthDeviceToHost = 54.37;

}  // namespace

int main(int argc, char** argv) {
    const char* usage = "[--device N] [--size BYTES] [--bench]";
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {"--bench"}, {"--device", "--size"}, usage, args))
        return course::kExitUsage;
    const long long requestedSize = args.valueOr("--size", 4LL << 20);
    if (requestedSize <= 0 || requestedSize % 4 != 0) {
        std::fprintf(stderr,
                     "%s: --size must be a positive multiple of 4 (cuMemsetD32 fills 4-byte elements), got %lld\n",
                     argv[0], requestedSize);
        std::fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return course::kExitUsage;
    }
    const size_t bytes = static_cast<size_t>(requestedSize);
    const bool bench = args.has("--bench");
    const int ordinal = args.deviceOrdinal();

    // Step 1: the device, and what it says about addressing host memory.
    course::printStep(1, "initialise the driver and pick the device");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    int unifiedAddressing = 0;
    int canMapHostMemory = 0;
    int hostPointerForRegistered = 0;
    int pageableMemoryAccess = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&unifiedAddressing, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&canMapHostMemory, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&hostPointerForRegistered,
                                      CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, device));
    CHECK_DRIVER(cuDeviceGetAttribute(&pageableMemoryAccess, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, device));
    std::printf("device %d name: %s\n", ordinal, name);
    std::printf("unified addressing: %s\n", unifiedAddressing ? "yes" : "no");
    std::printf("can map host memory: %s\n", canMapHostMemory ? "yes" : "no");
    std::printf("can use host pointer for registered memory: %s\n", hostPointerForRegistered ? "yes" : "no");
    std::printf("pageable memory access: %s\n", pageableMemoryAccess ? "yes" : "no");

    // Step 2: the primary context is the one the CUDA runtime (and so TensorRT, cuBLAS)
    // uses: memory allocated in it can be handed to those libraries as is. Retaining it
    // does not make it current; this thread has to set it. cuMemGetInfo needs a current
    // context, so the starting figure already includes the context's own memory.
    course::printStep(2, "retain the primary context and measure free memory");
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    std::printf("context: primary context of device %d, current on this thread\n", ordinal);
    size_t freeAtStart = 0;
    size_t totalMemory = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeAtStart, &totalMemory));
    std::printf("device total memory: %zu bytes\n", totalMemory);
    std::printf("device free memory at start: %zu bytes\n", freeAtStart);

    // Run at the end (and on the failure path of step 3): is free memory back where it
    // started? The driver hands out device memory in pages (2 MiB on current GPUs), so
    // "back" means within one page.
    constexpr size_t kPageBytes = size_t{2} << 20;
    auto freeMemoryBackToStart = [&]() {
        size_t freeAtEnd = 0;
        size_t total = 0;
        CHECK_DRIVER(cuMemGetInfo(&freeAtEnd, &total));
        const long long difference = static_cast<long long>(freeAtEnd) - static_cast<long long>(freeAtStart);
        std::printf("device free memory at end: %zu bytes\n", freeAtEnd);
        std::printf("free memory difference (end - start): %lld bytes (allowed: one %zu-byte page)\n", difference,
                    kPageBytes);
        return std::llabs(difference) <= static_cast<long long>(kPageBytes);
    };

    // Step 3: device memory. REPORT_DRIVER rather than CHECK_DRIVER: --size comes from the
    // user, and a size the device cannot hold is an error this program reports and
    // cleans up after, not a bug. A failed cuMemAlloc allocates nothing.
    course::printStep(3, "allocate device memory");
    CUdeviceptr deviceA = 0;
    if (const CUresult allocated = REPORT_DRIVER(cuMemAlloc(&deviceA, bytes)); allocated != CUDA_SUCCESS) {
        std::printf("cuMemAlloc of %zu bytes: %s, nothing was allocated\n", bytes, course::driverErrorName(allocated));
        const bool nothingLeaked = freeMemoryBackToStart();
        CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
        std::printf("no leak after the failed allocation: %s\n", nothingLeaked ? "yes" : "NO");
        std::printf("Result = FAIL (--size %zu does not fit on this device)\n", bytes);
        return EXIT_FAILURE;
    }
    // A CUdeviceptr is an integer (unsigned long long on 64-bit systems), not a pointer:
    // printf's %p expects a void* and is undefined for it. Print it as hex, with a cast
    // so that the format matches on every platform.
    std::printf("device buffer A: 0x%llx (%zu bytes)\n", static_cast<unsigned long long>(deviceA), bytes);
    size_t freeWithA = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeWithA, &totalMemory));
    std::printf("device free memory after cuMemAlloc: %zu bytes (%lld bytes less)\n", freeWithA,
                static_cast<long long>(freeAtStart) - static_cast<long long>(freeWithA));
    std::printf("memory type of the cuMemAlloc buffer: %s\n", memoryTypeName(memoryTypeOf(deviceA)));

    // Step 4: memset. N counts elements of the function's width (1, 2 or 4 bytes), not
    // bytes, and the address must be aligned to that width. cuMemAlloc memory is not
    // cleared, and is aligned for any type. Every pattern is read back and checked here.
    // A memset of device memory may return before it is done; the cuMemcpyDtoH after it
    // runs after it on the same (default) stream and returns once the data is on the host.
    course::printStep(4, "cuMemsetD32, D16, D8: N counts elements, not bytes");
    const size_t count32 = bytes / 4;
    const size_t count16 = bytes / 2;
    // cuMemsetD32 takes the 32 bits to store. std::bit_cast gives a float's bits without
    // undefined behaviour; *(int*)&value breaks C++'s aliasing rules.
    constexpr float kFloatValue = 555.0f;
    constexpr std::uint32_t kFloatBits = std::bit_cast<std::uint32_t>(kFloatValue);
    CHECK_DRIVER(cuMemsetD32(deviceA, kFloatBits, count32));
    std::vector<float> floats(count32);
    CHECK_DRIVER(cuMemcpyDtoH(floats.data(), deviceA, bytes));
    const auto floatsSet = static_cast<size_t>(std::count(floats.begin(), floats.end(), kFloatValue));
    std::printf("cuMemsetD32 555.0f: %zu of %zu floats read back as 555.0f (bits 0x%08x)\n", floatsSet, count32,
                static_cast<unsigned int>(kFloatBits));

    // 0x3c00 is 1.0 in IEEE half precision: this is how an fp16 tensor is filled with ones.
    constexpr std::uint16_t kHalfOne = 0x3c00;
    CHECK_DRIVER(cuMemsetD16(deviceA, kHalfOne, count16));
    std::vector<std::uint16_t> halves(count16);
    CHECK_DRIVER(cuMemcpyDtoH(halves.data(), deviceA, bytes));
    const auto halvesSet = static_cast<size_t>(std::count(halves.begin(), halves.end(), kHalfOne));
    std::printf("cuMemsetD16 0x3c00 (1.0 in fp16): %zu of %zu halves read back as 0x3c00\n", halvesSet, count16);

    // cuMemsetD8(pointer, 0, bytes) is the usual way to zero a buffer; 0xa5 is easier to spot.
    constexpr unsigned char kByteValue = 0xa5;
    CHECK_DRIVER(cuMemsetD8(deviceA, kByteValue, bytes));
    std::vector<unsigned char> raw(bytes);
    CHECK_DRIVER(cuMemcpyDtoH(raw.data(), deviceA, bytes));
    const auto bytesSet = static_cast<size_t>(std::count(raw.begin(), raw.end(), kByteValue));
    std::printf("cuMemsetD8 0xa5: %zu of %zu bytes read back as 0xa5\n", bytesSet, bytes);

    // A range in the middle: 555.0f over the 0xa5 bytes. The start address is an element
    // boundary (a multiple of 4 bytes from deviceA), as cuMemsetD32 requires.
    const size_t firstElement = count32 / 4;
    const size_t rangeElements = std::max<size_t>(1, count32 / 2);
    CHECK_DRIVER(cuMemsetD32(deviceA + firstElement * 4, kFloatBits, rangeElements));
    CHECK_DRIVER(cuMemcpyDtoH(raw.data(), deviceA, bytes));
    size_t insideSet = 0;
    size_t outsideKept = 0;
    for (size_t element = 0; element < count32; ++element) {
        const unsigned char* at = raw.data() + element * 4;
        if (element >= firstElement && element < firstElement + rangeElements) {
            float value = 0.0f;
            std::memcpy(&value, at, sizeof(value));
            insideSet += value == kFloatValue;
        } else {
            outsideKept += static_cast<size_t>(std::count(at, at + 4, kByteValue));
        }
    }
    const size_t outsideBytes = bytes - rangeElements * 4;
    std::printf(
        "partial cuMemsetD32 on elements [%zu, %zu): %zu of %zu set to 555.0f, %zu of %zu bytes outside still 0xa5\n",
        firstElement, firstElement + rangeElements, insideSet, rangeElements, outsideKept, outsideBytes);
    const bool memsetsExact = floatsSet == count32 && halvesSet == count16 && bytesSet == bytes &&
                              insideSet == rangeElements && outsideKept == outsideBytes;

    // Step 5: the synchronous copies. They run on the default stream in order: the DtoD
    // may return before it is done, but the DtoH after it waits for it, and the DtoH
    // returns only when the data is in `back`.
    course::printStep(5, "synchronous copies: host -> device -> device -> host");
    CUdeviceptr deviceB = 0;
    CHECK_DRIVER(cuMemAlloc(&deviceB, bytes));
    std::printf("device buffer B: 0x%llx (%zu bytes)\n", static_cast<unsigned long long>(deviceB), bytes);
    std::vector<unsigned char> source(bytes);
    std::vector<unsigned char> back(bytes);
    for (size_t i = 0; i < bytes; ++i) source[i] = static_cast<unsigned char>((i * 2654435761u) >> 24);
    CHECK_DRIVER(cuMemcpyHtoD(deviceA, source.data(), bytes));
    CHECK_DRIVER(cuMemcpyDtoD(deviceB, deviceA, bytes));
    CHECK_DRIVER(cuMemcpyDtoH(back.data(), deviceB, bytes));
    const bool syncRoundTrip = back == source;
    std::printf("round trip HtoD -> DtoD -> DtoH: %s (%zu bytes)\n", syncRoundTrip ? "equal" : "DIFFERENT", bytes);

    // Step 6: four ways to get pinned memory. The driver page-locks it (the OS may not
    // move or swap it) and records it, so the copy engines can reach it directly.
    // Pinned memory is a scarce system resource: allocate staging buffers once, reuse them.
    course::printStep(6, "page-locked (pinned) host memory");
    void* pinned = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&pinned, bytes));
    // PORTABLE: pinned for every context, not only this one. DEVICEMAP: also mapped into
    // the GPU's address space, so kernels and memsets can reach it over the bus.
    void* mapped = nullptr;
    CHECK_DRIVER(cuMemHostAlloc(&mapped, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    // WRITECOMBINED: the CPU writes it through write-combining buffers, past its caches.
    // Reading it back on the CPU is very slow; on some systems it crosses the bus faster.
    // For buffers the CPU writes and the GPU reads (uploads) only.
    void* writeCombined = nullptr;
    CHECK_DRIVER(cuMemHostAlloc(&writeCombined, bytes, CU_MEMHOSTALLOC_WRITECOMBINED | CU_MEMHOSTALLOC_DEVICEMAP));
    // Memory the application already has (a model file read into a vector, say): register
    // it in place instead of copying it into a new pinned buffer. Unregister before freeing.
    std::vector<std::uint32_t> existing(count32, 0);
    CHECK_DRIVER(cuMemHostRegister(existing.data(), bytes, CU_MEMHOSTREGISTER_DEVICEMAP));
    std::printf("memory type of the cuMemAllocHost buffer: %s\n",
                memoryTypeName(memoryTypeOf(reinterpret_cast<CUdeviceptr>(pinned))));
    std::printf("memory type of the cuMemHostAlloc(PORTABLE|DEVICEMAP) buffer: %s\n",
                memoryTypeName(memoryTypeOf(reinterpret_cast<CUdeviceptr>(mapped))));
    std::printf("memory type of the cuMemHostAlloc(WRITECOMBINED|DEVICEMAP) buffer: %s\n",
                memoryTypeName(memoryTypeOf(reinterpret_cast<CUdeviceptr>(writeCombined))));
    std::printf("memory type of the cuMemHostRegister buffer: %s\n",
                memoryTypeName(memoryTypeOf(reinterpret_cast<CUdeviceptr>(existing.data()))));

    // Step 7: the GPU's address for pinned memory. cuMemHostGetDevicePointer is the
    // portable way to ask. With unified addressing the answer is usually the host
    // address itself, which is why passing a host pointer to cuMemsetD32 "just works" for
    // cuMemAllocHost memory; the docs exclude write-combined and (on some systems)
    // registered memory from that, so ask rather than assume.
    course::printStep(7, "device addresses of pinned memory");
    CUdeviceptr pinnedDevice = 0;
    CHECK_DRIVER(cuPointerGetAttribute(&pinnedDevice, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                       reinterpret_cast<CUdeviceptr>(pinned)));
    CUdeviceptr mappedDevice = 0;
    CUdeviceptr writeCombinedDevice = 0;
    CUdeviceptr registeredDevice = 0;
    CHECK_DRIVER(cuMemHostGetDevicePointer(&mappedDevice, mapped, 0));
    CHECK_DRIVER(cuMemHostGetDevicePointer(&writeCombinedDevice, writeCombined, 0));
    CHECK_DRIVER(cuMemHostGetDevicePointer(&registeredDevice, existing.data(), 0));
    CUdeviceptr mappedByAttribute = 0;
    CHECK_DRIVER(cuPointerGetAttribute(&mappedByAttribute, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                       reinterpret_cast<CUdeviceptr>(mapped)));
    const struct {
        const char* what;
        const void* host;
        CUdeviceptr device;
    } addresses[] = {
        {"cuMemAllocHost buffer (CU_POINTER_ATTRIBUTE_DEVICE_POINTER)", pinned, pinnedDevice},
        {"cuMemHostAlloc(PORTABLE|DEVICEMAP) buffer (cuMemHostGetDevicePointer)", mapped, mappedDevice},
        {"cuMemHostAlloc(WRITECOMBINED|DEVICEMAP) buffer (cuMemHostGetDevicePointer)", writeCombined,
         writeCombinedDevice},
        {"cuMemHostRegister buffer (cuMemHostGetDevicePointer)", existing.data(), registeredDevice},
    };
    for (const auto& a : addresses) {
        const bool same = reinterpret_cast<CUdeviceptr>(a.host) == a.device;
        std::printf("%s: host %p, device 0x%llx (%s)\n", a.what, a.host, static_cast<unsigned long long>(a.device),
                    same ? "same address" : "different address");
    }
    std::printf("CU_POINTER_ATTRIBUTE_DEVICE_POINTER agrees with cuMemHostGetDevicePointer: %s\n",
                mappedByAttribute == mappedDevice ? "yes" : "no");

    // A memset through those device addresses writes host memory across the bus. The
    // host may only look once the GPU is done: wait for the context.
    constexpr std::uint32_t kMappedWord = 0xcafef00d;
    constexpr std::uint32_t kRegisteredWord = 0x600df00d;
    CHECK_DRIVER(cuMemsetD32(mappedDevice, kMappedWord, count32));
    CHECK_DRIVER(cuMemsetD32(registeredDevice, kRegisteredWord, count32));
    CHECK_DRIVER(cuCtxSynchronize());
    const auto* mappedWords = static_cast<const std::uint32_t*>(mapped);
    const auto mappedSet = static_cast<size_t>(std::count(mappedWords, mappedWords + count32, kMappedWord));
    const auto registeredSet = static_cast<size_t>(std::count(existing.begin(), existing.end(), kRegisteredWord));
    std::printf(
        "cuMemsetD32 through the mapped buffer's device address: %zu of %zu words on the host read 0xcafef00d\n",
        mappedSet, count32);
    std::printf(
        "cuMemsetD32 through the registered buffer's device address: %zu of %zu words on the host read 0x600df00d\n",
        registeredSet, count32);
    const bool mappedWorks = mappedSet == count32 && registeredSet == count32 && mappedByAttribute == mappedDevice;

    // Step 8: asynchronous copies on a stream of our own. NON_BLOCKING: the stream does
    // not wait for the legacy default stream that the synchronous calls above used.
    course::printStep(8, "asynchronous copies on a stream need pinned memory");
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUevent start = nullptr;
    CUevent stop = nullptr;
    CHECK_DRIVER(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK_DRIVER(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    // Upload through the write-combined buffer: the CPU only writes it, in one pass.
    std::memcpy(writeCombined, source.data(), bytes);
    CHECK_DRIVER(cuMemcpyHtoDAsync(deviceA, writeCombined, bytes, stream));
    CHECK_DRIVER(cuMemcpyDtoHAsync(pinned, deviceA, bytes, stream));
    // Both calls only queued work: `pinned` holds the data once the stream is done.
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const bool asyncRoundTrip = std::memcmp(pinned, source.data(), bytes) == 0;
    std::printf("async round trip write-combined -> device -> pinned: %s (%zu bytes)\n",
                asyncRoundTrip ? "equal" : "DIFFERENT", bytes);

    // How long does the host wait inside each call? Pinned: the call queues a DMA and
    // returns; the host is free while the copy engine works. Pageable: the copy engine
    // cannot use memory the OS may move, so the driver copies through its own pinned
    // staging buffer with the CPU, and the call returns only once the data has been
    // staged (HtoD) or has arrived (DtoH). The host is busy for about the whole copy:
    // no overlap, whatever the name "Async" says.
    const struct {
        const char* what;
        Direction direction;
        void* host;
    } timedCalls[] = {
        {"cuMemcpyHtoDAsync from pinned memory", Direction::HostToDevice, pinned},
        {"cuMemcpyHtoDAsync from pageable memory", Direction::HostToDevice, source.data()},
        {"cuMemcpyDtoHAsync to pinned memory", Direction::DeviceToHost, pinned},
        {"cuMemcpyDtoHAsync to pageable memory", Direction::DeviceToHost, back.data()},
    };
    for (const auto& call : timedCalls) {
        CHECK_DRIVER(cuEventRecord(start, stream));
        const auto before = std::chrono::steady_clock::now();
        copyAsync(call.direction, call.host, deviceA, bytes, stream);
        const auto returned = std::chrono::steady_clock::now();
        CHECK_DRIVER(cuEventRecord(stop, stream));
        CHECK_DRIVER(cuStreamSynchronize(stream));
        float gpuMilliseconds = 0.0f;
        CHECK_DRIVER(cuEventElapsedTime(&gpuMilliseconds, start, stop));
        const double hostMilliseconds = std::chrono::duration<double, std::milli>(returned - before).count();
        std::printf("%s: the call returned after %.3f ms; the copy took %.3f ms on the GPU\n", call.what,
                    hostMilliseconds, gpuMilliseconds);
    }

    // Step 9: bandwidth. Buffers are allocated once at the largest size (allocating and
    // pinning is far slower than copying); each size copies a prefix of them.
    course::printStep(9, bench ? "bandwidth, pageable vs pinned (bench sweep)" : "bandwidth, pageable vs pinned");
    const std::vector<size_t> sizes = bench ? std::vector<size_t>{size_t{64} << 10, size_t{1} << 20, size_t{16} << 20,
                                                                  size_t{64} << 20, size_t{256} << 20}
                                            : std::vector<size_t>{size_t{64} << 10, size_t{1} << 20, size_t{16} << 20};
    const int copiesPerTrial = bench ? 4 : 2;
    const int trials = bench ? 5 : 3;
    if (bench) std::printf("host thread bound to the GPU's local CPUs: %s\n", bindToCpusNearGpu(device).c_str());
    const size_t largest = sizes.back();
    CUdeviceptr bandwidthDevice = 0;
    CHECK_DRIVER(cuMemAlloc(&bandwidthDevice, largest));
    // Set on the same stream as the copies, so it is ordered before them; D2H copies then read defined data.
    CHECK_DRIVER(cuMemsetD8Async(bandwidthDevice, 0, largest, stream));
    void* bandwidthPinned = nullptr;
    CHECK_DRIVER(cuMemAllocHost(&bandwidthPinned, largest));
    std::memset(bandwidthPinned, 0, largest);
    // Zero-filled, so every page is touched now and no page fault lands inside a timing.
    std::vector<unsigned char> bandwidthPageable(largest, 0);

    std::printf(
        "method: 1 warm-up copy, then %d trials of %d back-to-back copies between two events on one stream; "
        "median trial; GB/s = 1e9 bytes/s\n",
        trials, copiesPerTrial);
    std::printf("| size | H2D pageable | H2D pinned | D2H pageable | D2H pinned |\n");
    std::printf("| --- | --- | --- | --- | --- |\n");
    double rates[4] = {};  // H2D pageable, H2D pinned, D2H pageable, D2H pinned; the largest size's stay for "bench:"
    bool bandwidthMeasured = true;
    for (const size_t size : sizes) {
        rates[0] = measureBandwidth(Direction::HostToDevice, bandwidthPageable.data(), bandwidthDevice, size,
                                    copiesPerTrial, trials, stream, start, stop);
        rates[1] = measureBandwidth(Direction::HostToDevice, bandwidthPinned, bandwidthDevice, size, copiesPerTrial,
                                    trials, stream, start, stop);
        rates[2] = measureBandwidth(Direction::DeviceToHost, bandwidthPageable.data(), bandwidthDevice, size,
                                    copiesPerTrial, trials, stream, start, stop);
        rates[3] = measureBandwidth(Direction::DeviceToHost, bandwidthPinned, bandwidthDevice, size, copiesPerTrial,
                                    trials, stream, start, stop);
        std::printf("| %s | %.2f GB/s | %.2f GB/s | %.2f GB/s | %.2f GB/s |\n", sizeText(size).c_str(), rates[0],
                    rates[1], rates[2], rates[3]);
        bandwidthMeasured =
            bandwidthMeasured && std::all_of(std::begin(rates), std::end(rates), [](double r) { return r > 0.0; });
    }
    if (bench) {
        const std::string at = sizeText(largest);
        std::printf("bench: H2D pinned %s = %.2f GB/s\n", at.c_str(), rates[1]);
        std::printf("bench: D2H pinned %s = %.2f GB/s\n", at.c_str(), rates[3]);
        std::printf("bench: H2D pageable %s = %.2f GB/s\n", at.c_str(), rates[0]);
        std::printf("bench: D2H pageable %s = %.2f GB/s\n", at.c_str(), rates[2]);
        std::printf("bench: H2D pinned vs nvbandwidth = %.1f %%\n", 100.0 * rates[1] / kNvbandwidthHostToDevice);
        std::printf("bench: D2H pinned vs nvbandwidth = %.1f %%\n", 100.0 * rates[3] / kNvbandwidthDeviceToHost);
    }
    CHECK_DRIVER(cuMemFreeHost(bandwidthPinned));
    CHECK_DRIVER(cuMemFree(bandwidthDevice));

    // Step 10: give everything back, newest first. The seed leaked its device buffer and
    // its context; a process exit hides that, a long-running server does not.
    course::printStep(10, "release everything, newest first");
    CHECK_DRIVER(cuEventDestroy(stop));
    CHECK_DRIVER(cuEventDestroy(start));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuMemHostUnregister(existing.data()));  // before `existing` frees its memory
    CHECK_DRIVER(cuMemFreeHost(writeCombined));
    CHECK_DRIVER(cuMemFreeHost(mapped));
    CHECK_DRIVER(cuMemFreeHost(pinned));
    CHECK_DRIVER(cuMemFree(deviceB));
    CHECK_DRIVER(cuMemFree(deviceA));
    const bool memoryBack = freeMemoryBackToStart();
    // This program holds the only reference, so releasing it destroys the primary context.
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("primary context: released\n");

    // Step 11: the lesson's own verdict.
    course::printStep(11, "check");
    const bool pass = memsetsExact && syncRoundTrip && mappedWorks && asyncRoundTrip && bandwidthMeasured && memoryBack;
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
