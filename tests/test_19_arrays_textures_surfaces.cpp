#include <cuda.h>
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "19-arrays-textures-surfaces/texture_reference.h"
#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "19-arrays-textures-surfaces";
const std::vector<std::string> kPrograms = {"pitched_and_arrays", "filtering",        "address_and_read_modes",
                                            "surfaces",           "copy_and_stencil", "descriptors_and_limits"};

// The number a labelled value starts with ("4096 bytes, 100 bytes of padding" -> 4096).
double leadingNumber(const std::optional<std::string>& value) {
    REQUIRE(value);
    return std::stod(*value);
}

// The name the driver gives a result ("CUDA_SUCCESS"), which is what the programs print for it.
std::string resultName(CUresult result) {
    auto getName = DRIVER_FUNCTION(driver(), cuGetErrorName);
    REQUIRE(getName);
    const char* name = nullptr;
    REQUIRE(getName(result, &name) == CUDA_SUCCESS);
    REQUIRE(name != nullptr);
    return name;
}

// A plain run of one program that must pass with every check held.
RunResult passingRun(const std::string& program) {
    const RunResult r = defaultRun(kLesson, program);
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    requireChecksHeld(r);
    return r;
}

}  // namespace

// ---------------------------------------------------------------------------
// CPU: no driver needed.

TEST_CASE("Lesson 19 runs its six programs in order", "[cpu][lesson19]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Lesson 19 rejects unknown or incomplete arguments with a usage line and exit 2", "[cpu][lesson19]") {
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {"pitched_and_arrays", {"--bench"}},  // only copy_and_stencil has a benchmark
        {"filtering", {"--device"}},
        {"address_and_read_modes", {"--mode", "wrap"}},
        {"surfaces", {"--device", "one"}},
        {"copy_and_stencil", {"--size", "8192"}},
        {"descriptors_and_limits", {"--bench"}},
    };
    for (const auto& [program, args] : cases) checkRefusesArguments(kLesson, args, program);
}

TEST_CASE("Lesson 19's filter model keeps 8 bits of weight fraction, 1.0 included", "[cpu][lesson19]") {
    using lesson19::Weights;
    // A quarter of an 8-bit step: both roundings give k / 256; three quarters: they differ.
    CHECK(lesson19::weight((5 + 0.25) / 256, Weights::roundToNearest) == 5.0 / 256);
    CHECK(lesson19::weight((5 + 0.25) / 256, Weights::truncate) == 5.0 / 256);
    CHECK(lesson19::weight((5 + 0.75) / 256, Weights::roundToNearest) == 6.0 / 256);
    CHECK(lesson19::weight((5 + 0.75) / 256, Weights::truncate) == 5.0 / 256);
    CHECK(lesson19::weight(0.999, Weights::roundToNearest) == 1.0);  // "1.0 is exactly represented"
    CHECK(lesson19::weight(0.3, Weights::exact) == 0.3);
    // At a texel centre the filter returns the texel; halfway between two, their mean.
    const std::vector<float> texels = lesson19::texelImage();
    const int w = lesson19::kTexWidth;
    const int h = lesson19::kTexHeight;
    CHECK(lesson19::bilinear(texels, w, h, 3.5, 2.5, Weights::roundToNearest) == lesson19::texelValue(3, 2));
    CHECK(lesson19::bilinear(texels, w, h, 4.0, 2.5, Weights::roundToNearest) ==
          (lesson19::texelValue(3, 2) + lesson19::texelValue(4, 2)) / 2.0);
}

