// texture_reference.h — lesson 19's CPU model of a texture fetch: the address modes and the linear
// filter as the CUDA C++ Programming Guide states them ("Texture Memory", "Texture Fetching"), with
// the filter weights held the way it says: "stored in 9-bit fixed point format with 8 bits of
// fractional value". The model computes the weighted sum in double: the guide gives no precision for
// the hardware's own arithmetic ("low-precision interpolation"), so the programs check the weights
// exactly and hold a filtered image to the model only within one step of its data. Arithmetic only,
// no driver call, so a CPU test checks it with known numbers.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace lesson19 {

// The texture programs' image: kTexWidth x kTexHeight texels of value (53 x + 97 y) mod 256, an
// integer from 0 to 255 (so the same values fit a byte), neighbours tens apart, so that a wrong
// texel moves a result by tens. Powers of two, so that the normalized coordinate of a texel centre,
// (x + 0.5) / 16, is exact in float.
constexpr int kTexWidth = 16;
constexpr int kTexHeight = 8;
constexpr int texelValue(int x, int y) {
    return (53 * x + 97 * y) % 256;
}

// A fetch position, as the kernels' float2 (x, y): texels with unnormalized coordinates, or
// fractions of the width and height with CU_TRSF_NORMALIZED_COORDINATES.
struct Sample {
    float x;
    float y;
};

inline std::vector<float> texelImage() {
    std::vector<float> image(kTexWidth * kTexHeight);
    for (int y = 0; y < kTexHeight; ++y)
        for (int x = 0; x < kTexWidth; ++x) image[y * kTexWidth + x] = static_cast<float>(texelValue(x, y));
    return image;
}

// How a fraction becomes a filter weight. The guide gives the 8 bits of fraction but not how the
// fraction is rounded to them, so the model has both ways, and `exact` (no 8-bit step at all) for
// comparison.
enum class Weights { roundToNearest, truncate, exact };

inline double weight(double fraction, Weights weights) {
    switch (weights) {
        case Weights::roundToNearest: return std::floor(fraction * 256.0 + 0.5) / 256.0;
        case Weights::truncate: return std::floor(fraction * 256.0) / 256.0;
        case Weights::exact: break;
    }
    return fraction;
}

// tex(x, y) with linear filtering and unnormalized coordinates (the guide, "Linear Filtering"):
// xB = x - 0.5, i = floor(xB), a = frac(xB) (alpha in the guide), likewise yB, j, b, and
// (1-a)(1-b) T[i,j] + a(1-b) T[i+1,j] + (1-a) b T[i,j+1] + a b T[i+1,j+1].
// Texels beyond the edge are the edge texel (clamp), as the textures here are made.
inline double bilinear(const std::vector<float>& texels, int width, int height, double x, double y, Weights weights) {
    const double xB = x - 0.5;
    const double yB = y - 0.5;
    const int i = static_cast<int>(std::floor(xB));
    const int j = static_cast<int>(std::floor(yB));
    const double a = weight(xB - i, weights);
    const double b = weight(yB - j, weights);
    auto T = [&](int u, int v) {
        return static_cast<double>(texels[std::clamp(v, 0, height - 1) * width + std::clamp(u, 0, width - 1)]);
    };
    return (1 - a) * (1 - b) * T(i, j) + a * (1 - b) * T(i + 1, j) + (1 - a) * b * T(i, j + 1) +
           a * b * T(i + 1, j + 1);
}

// Positions between texel centres whose fractions are (k + step) / 256 in x and in y, k varying
// from sample to sample (one per 2 x 2 block of texels). Step 0.25 lies a quarter of the way into an
// 8-bit step, where rounding to nearest and truncating give the same weight; step 0.75 is where they
// differ. x = i + 0.5 + fraction is exact in float: it has at most 15 significant bits.
inline std::vector<Sample> betweenCentres(double step) {
    std::vector<Sample> samples;
    for (int j = 0; j + 1 < kTexHeight; ++j)
        for (int i = 0; i + 1 < kTexWidth; ++i) {
            const double alpha = ((37 * i + 11 * j) % 256 + step) / 256.0;
            const double beta = ((29 * j + 7 * i + 64) % 256 + step) / 256.0;
            samples.push_back({static_cast<float>(i + 0.5 + alpha), static_cast<float>(j + 0.5 + beta)});
        }
    return samples;
}

// The largest |fetched - model| over the samples, for the image above scaled by `scale` (1 for the
// float texture, 1 / 255 for its bytes read as normalized floats).
inline double largestDifference(const std::vector<float>& fetched, const std::vector<Sample>& samples, Weights weights,
                                double scale) {
    const std::vector<float> texels = texelImage();
    double largest = 0.0;
    for (size_t s = 0; s < samples.size() && s < fetched.size(); ++s) {
        const double model = scale * bilinear(texels, kTexWidth, kTexHeight, samples[s].x, samples[s].y, weights);
        largest = std::max(largest, std::fabs(fetched[s] - model));
    }
    return largest;
}

// The tolerance for an 8-bit texel read as a normalized float, against byte / 255: the value is
// rounded to a float (at most 2^-24 for a value below 1) after a conversion whose arithmetic is not
// documented (allowed one more such rounding): 2 x 2^-24.
inline double normalizedReadTolerance() {
    return std::ldexp(1.0, -23);
}

// Which texel a point-sampled fetch reads on an axis of n texels at normalized coordinate u, after
// the address mode (the guide, "Texture Memory"): clamp keeps u in [0, 1); wrap takes frac(u);
// mirror takes frac(u) where floor(u) is even and 1 - frac(u) where it is odd; border leaves u as it
// is and returns the border colour outside [0, 1), shown here as -1. Then texel floor(u n), at most
// n - 1 (nearest-point sampling, "Texture Fetching").
inline int addressedTexel(CUaddress_mode mode, double u, int n) {
    double v = u;
    switch (mode) {
        case CU_TR_ADDRESS_MODE_WRAP: v = u - std::floor(u); break;
        case CU_TR_ADDRESS_MODE_MIRROR: {
            const double fraction = u - std::floor(u);
            v = std::fmod(std::floor(u), 2.0) == 0.0 ? fraction : 1.0 - fraction;
            break;
        }
        case CU_TR_ADDRESS_MODE_BORDER:
            if (u < 0.0 || u >= 1.0) return -1;
            break;
        case CU_TR_ADDRESS_MODE_CLAMP: v = std::clamp(u, 0.0, 1.0); break;
    }
    return std::min(static_cast<int>(std::floor(v * n)), n - 1);
}

}  // namespace lesson19
