// volume_box.h — the volume and the box of copies_2d_3d_peer (steps 4 and 7), the host model
// they are compared against, and step 7: the box to another GPU and back.
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

// Step 7: the box of the volume on this GPU to the same place of a pitched volume on the peer
// (cuMemcpy3DPeer), and from there into a packed buffer on this GPU (cuMemcpy3DPeerAsync). The
// contexts are named in the copy: srcContext and dstContext. Without a peer GPU the step says so
// and its two checks are SKIP lines.
inline void peerCopies(course::Verdict& verdict, int peerOrdinal, int deviceCount, CUcontext context, CUstream stream,
                       CUdeviceptr volume, size_t pitch, const std::vector<unsigned char>& host) {
    const char* const kThere = "cuMemcpy3DPeer wrote the box on the other GPU and nothing else";
    const char* const kBack = "cuMemcpy3DPeerAsync brought the box back";
    if (deviceCount < 2) {
        // The same labelled lines as where it runs, so that the output has one shape everywhere.
        const std::string reason = "needs two GPUs; this machine has " + std::to_string(deviceCount);
        std::printf("peer device: not run (this machine has %d GPU)\n", deviceCount);
        std::printf("peer volume bytes as expected (box copied, the rest 0xa5): not run\n");
        skipCheck(kThere, reason);
        std::printf("box bytes back on this GPU: not run\n");
        skipCheck(kBack, reason);
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

    CUdeviceptr back = 0;
    CHECK_DRIVER(cuMemAlloc(&back, kBoxW * kBoxH * kBoxD));
    CHECK_DRIVER(cuMemsetD8Async(back, kFill, kBoxW * kBoxH * kBoxD, stream));
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
    const std::vector<unsigned char> returned = download(back, kBoxW * kBoxH * kBoxD);
    const std::vector<unsigned char> model = boxOf(host);
    const size_t wrongBack = differences(returned.data(), model.data(), model.size());
    std::printf("box bytes back on this GPU: %zu of %zu\n", model.size() - wrongBack, model.size());
    verdict.check(kBack, wrongBack == 0);

    CHECK_DRIVER(cuMemFree(back));
    CHECK_DRIVER(cuCtxSetCurrent(peerContext));
    CHECK_DRIVER(cuMemFree(peerVolume));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(peer));
}

}  // namespace lesson25
