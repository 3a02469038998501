// Lesson 19, program 3 of 6 — what a texture returns outside the image (address modes) and what
// it returns for 8-bit data (read modes).
//
// Address modes decide which texel a coordinate outside [0, 1) reads: clamp (the edge texel), wrap
// (the image repeats), mirror (it repeats reflected), border (a border colour). The guide: "the wrap
// mode and the mirror mode" are available "for normalized coordinates"; cuda.h is stricter: without
// CU_TRSF_NORMALIZED_COORDINATES "the only supported address mode is CU_TR_ADDRESS_MODE_CLAMP". So
// every mode here is fetched with normalized coordinates, two texels beyond each edge, and compared
// with the guide's rule (texture_reference.h). Then 8-bit texels three ways: read as integers
// (CU_TRSF_READ_AS_INTEGER), read as floats in [0, 1] (the default), and linearly filtered.
//
//   address_and_read_modes [--device N]
#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "texture_helpers.h"
#include "texture_reference.h"

using lesson19::kTexHeight;
using lesson19::kTexWidth;
using lesson19::Sample;

namespace {

// cuda.h and the guide differ on border mode without normalized coordinates (cuda.h: then "the only
// supported address mode is CU_TR_ADDRESS_MODE_CLAMP"; the guide leaves border available). What this
// driver does is shown, not checked: both the answer of cuTexObjectCreate and the fetch half a texel
// left of the image, at row centre y.
void borderWithoutNormalizedCoordinates(CUfunction sampleFloat, const CUDA_RESOURCE_DESC& resource, float colour,
                                        float y) {
    CUDA_TEXTURE_DESC desc = lesson19::textureDesc(CU_TR_ADDRESS_MODE_BORDER, CU_TR_FILTER_MODE_POINT, 0);
    desc.borderColor[0] = colour;
    CUtexObject texture = 0;
    const CUresult result = REPORT_DRIVER(cuTexObjectCreate(&texture, &resource, &desc, nullptr));
    std::printf("border mode with unnormalized coordinates, cuTexObjectCreate: %s\n", course::driverErrorName(result));
    if (result != CUDA_SUCCESS) return;
    const std::vector<float> beyond = lesson19::fetch<float>(sampleFloat, texture, {{-0.5f, y}});
    std::printf("border mode with unnormalized coordinates, fetched at x = -0.5: %g (border colour %g)\n", beyond[0],
                colour);
    CHECK_DRIVER(cuTexObjectDestroy(texture));
}

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    course::printStep(1, "initialise the driver, the primary context, the sampling kernels");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    CHECK_DRIVER(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    CHECK_DRIVER(cuDeviceGetName(name, sizeof(name), device));
    std::printf("device %d name: %s\n", ordinal, name);
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, course::kernelPath("sampling.fatbin").c_str()));
    CUfunction sampleFloat = nullptr;
    CUfunction sampleBytes = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&sampleFloat, module, "sampleFloat"));
    CHECK_DRIVER(cuModuleGetFunction(&sampleBytes, module, "sampleBytes"));

    // Step 2: the float image in an array; texel centres two and one texels beyond each edge of row 3
    // (x = -2, -1, 16, 17) and of column 5 (y = -2, -1, 8, 9), as fractions of the width and height.
    course::printStep(2, "address modes at the edges, normalized coordinates");
    const std::vector<float> texels = lesson19::texelImage();
    CUDA_ARRAY_DESCRIPTOR floatDesc{};
    floatDesc.Width = kTexWidth;
    floatDesc.Height = kTexHeight;
    floatDesc.Format = CU_AD_FORMAT_FLOAT;
    floatDesc.NumChannels = 1;
    CUarray floatArray = nullptr;
    CHECK_DRIVER(cuArrayCreate(&floatArray, &floatDesc));
    lesson19::copyToArray(floatArray, texels.data(), kTexWidth * sizeof(float), kTexHeight);
    const CUDA_RESOURCE_DESC floatResource = lesson19::arrayResource(floatArray);
    constexpr int kRow = 3;
    constexpr int kColumn = 5;
    std::vector<Sample> outside;
    for (const int x : {-2, -1, kTexWidth, kTexWidth + 1})
        outside.push_back({(x + 0.5f) / kTexWidth, (kRow + 0.5f) / kTexHeight});
    for (const int y : {-2, -1, kTexHeight, kTexHeight + 1})
        outside.push_back({(kColumn + 0.5f) / kTexWidth, (y + 0.5f) / kTexHeight});
    std::printf("samples: x = -2, -1, 16, 17 on row %d, then y = -2, -1, 8, 9 on column %d (texel centres)\n", kRow,
                kColumn);
    constexpr float kBorderColour = -1.0f;  // no texel has it
    const struct {
        CUaddress_mode mode;
        const char* name;
        const char* check;
    } modes[] = {{CU_TR_ADDRESS_MODE_CLAMP, "clamp", "clamp reads the texel the guide's rule gives at every edge"},
                 {CU_TR_ADDRESS_MODE_WRAP, "wrap", "wrap reads the texel the guide's rule gives at every edge"},
                 {CU_TR_ADDRESS_MODE_MIRROR, "mirror", "mirror reads the texel the guide's rule gives at every edge"},
                 {CU_TR_ADDRESS_MODE_BORDER, "border", "border returns the border colour beyond every edge"}};
    for (const auto& m : modes) {
        CUDA_TEXTURE_DESC desc = lesson19::textureDesc(m.mode, CU_TR_FILTER_MODE_POINT, CU_TRSF_NORMALIZED_COORDINATES);
        desc.borderColor[0] = kBorderColour;  // read only in border mode
        CUtexObject texture = 0;
        CHECK_DRIVER(cuTexObjectCreate(&texture, &floatResource, &desc, nullptr));
        const std::vector<float> fetched = lesson19::fetch<float>(sampleFloat, texture, outside);
        CHECK_DRIVER(cuTexObjectDestroy(texture));
        bool asRule = true;
        std::printf("%s (fetched/rule):", m.name);
        for (size_t s = 0; s < outside.size(); ++s) {
            const int x = lesson19::addressedTexel(m.mode, outside[s].x, kTexWidth);
            const int y = lesson19::addressedTexel(m.mode, outside[s].y, kTexHeight);
            const float rule = x < 0 || y < 0 ? kBorderColour : texels[y * kTexWidth + x];
            asRule = asRule && fetched[s] == rule;
            std::printf(" %g/%g", fetched[s], rule);
        }
        std::printf("\n");
        verdict.check(m.check, asRule);
    }
    borderWithoutNormalizedCoordinates(sampleFloat, floatResource, kBorderColour, kRow + 0.5f);

    // Step 3: the same values as bytes in an 8-bit array (CU_AD_FORMAT_UNSIGNED_INT8, 1 channel).
    course::printStep(3, "8-bit texels: read as integers, read as normalized floats, filtered");
    std::vector<unsigned char> bytes(texels.begin(), texels.end());
    CUDA_ARRAY_DESCRIPTOR byteDesc = floatDesc;
    byteDesc.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    CUarray byteArray = nullptr;
    CHECK_DRIVER(cuArrayCreate(&byteArray, &byteDesc));
    lesson19::copyToArray(byteArray, bytes.data(), kTexWidth, kTexHeight);
    const CUDA_RESOURCE_DESC byteResource = lesson19::arrayResource(byteArray);
    std::vector<Sample> centres;
    for (int y = 0; y < kTexHeight; ++y)
        for (int x = 0; x < kTexWidth; ++x) centres.push_back({x + 0.5f, y + 0.5f});

    // CU_TRSF_READ_AS_INTEGER: the fetch returns the byte. The kernel asks for unsigned char, the
    // element type; texture_indirect_functions.h accepts any integer type there and does not say which
    // pairings of fetch type and read mode return the data (sampling.cu).
    const CUDA_TEXTURE_DESC integerDesc =
        lesson19::textureDesc(CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, CU_TRSF_READ_AS_INTEGER);
    CUtexObject integerTexture = 0;
    CHECK_DRIVER(cuTexObjectCreate(&integerTexture, &byteResource, &integerDesc, nullptr));
    const std::vector<unsigned int> asIntegers = lesson19::fetch<unsigned int>(sampleBytes, integerTexture, centres);
    const bool integersExact = std::equal(asIntegers.begin(), asIntegers.end(), bytes.begin());
    std::printf("read as integers: texel (0, 0) = %u, texel (15, 7) = %u\n", asIntegers.front(), asIntegers.back());
    verdict.check("integer reads return the stored bytes", integersExact);

    // No flag: the guide maps the unsigned range to [0.0, 1.0], so byte b reads as b / 255.
    const CUDA_TEXTURE_DESC normalizedDesc =
        lesson19::textureDesc(CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, 0);
    CUtexObject normalizedTexture = 0;
    CHECK_DRIVER(cuTexObjectCreate(&normalizedTexture, &byteResource, &normalizedDesc, nullptr));
    const std::vector<float> asFloats = lesson19::fetch<float>(sampleFloat, normalizedTexture, centres);
    double readError = 0.0;
    for (size_t i = 0; i < bytes.size(); ++i)
        readError = std::max(readError, std::fabs(asFloats[i] - bytes[i] / 255.0));
    std::printf("read as normalized floats: texel (0, 0) = %.7g, texel (15, 7) = %.7g (= %u / 255)\n", asFloats.front(),
                asFloats.back(), static_cast<unsigned>(bytes.back()));
    std::printf("largest difference from byte / 255: %.3g (tolerance 2 x 2^-24 = %.3g)\n", readError,
                lesson19::normalizedReadTolerance());
    verdict.check("normalized reads return byte / 255", readError <= lesson19::normalizedReadTolerance());

    // Linear filtering needs float results ("only valid for returned values of floating-point type"):
    // normalized 8-bit reads qualify. The guide gives the 8-bit weights, not the arithmetic for 8-bit
    // data, so the bound here is one step of that data, 1 / 255: a wrong texel or no filtering misses
    // it by many steps.
    const CUDA_TEXTURE_DESC byteLinearDesc =
        lesson19::textureDesc(CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_LINEAR, 0);
    CUtexObject byteLinearTexture = 0;
    CHECK_DRIVER(cuTexObjectCreate(&byteLinearTexture, &byteResource, &byteLinearDesc, nullptr));
    const std::vector<Sample> quarter = lesson19::betweenCentres(0.25);
    const std::vector<float> blended = lesson19::fetch<float>(sampleFloat, byteLinearTexture, quarter);
    const double blendError =
        lesson19::largestDifference(blended, quarter, lesson19::Weights::roundToNearest, 1.0 / 255);
    std::printf("linear filtering of normalized bytes, largest difference from the 8-bit-weight model: %.3g\n",
                blendError);
    verdict.check("the 8-bit texture filters linearly, within one step of the model", blendError <= 1.0 / 255);

    // Step 4: texture objects before the arrays they read.
    course::printStep(4, "release everything: texture objects before what they read");
    CHECK_DRIVER(cuTexObjectDestroy(byteLinearTexture));
    CHECK_DRIVER(cuTexObjectDestroy(normalizedTexture));
    CHECK_DRIVER(cuTexObjectDestroy(integerTexture));
    CHECK_DRIVER(cuArrayDestroy(byteArray));
    CHECK_DRIVER(cuArrayDestroy(floatArray));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("texture objects, arrays, module and primary context: released\n");
    return verdict.finish();
}