TEST_CASE("Lesson 19's quarter-step samples tell the 8-bit model from the exact one", "[cpu][lesson19]") {
    using lesson19::Weights;
    const std::vector<lesson19::Sample> samples = lesson19::betweenCentres(0.25);
    CHECK(samples.size() == static_cast<size_t>((lesson19::kTexWidth - 1) * (lesson19::kTexHeight - 1)));
    const std::vector<float> texels = lesson19::texelImage();
    std::vector<float> quantized;
    for (const auto& s : samples)
        quantized.push_back(static_cast<float>(
            lesson19::bilinear(texels, lesson19::kTexWidth, lesson19::kTexHeight, s.x, s.y, Weights::roundToNearest)));
    // The float-rounded 8-bit model is within float rounding of itself; the exact model is a quarter
    // of an 8-bit step times the texel differences away.
    CHECK(lesson19::largestDifference(quantized, samples, Weights::roundToNearest, 1.0) < 1e-4);
    CHECK(lesson19::largestDifference(quantized, samples, Weights::exact, 1.0) > 0.1);
    for (const auto& s : samples) {
        const double fraction = s.x - 0.5 - std::floor(s.x - 0.5);
        CHECK(fraction * 256 - std::floor(fraction * 256) == 0.25);  // a quarter step past k / 256, exactly
    }
}

TEST_CASE("Lesson 19's filter tolerance of one step tells a blend from a fetch that does not filter",
          "[cpu][lesson19]") {
    using lesson19::Weights;
    // filtering holds its linear textures to the 8-bit model within 1 (the texels are whole numbers).
    // A texture made with point sampling returns texel (floor(x), floor(y)) at each of these points:
    // that must miss the model by far more than 1, or the check could not tell the two apart.
    const std::vector<lesson19::Sample> samples = lesson19::betweenCentres(0.25);
    const std::vector<float> texels = lesson19::texelImage();
    std::vector<float> pointSampled;
    for (const auto& s : samples)
        pointSampled.push_back(texels[static_cast<size_t>(s.y) * lesson19::kTexWidth + static_cast<size_t>(s.x)]);
    CHECK(lesson19::largestDifference(pointSampled, samples, Weights::roundToNearest, 1.0) > 50.0);
    // The same for the 8-bit texels read as normalized floats (address_and_read_modes: within 1 / 255).
    for (float& value : pointSampled) value /= 255.0f;
    CHECK(lesson19::largestDifference(pointSampled, samples, Weights::roundToNearest, 1.0 / 255) > 50.0 / 255);
}

TEST_CASE("Lesson 19's address rule: clamp, wrap, mirror and border two texels beyond each edge", "[cpu][lesson19]") {
    constexpr int n = 16;
    auto at = [](CUaddress_mode mode, int texel) { return lesson19::addressedTexel(mode, (texel + 0.5) / n, n); };
    const std::vector<int> texels = {-2, -1, n, n + 1};
    const std::vector<std::pair<CUaddress_mode, std::vector<int>>> rules = {
        {CU_TR_ADDRESS_MODE_CLAMP, {0, 0, 15, 15}},
        {CU_TR_ADDRESS_MODE_WRAP, {14, 15, 0, 1}},
        {CU_TR_ADDRESS_MODE_MIRROR, {1, 0, 15, 14}},
        {CU_TR_ADDRESS_MODE_BORDER, {-1, -1, -1, -1}},
    };
    for (const auto& [mode, expected] : rules)
        for (size_t i = 0; i < texels.size(); ++i) {
            INFO("mode " << mode << ", texel " << texels[i]);
            CHECK(at(mode, texels[i]) == expected[i]);
        }
    for (const CUaddress_mode mode :
         {CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_WRAP, CU_TR_ADDRESS_MODE_MIRROR, CU_TR_ADDRESS_MODE_BORDER})
        for (int texel = 0; texel < n; ++texel) CHECK(at(mode, texel) == texel);  // inside, every mode agrees
}

// ---------------------------------------------------------------------------
// GPU: the lesson's own checks, read from its output.

