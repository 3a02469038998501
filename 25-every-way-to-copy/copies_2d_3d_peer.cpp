// Lesson 25, program 3 — the strided copies lesson 19 did not show: cuMemcpy2DAsync,
// cuMemcpy2DUnaligned, cuMemcpy3DAsync, cuMemcpyDtoDAsync in stream order, cuMemcpy with the
// direction taken from the pointers, and cuMemcpy3DPeer / cuMemcpy3DPeerAsync between two GPUs.
//
// Every destination a check judges is filled with 0xa5 first and read back whole, padding
// included: a copy that writes one byte too many, or one too few, shows.
//
//   copies_2d_3d_peer               the walkthrough (step 7 needs a second GPU, and says so without)
//   copies_2d_3d_peer --device N    another GPU (the peer is then GPU 0, or GPU 1 when N is 0)
//   copies_2d_3d_peer --peer M      GPU M for step 7; asked for by name, it must exist (else SKIP, exit 77)
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "copy_helpers.h"
#include "volume_box.h"

namespace {

using namespace lesson25;  // the volume and the box: volume_box.h

// Step 2: a packed host rectangle (300 x 20 bytes, pinned: an ...Async copy of pageable memory may
// be synchronous, lesson 05) into pitched memory at (100, 10), on the stream; then the whole image
// back, padding included.
void rectangleIntoPitchedMemory(course::Verdict& verdict, CUstream stream) {
    CUdeviceptr image = 0;
    size_t pitch = 0;
    CHECK_DRIVER(cuMemAllocPitch(&image, &pitch, 1000, 40, 4));
    void* pinned = nullptr;  // the rectangle, then the whole image read back
    CHECK_DRIVER(cuMemAllocHost(&pinned, pitch * 40));
    auto* bytes = static_cast<unsigned char*>(pinned);
    const std::vector<unsigned char> rect = lesson25::pattern(300 * 20, 6);
    std::memcpy(bytes, rect.data(), rect.size());
    CHECK_DRIVER(cuMemsetD8Async(image, lesson25::kFill, pitch * 40, stream));
    CUDA_MEMCPY2D toImage{};
    toImage.srcMemoryType = CU_MEMORYTYPE_HOST;
    toImage.srcHost = bytes;
    toImage.srcPitch = 300;
    toImage.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    toImage.dstDevice = image;
    toImage.dstPitch = pitch;
    toImage.dstXInBytes = 100;
    toImage.dstY = 10;
    toImage.WidthInBytes = 300;
    toImage.Height = 20;
    CHECK_DRIVER(cuMemcpy2DAsync(&toImage, stream));
    CHECK_DRIVER(cuMemcpyDtoHAsync(bytes, image, pitch * 40, stream));  // after the copy: same stream
    CHECK_DRIVER(cuStreamSynchronize(stream));
    size_t rectRight = 0;
    size_t restKept = 0;
    for (size_t y = 0; y < 40; ++y)
        for (size_t x = 0; x < pitch; ++x) {
            if (x >= 100 && x < 400 && y >= 10 && y < 30)
                rectRight += bytes[y * pitch + x] == rect[(y - 10) * 300 + x - 100] ? 1 : 0;
            else
                restKept += bytes[y * pitch + x] == lesson25::kFill ? 1 : 0;
        }
    std::printf("pitch of a 1000-byte row: %zu bytes\n", pitch);
    std::printf("rectangle bytes in place: %zu of 6000\n", rectRight);
    std::printf("other bytes of the pitch, padding included, still 0xa5: %zu of %zu\n", restKept, pitch * 40 - 6000);
    verdict.check("the rectangle arrived at (100, 10)", rectRight == 6000);
    verdict.check("every other byte of the pitch keeps the fill", restKept == pitch * 40 - 6000);
    CHECK_DRIVER(cuMemFreeHost(pinned));
    CHECK_DRIVER(cuMemFree(image));
}

// A 777 x 60 target of the step-3 copy, read back, against the model: the source's 700 x 50
// rectangle from (3, 2) at (5, 1), 0xa5 everywhere else. Returns the bytes that differ.
size_t unalignedDifferences(CUdeviceptr target, const std::vector<unsigned char>& odd) {
    const std::vector<unsigned char> got = lesson25::download(target, 777 * 60);
    size_t wrong = 0;
    for (size_t y = 0; y < 60; ++y)
        for (size_t x = 0; x < 777; ++x) {
            const bool inside = x >= 5 && x < 705 && y >= 1 && y < 51;
            wrong += got[y * 777 + x] != (inside ? odd[(y + 1) * 1001 + x - 2] : lesson25::kFill) ? 1 : 0;
        }
    return wrong;
}

// Step 3: pitches cuMemAllocPitch did not choose, device to device: a 700 x 50 rectangle from (3, 2)
// of rows of 1001 bytes to (5, 1) of rows of 777 bytes. Every call here goes to the legacy stream,
// where each one is ordered after the one before; a call may return before its work is done
// (cuda.h:14249-14250), and the results are read with cuMemcpyDtoH, in the same stream, after them.
void unalignedCopy(course::Verdict& verdict) {
    const std::vector<unsigned char> odd = lesson25::pattern(1001 * 60, 7);
    CUdeviceptr source = 0;
    CUdeviceptr target = 0;
    CUdeviceptr scratch = 0;
    CHECK_DRIVER(cuMemAlloc(&source, odd.size()));
    CHECK_DRIVER(cuMemAlloc(&target, 777 * 60));
    CHECK_DRIVER(cuMemAlloc(&scratch, 777 * 60));
    CHECK_DRIVER(cuMemcpyHtoD(source, odd.data(), odd.size()));
    CHECK_DRIVER(cuMemsetD8(target, lesson25::kFill, 777 * 60));
    CHECK_DRIVER(cuMemsetD8(scratch, lesson25::kFill, 777 * 60));
    CUDA_MEMCPY2D unaligned{};
    unaligned.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    unaligned.srcDevice = source;
    unaligned.srcPitch = 1001;
    unaligned.srcXInBytes = 3;
    unaligned.srcY = 2;
    unaligned.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    unaligned.dstDevice = target;
    unaligned.dstPitch = 777;
    unaligned.dstXInBytes = 5;
    unaligned.dstY = 1;
    unaligned.WidthInBytes = 700;
    unaligned.Height = 50;
    CUDA_MEMCPY2D plain = unaligned;  // the same copy through cuMemcpy2D, into a scratch buffer
    plain.dstDevice = scratch;
    // cuMemcpy2D "may fail" for these pitches: whether it does is shown; where it accepts them, its
    // copy is judged like any other.
    const CUresult plainResult = REPORT_DRIVER(cuMemcpy2D(&plain));
    std::printf("cuMemcpy2D with pitches 1001 and 777: %s\n", course::driverErrorName(plainResult));
    const char* const kPlain = "where cuMemcpy2D accepted the odd pitches, it copied the rectangle, nothing else";
    if (plainResult == CUDA_SUCCESS) {
        const size_t plainWrong = unalignedDifferences(scratch, odd);
        std::printf("scratch bytes as expected (rectangle copied, the rest 0xa5): %zu of %d\n", 777 * 60 - plainWrong,
                    777 * 60);
        verdict.check(kPlain, plainWrong == 0);
    } else {
        std::printf("scratch bytes as expected (rectangle copied, the rest 0xa5): not run\n");
        lesson25::skipCheck(kPlain, "cuMemcpy2D refused these pitches, which cuda.h allows it to");
    }
    CHECK_DRIVER(cuMemcpy2DUnaligned(&unaligned));
    const size_t wrong = unalignedDifferences(target, odd);
    std::printf("target bytes as expected (rectangle copied, the rest 0xa5): %zu of %d\n", 777 * 60 - wrong, 777 * 60);
    verdict.check("cuMemcpy2DUnaligned copied the rectangle between odd pitches, nothing else", wrong == 0);
    CHECK_DRIVER(cuMemFree(scratch));
    CHECK_DRIVER(cuMemFree(target));
    CHECK_DRIVER(cuMemFree(source));
}

// Step 5: A -> B, then A overwritten, then B -> C, all on one stream: they run in the order they
// were queued, so C ends up holding what A held before, and can have it only by way of B. B and C
// each have a tail guard after their megabyte (copy_helpers.h): a copy that ran past the end of C
// shows in C's, and step 6 reads B's with the rest of B. Step 6 then moves 64 KiB with cuMemcpy
// alone, the direction read from each pointer.
void deviceCopies(course::Verdict& verdict, CUdevice device, CUstream stream) {
    const std::vector<unsigned char> chain = lesson25::pattern(1 << 20, 9);
    const std::vector<unsigned char> bGuard = lesson25::tailGuard(1);
    const std::vector<unsigned char> cGuard = lesson25::tailGuard(2);
    const size_t guarded = chain.size() + lesson25::kTailGuard;
    CUdeviceptr a = 0;
    CUdeviceptr b = 0;
    CUdeviceptr c = 0;
    CHECK_DRIVER(cuMemAlloc(&a, chain.size()));
    CHECK_DRIVER(cuMemAlloc(&b, guarded));
    CHECK_DRIVER(cuMemAlloc(&c, guarded));
    CHECK_DRIVER(cuMemcpyHtoDAsync(a, chain.data(), chain.size(), stream));
    lesson25::fillThenTailGuard(b, chain.size(), bGuard, stream);
    lesson25::fillThenTailGuard(c, chain.size(), cGuard, stream);
    CHECK_DRIVER(cuMemcpyDtoDAsync(b, a, chain.size(), stream));
    CHECK_DRIVER(cuMemsetD8Async(a, 0, chain.size(), stream));  // A's bytes are now only in B
    CHECK_DRIVER(cuMemcpyDtoDAsync(c, b, chain.size(), stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const std::vector<unsigned char> atC = lesson25::download(c, guarded);
    const size_t chainWrong = lesson25::differences(atC.data(), chain.data(), chain.size());
    const size_t cGuardKept = lesson25::tailGuardKept(&atC[chain.size()], cGuard);
    std::printf("bytes of C equal to what A held: %zu of %zu\n", chain.size() - chainWrong, chain.size());
    std::printf("tail guard bytes after C intact: %zu of %zu\n", cGuardKept, cGuard.size());
    verdict.check("C got A's bytes by way of B, in stream order", chainWrong == 0);
    verdict.check("nothing was copied past the end of C", cGuardKept == cGuard.size());

    // cuMemcpy "infers the type of the transfer ... from the pointer values" and "is only allowed in
    // contexts which support unified addressing" (cuda.h:9575-9577).
    course::printStep(6, "cuMemcpy: host -> device -> device -> host, the direction from the pointers");
    int unified = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&unified, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, device));
    std::printf("CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: %d\n", unified);
    if (unified == 0) {
        lesson25::skipCheck("the device-to-device cuMemcpy wrote 64 KiB at B + 128, nothing else of B",
                            "no unified addressing");
        lesson25::skipCheck("cuMemcpy took every direction from the pointers", "no unified addressing");
    } else {
        // Data of its own: A holds zeros and B `chain`, so a skipped copy shows. The device-to-device
        // leg is judged alone too, on the whole of B, before the copy back reads it.
        const std::vector<unsigned char> sent = lesson25::pattern(65536, 10);
        void* pinned = nullptr;  // 64 KiB to send, 64 KiB to receive
        CHECK_DRIVER(cuMemAllocHost(&pinned, 2 * 65536));
        auto* bytes = static_cast<unsigned char*>(pinned);
        std::memcpy(bytes, sent.data(), 65536);
        std::memset(bytes + 65536, lesson25::kFill, 65536);
        CHECK_DRIVER(cuMemcpy(a, reinterpret_cast<CUdeviceptr>(bytes), 65536));  // host -> device
        CHECK_DRIVER(cuMemcpy(b + 128, a, 65536));                               // device -> device
        std::vector<unsigned char> bModel = chain;
        bModel.insert(bModel.end(), bGuard.begin(), bGuard.end());  // B's tail guard after its megabyte
        std::memcpy(&bModel[128], sent.data(), 65536);
        const std::vector<unsigned char> atB = lesson25::download(b, guarded);
        const size_t wrongInB = lesson25::differences(atB.data(), bModel.data(), guarded);
        std::printf("bytes of B as expected (64 KiB at B + 128, the rest as step 5 left it): %zu of %zu\n",
                    guarded - wrongInB, guarded);
        verdict.check("the device-to-device cuMemcpy wrote 64 KiB at B + 128, nothing else of B", wrongInB == 0);
        CHECK_DRIVER(cuMemcpy(reinterpret_cast<CUdeviceptr>(bytes + 65536), b + 128, 65536));  // device -> host
        const size_t wrong = lesson25::differences(bytes + 65536, sent.data(), 65536);
        std::printf("bytes back on the host after three cuMemcpy calls: %zu of 65536\n", 65536 - wrong);
        verdict.check("cuMemcpy took every direction from the pointers", wrong == 0);
        CHECK_DRIVER(cuMemFreeHost(pinned));
    }
    CHECK_DRIVER(cuMemFree(c));
    CHECK_DRIVER(cuMemFree(b));
    CHECK_DRIVER(cuMemFree(a));
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device", "--peer"}, "[--device N] [--peer M]", args))
        return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    const long long peerArgument = args.valueOr("--peer", ordinal == 0 ? 1 : 0);
    const int peerOrdinal = peerArgument < 0 || peerArgument > 1024 ? -1 : static_cast<int>(peerArgument);

    course::printStep(1, "initialise, create a stream");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    course::printDeviceName(ordinal, device);
    int deviceCount = 0;
    CHECK_DRIVER(cuDeviceGetCount(&deviceCount));
    std::printf("device count: %d\n", deviceCount);
    if (args.values.count("--peer") != 0 && (peerOrdinal < 0 || peerOrdinal >= deviceCount || peerOrdinal == ordinal)) {
        std::printf("section 3-D peer copies: SKIP (--peer %lld names no other GPU)\n", peerArgument);
        std::printf("Result = SKIP (--peer asks for a second GPU; this machine has %d)\n", deviceCount);
        return course::kExitNotApplicable;
    }
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUstream stream = nullptr;
    CHECK_DRIVER(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    course::Verdict verdict;

    course::printStep(2, "cuMemcpy2DAsync: a host rectangle into pitched memory");
    rectangleIntoPitchedMemory(verdict, stream);

    // cuda.h: cuMemcpy2D "may fail for pitches not computed by cuMemAllocPitch()" on device-to-device
    // copies; cuMemcpy2DUnaligned "does not have this restriction, but may run significantly slower"
    // (cuda.h:10229-10231).
    course::printStep(3, "cuMemcpy2DUnaligned: pitches of 1001 and 777 bytes");
    unalignedCopy(verdict);

    course::printStep(4, "cuMemcpy3DAsync: a volume in, a box out into rows of 48 and slices of 14");
    const std::vector<unsigned char> volumeHost = lesson25::pattern(kVW * kVH * kVD, 8);
    CUdeviceptr volume = 0;
    size_t volumePitch = 0;
    CHECK_DRIVER(cuMemAllocPitch(&volume, &volumePitch, kVW, kVH * kVD, 4));
    boxThroughPitchedMemory(verdict, stream, volume, volumePitch, volumeHost);

    course::printStep(5, "cuMemcpyDtoDAsync: A -> B, A overwritten, then B -> C, on one stream");
    deviceCopies(verdict, device, stream);  // and step 6

    course::printStep(7, "cuMemcpy3DPeer and cuMemcpy3DPeerAsync: the box to another GPU and back");
    lesson25::peerCopies(verdict, peerOrdinal, deviceCount, context, stream, volume, volumePitch, volumeHost);

    course::printStep(8, "release everything, newest first");
    CHECK_DRIVER(cuMemFree(volume));
    CHECK_DRIVER(cuStreamDestroy(stream));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("released: volume, stream, primary context (each step freed its own buffers)\n");

    course::printStep(9, "check");
    return verdict.finish();
}
