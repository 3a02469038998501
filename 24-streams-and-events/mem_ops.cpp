// Lesson 24, program 4 — stream memory operations: a word in memory orders two streams.
//
// cuStreamWaitValue64 holds a stream until a 64-bit word meets a condition; cuStreamWriteValue64
// writes one in stream order. cuda.h says of the default write that it "will provide a memory
// fence before the write, which has similar semantics to __threadfence_system() but is scoped to
// the stream rather than a CUDA thread" (cuda.h:509-515, where the flag that would drop the fence,
// CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER, "is not supported in the v2 API" this lesson uses). So
// one stream can release another's wait. The 64-bit forms need
// CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS (cuda.h:16866-16869). cuStreamBatchMemOp
// queues several operations with one call: "The operations are enqueued in the order they appear
// in the array" (cuda.h:17047). cuda.h warns: "Improper use of these APIs may deadlock the
// application. Synchronization ordering established through these APIs is not visible to CUDA.
// CUDA tasks that are (even indirectly) ordered by these APIs should also have that order
// expressed with CUDA-visible dependencies such as events" (cuda.h:16885-16890). Step 2 leaves
// that event out on purpose: its kernel is ordered by the 64-bit wait alone, so that what it reads
// shows what the wait orders. Every wait here has a way out (a watchdog), so that the deadlock
// cuda.h warns of ends as FAIL, not as a hang. Code that does not demonstrate the wait should also
// make the kernel's stream wait for an event recorded after the write.
//
//   mem_ops [--device N]
#include <cuda.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "../common/cuda_compat.h"
#include "streams.h"