TEST_CASE(
    "Lesson 19 pitched_and_arrays: the driver's pitch, aligned; every defined copy exact; a row wider than the "
    "pitch not accepted; the half-element copy's answer as this driver gives it",
    "[gpu][lesson19]") {
    requireGpu();
    const RunResult r = passingRun("pitched_and_arrays");
    const std::regex pitchLine("([0-9]+) bytes, ([0-9]+) bytes of padding per row");
    std::smatch m;
    const std::string pitchValue = valueOf(r.out, "pitch (cuMemAllocPitch)").value_or("");
    REQUIRE(std::regex_match(pitchValue, m, pitchLine));
    const unsigned long pitch = std::stoul(m[1]);
    const unsigned long padding = std::stoul(m[2]);
    const unsigned long alignment =
        static_cast<unsigned long>(leadingNumber(valueOf(r.out,
                                                         "texture pitch alignment "
                                                         "(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT)")));
    REQUIRE(alignment > 0);
    CHECK(pitch >= 999 * 4);
    CHECK(pitch % alignment == 0);
    // What the program says of the row (3996 bytes) and of the pitch follows from the alignment.
    CHECK(valueOf(r.out, "row width a multiple of it") ==
          std::string(3996 % alignment == 0 ? "yes" : "no") + "; pitch a multiple of it: yes");
    // The copy cuda.h forbids ("dstPitch must be greater than or equal to WidthInBytes +
    // dstXInBytes"): cuda.h names no error code for it, so any refusal will do (observed on the H100:
    // CUDA_ERROR_INVALID_VALUE).
    const auto wide = valueOf(
        r.out, "copy of a " + std::to_string(pitch + 4) + "-byte row into a " + std::to_string(pitch) + "-byte pitch");
    REQUIRE(wide);
    CHECK(wide->starts_with("CUDA_ERROR_"));
    {
        CurrentPrimaryContext context;
        auto create = DRIVER_FUNCTION(driver(), cuArrayCreate);
        auto destroy = DRIVER_FUNCTION(driver(), cuArrayDestroy);
        auto copy2D = DRIVER_FUNCTION(driver(), cuMemcpy2D);
        auto allocPitch = DRIVER_FUNCTION(driver(), cuMemAllocPitch);
        auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
        auto attribute = DRIVER_FUNCTION(driver(), cuDeviceGetAttribute);
        REQUIRE((create && destroy && copy2D && allocPitch && memFree && attribute));
        // The two alignments printed are the device's own, asked of the driver here.
        int pitchAlignment = 0;
        int textureAlignment = 0;
        REQUIRE(attribute(&pitchAlignment, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, context.device()) ==
                CUDA_SUCCESS);
        REQUIRE(attribute(&textureAlignment, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, context.device()) == CUDA_SUCCESS);
        REQUIRE(textureAlignment > 0);
        CHECK(alignment == static_cast<unsigned long>(pitchAlignment));
        CHECK(valueOf(r.out, "texture alignment (CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT)") ==
              std::to_string(textureAlignment) + " bytes");
        // Whether the base is aligned depends on the address (shown, not promised); when it is, the
        // texel (100, 50) is 50 pitches and 400 bytes further, and the answer follows from those.
        const std::regex baseLine("(yes|no); address of texel \\(100, 50\\) a multiple of it: (yes|no)");
        std::smatch base;
        const std::string baseValue = valueOf(r.out, "image base a multiple of it").value_or("");
        REQUIRE(std::regex_match(baseValue, base, baseLine));
        const bool texelOffsetAligned = (50 * pitch + 100 * 4) % static_cast<unsigned long>(textureAlignment) == 0;
        if (base[1] == "yes") CHECK(base[2] == (texelOffsetAligned ? "yes" : "no"));
        // The pitch the program printed is the driver's for the same request (3996-byte rows, 300 of
        // them, 4-byte elements), and the padding it printed is that pitch less the row: the test asks
        // the driver itself. cuda.h does not promise that two equal requests get equal pitches;
        // observed on the H100, they do.
        CUdeviceptr own = 0;
        size_t ownPitch = 0;
        REQUIRE(allocPitch(&own, &ownPitch, 999 * 4, 300, 4) == CUDA_SUCCESS);
        CHECK(memFree(own) == CUDA_SUCCESS);
        CHECK(pitch == ownPitch);
        CHECK(padding == ownPitch - 999 * 4);
        // cuda.h forbids the half-element copy; what this driver answers is shown, not promised, so
        // the test makes the same copy (8 bytes at dstXInBytes 2 of a 999 x 300 float array) and
        // requires the program to have printed this driver's own answer.
        CUDA_ARRAY_DESCRIPTOR desc{};
        desc.Width = 999;
        desc.Height = 300;
        desc.Format = CU_AD_FORMAT_FLOAT;
        desc.NumChannels = 1;
        CUarray array = nullptr;
        REQUIRE(create(&array, &desc) == CUDA_SUCCESS);
        Cleanup release([&] { return destroy(array); });
        const std::vector<float> row(999, 1.0f);
        CUDA_MEMCPY2D halfElement{};
        halfElement.srcMemoryType = CU_MEMORYTYPE_HOST;
        halfElement.srcHost = row.data();
        halfElement.srcPitch = 999 * sizeof(float);
        halfElement.dstMemoryType = CU_MEMORYTYPE_ARRAY;
        halfElement.dstArray = array;
        halfElement.dstXInBytes = 2;
        halfElement.WidthInBytes = 2 * sizeof(float);
        halfElement.Height = 1;
        CHECK(valueOf(r.out, "copy into the array at dstXInBytes 2, half an element (cuda.h forbids it)") ==
              resultName(copy2D(&halfElement)));
    }
    CHECK(valueOf(r.out, "2D array (cuArrayGetDescriptor)") == "999 x 300, format 0x20, 1 channel(s)");
    CHECK(valueOf(r.out, "3D array (cuArray3DGetDescriptor)") == "64 x 32 x 16, format 0x20, 2 channel(s), flags 0");
    for (const char* name :
         {"the image comes back from pitched memory exactly",
          "the rectangle read holds exactly the image's texels there",
          "the rectangle written landed in place and nothing else changed",
          "the pitched image comes back from the 2D array exactly", "the volume comes back from the 3D array exactly",
          "the box read from the 3D array holds exactly the volume's texels there"}) {
        INFO(name);
        CHECK(checkOk(r.out, name));
    }
    CHECK(valueOf(r.out, "arrays, pitched image and primary context") == "released");
}

