// volume_box.h — the volume and the box of copies_2d_3d_peer (steps 4 and 7), the host model
// they are compared against, step 4 (the volume through pitched memory, the box out into host
// rows and slices) and step 7 (the box to another GPU and back).
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "copy_helpers.h"

namespace lesson25 {

// The 3-D volume of steps 4 and 7: 96 x 24 x 10 bytes; the box: 40 x 12 x 5 bytes from (10, 3, 2).
constexpr size_t kVW = 96;
constexpr size_t kVH = 24;
constexpr size_t kVD = 10;
constexpr size_t kBoxX = 10;
constexpr size_t kBoxY = 3;
constexpr size_t kBoxZ = 2;
constexpr size_t kBoxW = 40;
constexpr size_t kBoxH = 12;
constexpr size_t kBoxD = 5;

// Whether (x, y, z) of a volume lies inside the box.
inline bool inBox(size_t x, size_t y, size_t z) {
    return x >= kBoxX && x < kBoxX + kBoxW && y >= kBoxY && y < kBoxY + kBoxH && z >= kBoxZ && z < kBoxZ + kBoxD;
}

// A device volume laid out with `pitch` bytes a row and kVH rows a slice, read back whole, against
// the host volume: inside the box the source's byte, everywhere else (padding too) the fill.
inline size_t volumeDifferences(const std::vector<unsigned char>& device, size_t pitch,
                                const std::vector<unsigned char>& host) {
    size_t wrong = 0;
    for (size_t z = 0; z < kVD; ++z)
        for (size_t y = 0; y < kVH; ++y)
            for (size_t x = 0; x < pitch; ++x) {
                const unsigned char want = x < kVW && inBox(x, y, z) ? host[(z * kVH + y) * kVW + x] : kFill;
                wrong += device[(z * kVH + y) * pitch + x] != want ? 1 : 0;
            }
    return wrong;
}

// The same device volume against the whole host volume: every row in place, the bytes of the
// pitch after each row (the padding) still the fill.
inline size_t pitchedVolumeDifferences(const std::vector<unsigned char>& device, size_t pitch,
                                       const std::vector<unsigned char>& host) {
    size_t wrong = 0;
    for (size_t row = 0; row < kVH * kVD; ++row)
        for (size_t x = 0; x < pitch; ++x)
            wrong += device[row * pitch + x] != (x < kVW ? host[row * kVW + x] : kFill) ? 1 : 0;
    return wrong;
}

// The box as a packed host model: 40 x 12 x 5 bytes.
inline std::vector<unsigned char> boxOf(const std::vector<unsigned char>& volume) {
    std::vector<unsigned char> box(kBoxW * kBoxH * kBoxD);
    for (size_t z = 0; z < kBoxD; ++z)
        for (size_t y = 0; y < kBoxH; ++y)
            std::memcpy(&box[(z * kBoxH + y) * kBoxW], &volume[((kBoxZ + z) * kVH + kBoxY + y) * kVW + kBoxX], kBoxW);
    return box;
}

// Step 4: the host volume into pitched device memory (filled with 0xa5 first, read back whole:
// every row in place, the padding after each row untouched), then the box out into host rows of 48
// bytes and slices of 14 rows. srcHeight and dstHeight are the rows of one slice.
void boxThroughPitchedMemory(course::Verdict& verdict, CUstream stream, CUdeviceptr volume, size_t pitch,
                             const std::vector<unsigned char>& host) {
    void* pinned = nullptr;  // the volume, then the box with its gaps
    CHECK_DRIVER(cuMemAllocHost(&pinned, host.size() + 48 * 14 * kBoxD));
    auto* source = static_cast<unsigned char*>(pinned);
    unsigned char* box = source + host.size();
    std::memcpy(source, host.data(), host.size());
    std::memset(box, kFill, 48 * 14 * kBoxD);
    CHECK_DRIVER(cuMemsetD8Async(volume, kFill, pitch * kVH * kVD, stream));
    CUDA_MEMCPY3D in{};
    in.srcMemoryType = CU_MEMORYTYPE_HOST;
    in.srcHost = source;
    in.srcPitch = kVW;
    in.srcHeight = kVH;
    in.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    in.dstDevice = volume;
    in.dstPitch = pitch;
    in.dstHeight = kVH;
    in.WidthInBytes = kVW;
    in.Height = kVH;
    in.Depth = kVD;
    CHECK_DRIVER(cuMemcpy3DAsync(&in, stream));
    CUDA_MEMCPY3D out{};
    out.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    out.srcDevice = volume;
    out.srcPitch = pitch;
    out.srcHeight = kVH;
    out.srcXInBytes = kBoxX;
    out.srcY = kBoxY;
    out.srcZ = kBoxZ;
    out.dstMemoryType = CU_MEMORYTYPE_HOST;
    out.dstHost = box;
    out.dstPitch = 48;
    out.dstHeight = 14;
    out.WidthInBytes = kBoxW;
    out.Height = kBoxH;
    out.Depth = kBoxD;
    CHECK_DRIVER(cuMemcpy3DAsync(&out, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const size_t volumeWrong = pitchedVolumeDifferences(download(volume, pitch * kVH * kVD), pitch, host);
    std::printf("pitched volume bytes as expected (every row, the padding 0xa5): %zu of %zu\n",
                pitch * kVH * kVD - volumeWrong, pitch * kVH * kVD);
    verdict.check("the volume arrived row by row in pitched memory, its padding keeps the fill", volumeWrong == 0);
    size_t boxRight = 0;
    size_t gapsKept = 0;
    for (size_t z = 0; z < kBoxD; ++z)
        for (size_t y = 0; y < 14; ++y)
            for (size_t x = 0; x < 48; ++x) {
                const unsigned char got = box[(z * 14 + y) * 48 + x];
                if (x < kBoxW && y < kBoxH)
                    boxRight += got == host[((kBoxZ + z) * kVH + kBoxY + y) * kVW + kBoxX + x] ? 1 : 0;
                else
                    gapsKept += got == kFill ? 1 : 0;
            }
    const size_t boxBytes = kBoxW * kBoxH * kBoxD;
    std::printf("box bytes in place: %zu of %zu\n", boxRight, boxBytes);
    std::printf("host bytes between its rows and slices still 0xa5: %zu of %zu\n", gapsKept,
                48 * 14 * kBoxD - boxBytes);
    verdict.check("the box arrived through pitched memory", boxRight == boxBytes);
    verdict.check("the host bytes between its rows and slices keep the fill", gapsKept == 48 * 14 * kBoxD - boxBytes);
    CHECK_DRIVER(cuMemFreeHost(pinned));
}

// Step 7: the box of the volume on this GPU to the same place of a pitched volume on the peer
// (cuMemcpy3DPeer), and from there into a packed buffer on this GPU with a tail guard after it
// (cuMemcpy3DPeerAsync). The contexts are named in the copy: srcContext and dstContext. Without a
// peer GPU the step says so and its three checks are SKIP lines.
inline void peerCopies(course::Verdict& verdict, int peerOrdinal, int deviceCount, CUcontext context, CUstream stream,
                       CUdeviceptr volume, size_t pitch, const std::vector<unsigned char>& host) {
    const char* const kThere = "cuMemcpy3DPeer wrote the box on the other GPU and nothing else";
    const char* const kBack = "cuMemcpy3DPeerAsync brought the box back";
    const char* const kBackGuard = "nothing was copied past the box brought back";
    if (deviceCount < 2) {
        // The same labelled lines as where it runs, so that the output has one shape everywhere.
        const std::string reason = "needs two GPUs; this machine has " + std::to_string(deviceCount);
        std::printf("peer device: not run (this machine has %d GPU)\n", deviceCount);
        std::printf("peer volume bytes as expected (box copied, the rest 0xa5): not run\n");
        skipCheck(kThere, reason);
        std::printf("box bytes back on this GPU: not run\n");
        std::printf("tail guard bytes after the box on this GPU intact: not run\n");
        skipCheck(kBack, reason);
        skipCheck(kBackGuard, reason);
        return;
    }
    CUdevice peer = 0;
    CHECK_DRIVER(cuDeviceGet(&peer, peerOrdinal));
    CUcontext peerContext = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&peerContext, peer));
    std::printf("peer device: %d\n", peerOrdinal);
    CHECK_DRIVER(cuCtxSetCurrent(peerContext));
    CUdeviceptr peerVolume = 0;
    size_t peerPitch = 0;
    CHECK_DRIVER(cuMemAllocPitch(&peerVolume, &peerPitch, kVW, kVH * kVD, 4));
    CHECK_DRIVER(cuMemsetD8(peerVolume, kFill, peerPitch * kVH * kVD));
    CHECK_DRIVER(cuCtxSynchronize());
    CHECK_DRIVER(cuCtxSetCurrent(context));

    CUDA_MEMCPY3D_PEER there{};
    there.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    there.srcDevice = volume;
    there.srcContext = context;
    there.srcPitch = pitch;
    there.srcHeight = kVH;
    there.srcXInBytes = kBoxX;
    there.srcY = kBoxY;
    there.srcZ = kBoxZ;
    there.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    there.dstDevice = peerVolume;
    there.dstContext = peerContext;
    there.dstPitch = peerPitch;
    there.dstHeight = kVH;
    there.dstXInBytes = kBoxX;
    there.dstY = kBoxY;
    there.dstZ = kBoxZ;
    there.WidthInBytes = kBoxW;
    there.Height = kBoxH;
    there.Depth = kBoxD;
    CHECK_DRIVER(cuMemcpy3DPeer(&there));
    CHECK_DRIVER(cuCtxSynchronize());  // a device-to-device copy may return before it is done
    CHECK_DRIVER(cuCtxSetCurrent(peerContext));
    CHECK_DRIVER(cuCtxSynchronize());
    const std::vector<unsigned char> onPeer = download(peerVolume, peerPitch * kVH * kVD);
    CHECK_DRIVER(cuCtxSetCurrent(context));
    const size_t wrongThere = volumeDifferences(onPeer, peerPitch, host);
    std::printf("peer volume bytes as expected (box copied, the rest 0xa5): %zu of %zu\n",
                peerPitch * kVH * kVD - wrongThere, peerPitch * kVH * kVD);
    verdict.check(kThere, wrongThere == 0);

    constexpr size_t kBoxBytes = kBoxW * kBoxH * kBoxD;
    const std::vector<unsigned char> backGuard = tailGuard(3);  // the peer's volume around the box is the fill
    CUdeviceptr back = 0;
    CHECK_DRIVER(cuMemAlloc(&back, kBoxBytes + kTailGuard));
    fillThenTailGuard(back, kBoxBytes, backGuard, stream);
    CUDA_MEMCPY3D_PEER home{};
    home.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    home.srcDevice = peerVolume;
    home.srcContext = peerContext;
    home.srcPitch = peerPitch;
    home.srcHeight = kVH;
    home.srcXInBytes = kBoxX;
    home.srcY = kBoxY;
    home.srcZ = kBoxZ;
    home.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    home.dstDevice = back;
    home.dstContext = context;
    home.dstPitch = kBoxW;
    home.dstHeight = kBoxH;
    home.WidthInBytes = kBoxW;
    home.Height = kBoxH;
    home.Depth = kBoxD;
    CHECK_DRIVER(cuMemcpy3DPeerAsync(&home, stream));
    CHECK_DRIVER(cuStreamSynchronize(stream));
    const std::vector<unsigned char> returned = download(back, kBoxBytes + kTailGuard);
    const std::vector<unsigned char> model = boxOf(host);
    const size_t wrongBack = differences(returned.data(), model.data(), model.size());
    const size_t guardKept = tailGuardKept(&returned[kBoxBytes], backGuard);
    std::printf("box bytes back on this GPU: %zu of %zu\n", model.size() - wrongBack, model.size());
    std::printf("tail guard bytes after the box on this GPU intact: %zu of %zu\n", guardKept, kTailGuard);
    verdict.check(kBack, wrongBack == 0);
    verdict.check(kBackGuard, guardKept == kTailGuard);

    CHECK_DRIVER(cuMemFree(back));
    CHECK_DRIVER(cuCtxSetCurrent(peerContext));
    CHECK_DRIVER(cuMemFree(peerVolume));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(peer));
}

}  // namespace lesson25