namespace {

#if CUDA_VERSION >= 11070  // what follows serves the v2 memory operations only
constexpr cuuint64_t kBefore = 7;                        // the flag before the release
constexpr cuuint64_t kRelease = (1ull << 32) | kBefore;  // same low 32 bits: only a 64-bit compare tells
constexpr unsigned int kPayload = 42;
constexpr unsigned long long kWriterNs = 20 * lesson24::kMillisecond;
constexpr auto kWatchdogTimeout = std::chrono::seconds(10);
// Step 3: how long the host looks at the ack word before it opens the gate.
constexpr auto kHold = std::chrono::milliseconds(100);
// Step 2's control reads the flag's first 4 bytes as its low half: so on a little-endian host.
static_assert(std::endian::native == std::endian::little, "the 32-bit control reads the flag's first 4 bytes");
enum Word { kGate = 0, kAck = 1, kSeen = 2, kLowHalf = 3, kWriterGate = 4, kWords = 5 };

std::atomic_ref<cuuint64_t> flagOf(void* host) {
    return std::atomic_ref<cuuint64_t>(*static_cast<cuuint64_t*>(host));
}

// A thread that, unless stop() comes within kWatchdogTimeout, runs `release`: CPU stores to the
// words this program's waits hold on, so that a wait that never ends makes a check FAIL instead of
// hanging the program. It makes no CUDA call. It is joined on every path: by stop(), by the
// destructor on a return, and the CUDA calls made while it runs go through REPORT_DRIVER, so that
// a failed one stops it before the program ends (exitOnError).
class Watchdog {
public:
    template <class Release>
    explicit Watchdog(Release release) {
        thread_ = std::thread([this, release, done = finished_.get_future()] {
            if (done.wait_for(kWatchdogTimeout) == std::future_status::ready) return;
            fired_ = true;
            release();
        });
    }
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;
    ~Watchdog() { stop(); }
    // True when the watchdog had to release a wait.
    bool stop() {
        if (thread_.joinable()) {
            finished_.set_value();
            thread_.join();
        }
        return fired_;
    }

private:
    std::promise<void> finished_;
    std::atomic<bool> fired_{false};
    std::thread thread_;
};

// What CHECK_DRIVER does on a failure, for calls made while a watchdog runs: they are reported
// by REPORT_DRIVER, the watchdog is stopped, then the program ends here with exit code 1.
void exitOnError(CUresult result) {
    if (result != CUDA_SUCCESS) std::exit(EXIT_FAILURE);
}

// Step 2. The writer is queued first: a 32-bit wait on its gate word, which only the host opens;
// a kernel that stores the payload after 20 ms; the 64-bit write of the flag; an event, which only
// the host queries. Then the waiter: a 32-bit wait on the flag's low half, and a write of 1 to the
// low-half word (the control: the flag starts with the same low 32 bits as kRelease, so a 32-bit
// compare lets the waiter through at once); the 64-bit wait until the flag equals kRelease, a
// write of 1 to the seen word, and a kernel that reads the payload. Nothing but the 64-bit wait
// holds that kernel back (no cuStreamWaitEvent, unlike what cuda.h:16885-16890 asks of real code):
// without the wait it would read the payload word while the writer is still held, and see 0. The
// seen word the host watches: it must stay 0 while the flag still differs, and be 1 at the end.
// The host keeps the writer's gate shut until the control has passed and
// lesson24::kHoldBeforeOpening more, so that the 64-bit wait has to hold while the host looks,
// whatever the timing. No CUDA task is on the other side of the writer's gate: the host opens it.
// Flag and words are in mapped host memory, where a watchdog thread can release every wait.
void writerReleasesWaiter(const lesson24::Kernels& kernels, const lesson24::HostWords& words, CUstream writer,
                          CUstream waiter, course::Verdict& verdict) {
    void* flagHost = nullptr;
    CHECK_DRIVER(cuMemHostAlloc(&flagHost, sizeof(cuuint64_t), CU_MEMHOSTALLOC_DEVICEMAP));
    CUdeviceptr flag = 0;
    CHECK_DRIVER(cuMemHostGetDevicePointer(&flag, flagHost, 0));
    flagOf(flagHost).store(kBefore);
    CUdeviceptr data = 0;  // two words: the payload, and what the waiter's kernel read of it
    CHECK_DRIVER(cuMemAlloc(&data, 2 * sizeof(unsigned int)));
    CHECK_DRIVER(cuMemsetD32(data, 0, 2));
    const CUdeviceptr payload = data;
    const CUdeviceptr loaded = data + sizeof(unsigned int);
    CUevent written = nullptr;  // recorded on the writer after its write of the flag; only queried
    CHECK_DRIVER(cuEventCreate(&written, CU_EVENT_DISABLE_TIMING));
    CHECK_DRIVER(course::streamWaitValue32(writer, words.at(kWriterGate), 1, CU_STREAM_WAIT_VALUE_EQ));
    lesson24::launchSpin(kernels.spin, 1, kWriterNs, 0, payload, kPayload, writer);
    CHECK_DRIVER(course::streamWriteValue64(writer, flag, kRelease, 0));
    CHECK_DRIVER(cuEventRecord(written, writer));
    CHECK_DRIVER(course::streamWaitValue32(waiter, flag, static_cast<cuuint32_t>(kRelease), CU_STREAM_WAIT_VALUE_EQ));
    CHECK_DRIVER(course::streamWriteValue32(waiter, words.at(kLowHalf), 1, 0));
    CHECK_DRIVER(course::streamWaitValue64(waiter, flag, kRelease, CU_STREAM_WAIT_VALUE_EQ));
    CHECK_DRIVER(course::streamWriteValue32(waiter, words.at(kSeen), 1, 0));
    lesson24::launchLoad(kernels.loadWord, payload, loaded, waiter);  // held by the 64-bit wait alone
    Watchdog watchdog([flagHost, &words] {
        flagOf(flagHost).store(kRelease);
        words.write(kWriterGate, 1);
    });
    // One look: the seen word, then the flag. A 1 in the seen word while the flag still differed
    // means the 64-bit wait let the waiter through before the write. True once the flag is kRelease.
    int looks = 0;
    bool seenEarly = false;
    auto look = [&] {
        const unsigned int seenNow = words.read(kSeen);
        if (flagOf(flagHost).load() == kRelease) return true;
        ++looks;
        seenEarly = seenEarly || seenNow != 0;
        return false;
    };
    const bool lowHalfPassed = lesson24::waitForWord(words, kLowHalf, 1, lesson24::kControlBound);
    for (const auto until = std::chrono::steady_clock::now() + lesson24::kHoldBeforeOpening;
         std::chrono::steady_clock::now() < until;)
        look();
    const CUresult pending = cuEventQuery(written);  // CUDA_ERROR_NOT_READY is an answer here
    const CUresult queryFailed =
        pending == CUDA_SUCCESS || pending == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : REPORT_DRIVER(pending);
    words.write(kWriterGate, 1);
    while (!look()) {
    }
    const CUresult waited = REPORT_DRIVER(cuStreamSynchronize(waiter));
    const CUresult wrote = REPORT_DRIVER(cuStreamSynchronize(writer));
    const bool watchdogFired = watchdog.stop();
    exitOnError(queryFailed);
    exitOnError(waited);
    exitOnError(wrote);
    unsigned int read[2] = {};
    CHECK_DRIVER(cuMemcpyDtoH(read, data, sizeof(read)));
    std::printf("32-bit wait on the flag's low half, writer held (the control): %s\n",
                lowHalfPassed ? "passed" : "still waiting");
    verdict.check("a 32-bit wait on the flag's low half passed while the writer was held", lowHalfPassed);
    std::printf("writer's event while the writer was held: %s\n", course::driverErrorName(pending));
    verdict.check("the writer's event was pending while the writer was held", pending == CUDA_ERROR_NOT_READY);
    std::printf("flag after both streams: 0x%llx\n", static_cast<unsigned long long>(flagOf(flagHost).load()));
    // How many readings the host made depends on the machine: the check needs only some.
    std::printf("seen word while the flag still held 0x%llx: %s (%s)\n", static_cast<unsigned long long>(kBefore),
                seenEarly ? "1 at least once" : "always 0", looks > 0 ? "read by the host" : "never read by the host");
    std::printf("seen word after both streams: %u (1 = the waiter wrote it)\n", words.read(kSeen));
    std::printf("wait released by: %s\n", watchdogFired ? "the watchdog" : "the writer stream");
    std::printf("waiter's kernel read the payload: %u (%u = it ran after the writer's kernel)\n", read[1], kPayload);
    verdict.check("the waiter's wait held until all 64 bits of the flag matched",
                  looks > 0 && !seenEarly && words.read(kSeen) == 1);
    verdict.check("the writer stream released the wait, not the watchdog", !watchdogFired);
    verdict.check("the waiter's kernel, ordered by the 64-bit wait alone, saw the payload", read[1] == kPayload);
    CHECK_DRIVER(cuEventDestroy(written));
    CHECK_DRIVER(cuMemFree(data));
    CHECK_DRIVER(cuMemFreeHost(flagHost));
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();

    course::printStep(1, "initialise, the kernels, two streams, mapped host words, the device's support");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    const int driverVersion = lesson24::printDeviceAndVersions(device, ordinal);
    const std::string missing =
        lesson24::missingVersion(driverVersion, course::kMemOpsV2Version, "the v2 stream memory operations");
    if (!missing.empty()) {
        std::printf("section memory operations: SKIP (%s)\n", missing.c_str());
        std::printf("Result = SKIP (%s)\n", missing.c_str());
        return course::kExitNotApplicable;
    }
#if CUDA_VERSION >= 11070
    course::Verdict verdict;
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    lesson24::Kernels kernels = lesson24::loadKernels();
    CUstream waiter = nullptr;
    CUstream writer = nullptr;
    CHECK_DRIVER(cuStreamCreate(&waiter, CU_STREAM_NON_BLOCKING));
    CHECK_DRIVER(cuStreamCreate(&writer, CU_STREAM_NON_BLOCKING));
    lesson24::HostWords words = lesson24::allocHostWords(kWords);
    int can64 = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&can64, course::kCanUse64BitMemOps, device));
    std::printf("CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: %d\n", can64);
    // Both kernels run once before any wait is queued (lesson24::warmUpLoad): step 2 launches them
    // behind waits that hold its streams.
    lesson24::launchSpin(kernels.spin, 1, 0, 0, 0, 0, writer);
    lesson24::warmUpLoad(kernels.loadWord, words.at(kSeen), writer);
    const char* const no64 = "the device reports no 64-bit stream memory operations";

    course::printStep(2, "one stream's cuStreamWriteValue64 releases another's cuStreamWaitValue64");
    if (can64 == 0) {
        std::printf("section 64-bit wait and write: SKIP (%s)\n", no64);
    } else {
        writerReleasesWaiter(kernels, words, writer, waiter, verdict);
    }

    // Step 3: one call, two operations: wait until the gate word is at least 1, then write 1 to
    // the ack word. Only the host opens the gate, after looking at the ack word for 100 ms. A
    // watchdog opens both words (the ack with 2, which no check accepts) should a wait in this
    // step never end. No CUDA task depends on this wait: the host is on both sides of it.
    course::printStep(3, "cuStreamBatchMemOp: a wait and a write, in array order");
    CUstreamBatchMemOpParams ops[2];
    std::memset(ops, 0, sizeof(ops));
    ops[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[0].waitValue.address = words.at(kGate);
    ops[0].waitValue.value = 1;
    ops[0].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[1].writeValue.address = words.at(kAck);
    ops[1].writeValue.value = 1;
    ops[1].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    const CUresult queued = REPORT_DRIVER(course::streamBatchMemOp(waiter, 2, ops, 0));
    const bool batchRan = queued == CUDA_SUCCESS;
    if (!batchRan) {
        std::printf("section batch: SKIP (cuStreamBatchMemOp on mapped host memory: %s)\n",
                    course::driverErrorName(queued));
    } else {
        Watchdog watchdog([&words] {
            words.write(kGate, 1);
            words.write(kAck, 2);
        });
        std::this_thread::sleep_for(kHold);
        const unsigned int ackWhileHeld = words.read(kAck);
        const CUresult held = cuStreamQuery(waiter);  // CUDA_ERROR_NOT_READY is an answer here
        const CUresult queryFailed =
            held == CUDA_SUCCESS || held == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : REPORT_DRIVER(held);
        words.write(kGate, 1);
        const CUresult synced = REPORT_DRIVER(cuStreamSynchronize(waiter));
        const bool watchdogFired = watchdog.stop();
        exitOnError(queryFailed);
        exitOnError(synced);
        std::printf("ack word %lld ms after the batch was queued, gate closed: %u\n",
                    static_cast<long long>(kHold.count()), ackWhileHeld);
        std::printf("cuStreamQuery meanwhile: %s\n", course::driverErrorName(held));
        verdict.check("the batch's write waited for the batch's wait",
                      ackWhileHeld == 0 && held == CUDA_ERROR_NOT_READY);
        std::printf("ack word after the host opened the gate: %u\n", words.read(kAck));
        std::printf("gate opened by: %s\n", watchdogFired ? "the watchdog" : "the host, after looking");
        verdict.check("the batch's write ran once the host opened the gate", words.read(kAck) == 1 && !watchdogFired);
    }

    course::printStep(4, "release everything, newest first");
    CHECK_DRIVER(cuMemFreeHost(words.host));
    CHECK_DRIVER(cuStreamDestroy(writer));
    CHECK_DRIVER(cuStreamDestroy(waiter));
    CHECK_DRIVER(cuModuleUnload(kernels.module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: host words, streams, module, primary context\n");

    course::printStep(5, "check");
    if (can64 == 0 && !batchRan) {  // no check ran: not a PASS
        std::printf("Result = SKIP (%s; cuStreamBatchMemOp on mapped host memory: %s)\n", no64,
                    course::driverErrorName(queued));
        return course::kExitNotApplicable;
    }
    return verdict.finish();
#endif
}