TEST_CASE("Lesson 19 filtering: point sampling exact, linear-filter weights exactly the 8-bit model's",
          "[gpu][lesson19]") {
    requireGpu();
    const RunResult r = passingRun("filtering");
    CHECK(valueOf(r.out, "point samples inside texels") == "384, equal to their texel: 384");
    // The weight of fraction (100 + 1/4) / 256 is 100 / 256 with 8 bits of fraction.
    CHECK(valueOf(r.out, "weights measured at fractions (k + 1/4) / 256, k = 0..255") ==
          "256, e.g. k = 100: 0.39062500 = 100 / 256");
    CHECK(leadingNumber(valueOf(r.out, "largest difference from the model's 8-bit weight")) == 0.0);
    CHECK(leadingNumber(valueOf(r.out, "largest difference from the exact fraction")) ==
          Catch::Approx(1.0 / 1024).epsilon(0.01));
    // How the fraction is rounded is not documented: whichever rule the program names, its example
    // (k = 100, fraction 100.75 / 256) must be that rule's weight: 101 / 256 rounded, 100 / 256 truncated.
    const auto rounding =
        valueOf(r.out, "weights at (k + 3/4) / 256 (the guide does not say how the fraction is rounded)");
    REQUIRE(rounding);
    if (rounding->starts_with("rounded to nearest"))
        CHECK(*rounding == "rounded to nearest, e.g. k = 100: 0.39453125 = 101 / 256");
    else if (rounding->starts_with("truncated"))
        CHECK(*rounding == "truncated, e.g. k = 100: 0.39062500 = 100 / 256");
    else
        CHECK(rounding->starts_with("neither model, e.g. k = 100: "));
    // Both linear textures, over the array and over pitched memory, within one step of the data (1) of
    // the 8-bit model: the bound the program's checks use.
    const double arrayError = leadingNumber(valueOf(r.out, "largest difference from the model with 8-bit weights"));
    const double pitchedError =
        leadingNumber(valueOf(r.out, "largest difference over pitched memory from the model with 8-bit weights"));
    CHECK(arrayError <= 1.0);
    CHECK(pitchedError <= 1.0);
    CHECK(checkOk(r.out, "the texture over the array filters linearly, within one step of the model"));
    CHECK(checkOk(r.out, "the texture over pitched memory filters linearly, within one step of the model"));
    // Bit-identical results over pitched memory and over the array are shown, not promised: a count
    // out of the 105 samples.
    const std::regex identical("[0-9]+ of 105");
    CHECK(std::regex_match(
        valueOf(r.out, "linear samples over pitched memory bit-identical to those over the array").value_or(""),
        identical));
    // The unaligned pitch tried is the pitched copy's pitch plus 4 bytes, refused with some error
    // (cuda.h names none; observed on the H100: CUDA_ERROR_INVALID_VALUE), or not tried at all where
    // the alignment is 4 bytes or less.
    const std::regex imageLine(".*pitch of the pitched copy: ([0-9]+) bytes");
    std::smatch m;
    const std::string imageValue = valueOf(r.out, "image").value_or("");
    REQUIRE(std::regex_match(imageValue, m, imageLine));
    const unsigned long pitch = std::stoul(m[1]);
    const std::regex unaligned("texture over a pitch of " + std::to_string(pitch + 4) +
                               " bytes \\(alignment ([0-9]+)\\): (CUDA_[A-Z_]+)");
    std::smatch u;
    if (std::regex_search(r.out, u, unaligned)) {
        CHECK(std::stoul(u[1]) > 4);
        CHECK(u[2] != "CUDA_SUCCESS");
        CHECK(checkOk(r.out, "a texture over an unaligned pitch is refused"));
    } else {
        CHECK(contains(r.out, "texture over an unaligned pitch: not tried (alignment "));
    }
    CHECK(valueOf(r.out, "texture objects, pitched memory, array, module and primary context") == "released");
}

TEST_CASE("Lesson 19 address_and_read_modes: every mode reads the rule's texel, bytes read as integers and as b / 255",
          "[gpu][lesson19]") {
    requireGpu();
    const RunResult r = passingRun("address_and_read_modes");
    // "wrap (fetched/rule): 180/180 ...": eight samples, each fetched value equal to the rule's.
    for (const char* mode : {"clamp", "wrap", "mirror", "border"}) {
        INFO(mode);
        const auto value = valueOf(r.out, std::string(mode) + " (fetched/rule)");
        REQUIRE(value);
        const std::regex pair("(-?[0-9.]+)/(-?[0-9.]+)");
        int pairs = 0;
        for (std::sregex_iterator it(value->begin(), value->end(), pair), end; it != end; ++it, ++pairs)
            CHECK((*it)[1] == (*it)[2]);
        CHECK(pairs == 8);
    }
    CHECK(valueOf(r.out, "border (fetched/rule)") == "-1/-1 -1/-1 -1/-1 -1/-1 -1/-1 -1/-1 -1/-1 -1/-1");
    // texel (x, y) = (53 x + 97 y) mod 256: (0, 0) = 0, (15, 7) = (795 + 679) mod 256 = 194.
    CHECK(valueOf(r.out, "read as integers") == "texel (0, 0) = 0, texel (15, 7) = 194");
    CHECK(leadingNumber(valueOf(r.out, "largest difference from byte / 255")) <= std::ldexp(1.0, -23));
    CHECK(leadingNumber(valueOf(r.out,
                                "linear filtering of normalized bytes, largest difference from the "
                                "8-bit-weight model")) <= 1.0 / 255);
    CHECK(valueOf(r.out, "texture objects, arrays, module and primary context") == "released");
}

TEST_CASE("Lesson 19 surfaces: a kernel's surface writes read back exactly, by copy and by a later texture fetch",
          "[gpu][lesson19]") {
    requireGpu();
    const RunResult r = passingRun("surfaces");
    // Whether the driver refuses the flagless array is shown, not promised: the test asks this driver
    // the same (a 1000 x 600 float array made with Flags 0) and requires the program's line to be
    // that answer.
    {
        CurrentPrimaryContext context;
        auto create = DRIVER_FUNCTION(driver(), cuArray3DCreate);
        auto destroy = DRIVER_FUNCTION(driver(), cuArrayDestroy);
        auto surfCreate = DRIVER_FUNCTION(driver(), cuSurfObjectCreate);
        auto surfDestroy = DRIVER_FUNCTION(driver(), cuSurfObjectDestroy);
        REQUIRE((create && destroy && surfCreate && surfDestroy));
        CUDA_ARRAY3D_DESCRIPTOR desc{};
        desc.Width = 1000;
        desc.Height = 600;
        desc.Format = CU_AD_FORMAT_FLOAT;
        desc.NumChannels = 1;
        desc.Flags = 0;
        CUarray array = nullptr;
        REQUIRE(create(&array, &desc) == CUDA_SUCCESS);
        Cleanup release([&] { return destroy(array); });
        CUDA_RESOURCE_DESC resource{};
        resource.resType = CU_RESOURCE_TYPE_ARRAY;
        resource.res.array.hArray = array;
        CUsurfObject surface = 0;
        const CUresult answer = surfCreate(&surface, &resource);
        if (answer == CUDA_SUCCESS) CHECK(surfDestroy(surface) == CUDA_SUCCESS);
        CHECK(valueOf(r.out, "cuSurfObjectCreate over an array without CUDA_ARRAY3D_SURFACE_LDST") ==
              resultName(answer));
    }
    CHECK(valueOf(r.out, "image written through the surface") == "1000 x 600 texels, wrong: 0");
    CHECK(valueOf(r.out, "image read through a texture by the next kernel") == "wrong texels: 0");
    CHECK(valueOf(r.out, "grid beyond the image") ==
          "8 columns, 8 rows; words written outside the image (row padding, 16 guard rows): 0");
    CHECK(valueOf(r.out, "texture and surface objects, memory, array, module and primary context") == "released");
}

TEST_CASE("Lesson 19 copy_and_stencil: both copies and both stencils are exact; the plain run times nothing",
          "[gpu][lesson19]") {
    requireGpu();
    const RunResult r = passingRun("copy_and_stencil");
    CHECK(valueOf(r.out, "sub-rectangle") == "750 x 450 floats from (125, 75) to (62, 37)");
    CHECK(valueOf(r.out, "cuMemcpyDtoD calls") == "450; texels wrong in the destination: 0");
    CHECK(valueOf(r.out, "texels that differ from the host's stencil") == "through a texture 0, with global loads 0");
    // The grid overhangs the 1000 x 600 image (blocks of 32 x 16), and nothing outside it is written.
    CHECK(valueOf(r.out, "launch") ==
          "32 x 38 blocks of 32 x 16 threads: 24 columns and 8 rows of threads beyond the image");
    CHECK(valueOf(r.out, "words written outside the image (row padding, 16 guard rows)") ==
          "through a texture 0, with global loads 0");
    CHECK(valueOf(r.out, "benchmarks") == "not run (add --bench)");
    CHECK_FALSE(contains(r.out, "bench: "));
}

TEST_CASE("Lesson 19 copy_and_stencil --bench: every rate measured, one cuMemcpy2D over twice a copy per row",
          "[gpu][lesson19][bench]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench"};
    const RunResult r = runLesson(kLesson, options, "copy_and_stencil");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(contains(r.out, "benchmarks on: "));
    const double peak = benchValue(r.out, "DRAM peak (2 x memory clock x bus width / 8)");
    for (const char* metric : {"cuMemcpyDtoD whole image (read + write)", "cuMemcpy2D sub-rectangle (read + write)",
                               "row-by-row cuMemcpyDtoD sub-rectangle", "stencil through a texture (read + write)",
                               "stencil with global loads (read + write)"}) {
        INFO(metric);
        // The whole-image copy is timed only where both images got the same pitch (not promised).
        if (std::string(metric).starts_with("cuMemcpyDtoD whole image") &&
            contains(r.out, "whole-image cuMemcpyDtoD: not timed"))
            continue;
        CHECK(benchValue(r.out, metric) > 0.0);
        // The shares are figures, not verdicts: the whole-image copy reached 89 % of the peak computed
        // from the memory clock and bus width on the H100, too close to 100 % to require a bound on
        // every GPU; one above it is reported, not failed.
        if (peak > 0.0) {
            const double share = benchValue(r.out, std::string(metric) + " share of DRAM peak");
            if (share > 100.0) WARN(metric << ": " << share << " % of the computed DRAM peak");
        }
    }
    // The same 6144 rows of 24 KiB moved by one call against 6144 calls, each its own trip through
    // the driver and its own copy on the GPU: 135 x and 192 x in two runs on the H100. Requiring
    // only 2 x leaves a margin of more than 60 times, which no GPU's cost per call comes near; the
    // ratio itself is a figure.
    CHECK(benchValue(r.out, "cuMemcpy2D / row-by-row cuMemcpyDtoD") > 2.0);
    // Which stencil is faster depends on the GPU (0.63 x on the H100): a figure, required only to exist.
    CHECK(benchValue(r.out, "stencil texture / global loads") > 0.0);
}

// ---------------------------------------------------------------------------
// GPU: the same driver behaviour, checked directly through the driver.

TEST_CASE(
    "Lesson 19 descriptors_and_limits: arrays, texture and surface objects read back as made; the 1D linear "
    "limit holds exactly; an array's memory comes back",
    "[gpu][lesson19]") {
    requireGpu();
    const RunResult r = passingRun("descriptors_and_limits");
    for (const char* name :
         {"the 1D array reads back as asked, Height 0", "the 2D array reads back as asked",
          "the image comes back from the 2D array exactly", "the volume reads back as asked",
          "the surface array reads back as asked, with CUDA_ARRAY3D_SURFACE_LDST",
          "the volume comes back from the 3D array exactly", "cuTexObjectGetResourceDesc gives back the image array",
          "cuTexObjectGetTextureDesc gives back the address modes, filter and flags",
          "cuTexObjectGetResourceViewDesc gives back the view's format and size",
          "cuSurfObjectGetResourceDesc gives back the surface array",
          "a 1D linear texture exactly as wide as the limit is accepted", "one element more is refused",
          "a 256 MiB array takes its memory from the device", "cuArrayDestroy gives the array's memory back"})
        CHECK(checkOk(r.out, name));
    CHECK(valueOf(r.out, "1D array") == "4096 x 0, format 32, 1 channel(s)");  // 32: CU_AD_FORMAT_FLOAT
    CHECK(valueOf(r.out, "2D array") == "300 x 200, format 2, 2 channel(s)");  // 2: CU_AD_FORMAT_UNSIGNED_INT16
    CHECK(valueOf(r.out, "volume") == "300 x 200 x 6, flags 0");
    CHECK(valueOf(r.out, "surface array") == "300 x 200 x 0, flags 2");  // CUDA_ARRAY3D_SURFACE_LDST
    // The limit the program printed is this driver's answer for the same format.
    {
        CurrentPrimaryContext context;
        auto deviceGet = DRIVER_FUNCTION(driver(), cuDeviceGet);
        auto maxWidth = DRIVER_FUNCTION(driver(), cuDeviceGetTexture1DLinearMaxWidth);
        REQUIRE((deviceGet && maxWidth));
        CUdevice device = 0;
        REQUIRE(deviceGet(&device, 0) == CUDA_SUCCESS);
        size_t width = 0;
        REQUIRE(maxWidth(&width, CU_AD_FORMAT_UNSIGNED_INT8, 1, device) == CUDA_SUCCESS);
        CHECK(valueOf(r.out, "cuDeviceGetTexture1DLinearMaxWidth (8-bit, 1 channel) in elements") ==
              std::to_string(width));
    }
    CHECK(valueOf(r.out, "cuTexObjectCreate at the limit") == "CUDA_SUCCESS");
    CHECK(valueOf(r.out, "objects, arrays and primary context") == "released");
}

TEST_CASE("cuMemAllocPitch pads every width to a multiple of the texture pitch alignment", "[gpu][lesson19]") {
    requireGpu();
    CurrentPrimaryContext context;
    auto allocPitch = DRIVER_FUNCTION(driver(), cuMemAllocPitch);
    auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
    auto attribute = DRIVER_FUNCTION(driver(), cuDeviceGetAttribute);
    REQUIRE((allocPitch && memFree && attribute));
    int alignment = 0;
    REQUIRE(attribute(&alignment, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, context.device()) == CUDA_SUCCESS);
    REQUIRE(alignment > 0);
    for (const size_t widthBytes : {4ul, 100ul, 3996ul, 4096ul, 65540ul}) {
        INFO("width " << widthBytes << " bytes");
        CUdeviceptr memory = 0;
        size_t pitch = 0;
        REQUIRE(allocPitch(&memory, &pitch, widthBytes, 16, 4) == CUDA_SUCCESS);
        CHECK(memFree(memory) == CUDA_SUCCESS);
        CHECK(pitch >= widthBytes);
        CHECK(pitch % static_cast<size_t>(alignment) == 0);
    }
}

TEST_CASE("A 2D array made by cuArray3DCreate with Depth 0 reads back as 2D with its flags, and takes a surface",
          "[gpu][lesson19]") {
    requireGpu();
    CurrentPrimaryContext context;
    auto create = DRIVER_FUNCTION(driver(), cuArray3DCreate);
    auto describe = DRIVER_FUNCTION(driver(), cuArray3DGetDescriptor);
    auto destroy = DRIVER_FUNCTION(driver(), cuArrayDestroy);
    auto surfCreate = DRIVER_FUNCTION(driver(), cuSurfObjectCreate);
    auto surfDestroy = DRIVER_FUNCTION(driver(), cuSurfObjectDestroy);
    REQUIRE((create && describe && destroy && surfCreate && surfDestroy));
    CUDA_ARRAY3D_DESCRIPTOR desc{};
    desc.Width = 128;
    desc.Height = 64;
    desc.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    desc.NumChannels = 4;
    desc.Flags = CUDA_ARRAY3D_SURFACE_LDST;
    CUarray array = nullptr;
    REQUIRE(create(&array, &desc) == CUDA_SUCCESS);
    Cleanup release([&] { return destroy(array); });
    CUDA_ARRAY3D_DESCRIPTOR back{};
    CHECK(describe(&back, array) == CUDA_SUCCESS);
    CHECK(back.Width == 128);
    CHECK(back.Height == 64);
    CHECK(back.Depth == 0);
    CHECK(back.Format == CU_AD_FORMAT_UNSIGNED_INT8);
    CHECK(back.NumChannels == 4);
    CHECK(back.Flags == CUDA_ARRAY3D_SURFACE_LDST);
    CUDA_RESOURCE_DESC resource{};
    resource.resType = CU_RESOURCE_TYPE_ARRAY;
    resource.res.array.hArray = array;
    CUsurfObject surface = 0;
    REQUIRE(surfCreate(&surface, &resource) == CUDA_SUCCESS);
    CHECK(surfDestroy(surface) == CUDA_SUCCESS);
}
