#include <cuda.h>
#include <catch2/catch_test_macros.hpp>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "20-tensor-maps/swizzle_math.h"
#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "20-tensor-maps";
const std::vector<std::string> kPrograms = {"encode_rules", "tile_copy", "swizzle_bench"};

}  // namespace

// ---------------------------------------------------------------------------
// CPU: no driver needed.

TEST_CASE("Lesson 20 runs its three programs in order", "[cpu][lesson20]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Lesson 20 rejects unknown or incomplete arguments with a usage line and exit 2", "[cpu][lesson20]") {
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {"encode_rules", {"--bench"}},  // only swizzle_bench has a benchmark
        {"tile_copy", {"--bench"}},      {"tile_copy", {"--device", "one"}},
        {"swizzle_bench", {"--device"}}, {"swizzle_bench", {"--rounds", "8"}},
    };
    for (const auto& [program, args] : cases) checkRefusesArguments(kLesson, args, program);
}

TEST_CASE("The 128-byte swizzle moves 16-byte chunks within their 128-byte row and repeats every 1024 bytes",
          "[cpu][lesson20]") {
    std::set<unsigned int> images;
    for (unsigned int offset = 0; offset < 4096; ++offset) {
        const unsigned int placed = lesson20::swizzle128(offset);
        INFO("offset " << offset);
        CHECK(placed / 128 == offset / 128);  // the same row
        CHECK(placed % 16 == offset % 16);    // the same byte of the chunk
        CHECK(lesson20::swizzle128(offset % 1024) + offset / 1024 * 1024 == placed);
        if (offset < 128) CHECK(placed == offset);  // row 0 of the pattern stays in place
        images.insert(placed);
    }
    CHECK(images.size() == 4096);  // a permutation: no two bytes land on one place
    CHECK(lesson20::swizzle128(1 * 128 + 0 * 16) == 1 * 128 + 1 * 16);
    CHECK(lesson20::swizzle128(7 * 128 + 2 * 16 + 4) == 7 * 128 + 5 * 16 + 4);
}

TEST_CASE("A warp reading a column of 16-byte chunks needs 32 passes of a bank unswizzled and 4 swizzled",
          "[cpu][lesson20]") {
    for (unsigned int chunk = 0; chunk < 8; ++chunk) {
        INFO("chunk " << chunk);
        CHECK(lesson20::busiestBankWords(chunk, false) == 32);
        CHECK(lesson20::busiestBankWords(chunk, true) == 4);
    }
}

// ---------------------------------------------------------------------------
// GPU: the lesson's own checks, read from its output.

TEST_CASE("Lesson 20 encode_rules encodes a valid map and sees each wrong descriptor refused as invalid",
          "[gpu][lesson20]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "encode_rules");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    requireChecksHeld(r);
    CHECK(valueOf(r.out, "tensorMap").value_or("").rfind("128 bytes, aligned to 128", 0) == 0);
    CHECK(valueOf(r.out, "globalAddress mod 16").value_or("").rfind("0 bytes", 0) == 0);
    CHECK(valueOf(r.out, "cuTensorMapEncodeTiled") == "CUDA_SUCCESS");
    CHECK(valueOf(r.out, "globalAddress 4 bytes past the matrix's start") == "CUDA_ERROR_INVALID_VALUE");
    CHECK(valueOf(r.out, "globalStrides {4004} (1001 packed floats)") == "CUDA_ERROR_INVALID_VALUE");
    CHECK(valueOf(r.out, "globalStrides {4016} (the same rows padded to a multiple of 16)") == "CUDA_SUCCESS");
    CHECK(valueOf(r.out, "boxDim {64, 32} with CU_TENSOR_MAP_SWIZZLE_128B (256-byte box rows)") ==
          "CUDA_ERROR_INVALID_VALUE");
    // Observed with the 580 driver: the call takes any 16-byte aligned address, host memory too,
    // and wants a current context.
    CHECK(valueOf(r.out, "globalAddress of pageable host memory (mod 16: 0 bytes)") == "CUDA_SUCCESS");
    CHECK(valueOf(r.out, "the valid descriptor with no current context") == "CUDA_ERROR_INVALID_CONTEXT");
    // Each provoked error is reported by REPORT_DRIVER on stderr, naming the code.
    size_t invalidValue = 0;
    size_t invalidContext = 0;
    for (const auto& line : lines(r.err)) {
        invalidValue += contains(line, "error: CUDA_ERROR_INVALID_VALUE");
        invalidContext += contains(line, "error: CUDA_ERROR_INVALID_CONTEXT");
    }
    CHECK(invalidValue == 3);
    CHECK(invalidContext == 1);
    for (const char* name : {"the valid descriptor encodes",
                             "a global address off a 16-byte boundary is refused with CUDA_ERROR_INVALID_VALUE",
                             "a row stride that is not a multiple of 16 bytes is refused with CUDA_ERROR_INVALID_VALUE",
                             "the same matrix with rows padded to a multiple of 16 bytes encodes",
                             "a box row wider than the swizzle span is refused with CUDA_ERROR_INVALID_VALUE"}) {
        INFO(name);
        CHECK(checkOk(r.out, name));
    }
}

TEST_CASE("Lesson 20 tile_copy transforms every element, writes nothing outside the matrix and shows both fills",
          "[gpu][lesson20]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "tile_copy");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    requireChecksHeld(r);
    // The fatbin's code for this GPU: sm_90 on Hopper (or a newer SM's code, or PTX compiled for it).
    const std::string binary =
        valueOf(r.out, "transformTiles code for (CU_FUNC_ATTRIBUTE_BINARY_VERSION)").value_or("");
    REQUIRE(binary.rfind("sm_", 0) == 0);
    CHECK(std::stoi(binary.substr(3)) >= 90);
    CHECK(valueOf(r.out, "output elements equal to 2 v + 1") == "700000 of 700000");
    CHECK(valueOf(r.out, "elements outside the matrix (padding, guard rows) the store changed") == "0");
    CHECK(valueOf(r.out, "last box").value_or("").rfind("columns 992 to 1023, rows 672 to 703", 0) == 0);
    CHECK(valueOf(r.out, "edge box, elements inside the matrix as loaded") == "224 of 224 equal to the input");
    CHECK(valueOf(r.out, "edge box, out-of-bounds elements with FLOAT_OOB_FILL_NONE") == "800 of 800 are zero");
    CHECK(valueOf(r.out, "edge box, out-of-bounds elements with FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA")
              .value_or("")
              .rfind("800 of 800 are NaN", 0) == 0);
    for (const char* name : {"every output element is 2 v + 1", "the store wrote nothing outside the matrix",
                             "the edge box holds the matrix's elements where it overlaps the matrix",
                             "out-of-bounds elements are zero with CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",
                             "out-of-bounds elements are NaN with CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"}) {
        INFO(name);
        CHECK(checkOk(r.out, name));
    }
}

TEST_CASE("Lesson 20 swizzle_bench: both reads agree, the XOR formula holds, both copies are exact",
          "[gpu][lesson20]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "swizzle_bench");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    requireChecksHeld(r);
    CHECK(valueOf(r.out, "a warp reading a column of 16-byte chunks, busiest bank")
              .value_or("")
              .rfind("32 words unswizzled, 4 swizzled", 0) == 0);
    CHECK(valueOf(r.out, "swizzled tile elements where swizzle128 puts them") == "1024 of 1024");
    for (const char* name : {"the unswizzled column read returns the expected sums",
                             "the swizzled column read (XOR applied) returns the same sums",
                             "the copy engine placed the swizzled tile where the XOR formula says"}) {
        INFO(name);
        CHECK(checkOk(r.out, name));
    }
    // The copy section needs 512 MiB free; where it ran, both kernels' copies were checked.
    if (!contains(r.out, "section copy: SKIP")) {
        CHECK(checkOk(r.out, "the tensor-map tile copy equals the source"));
        CHECK(checkOk(r.out, "the coalesced float4 copy equals the source"));
    }
}

TEST_CASE("Lesson 20 swizzle_bench --bench: copy rates as shares of the DRAM peak, swizzled reads faster",
          "[gpu][lesson20]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench"};
    const RunResult r = runLesson(kLesson, options, "swizzle_bench");
    attachToReport(r);
    requireRan(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    // 4 passes of each bank against 32 (swizzle_math.h): the swizzled reads take less time.
    const double ratio = benchValue(r.out, "shared-memory column reads, 128B swizzle vs none");
    CHECK(ratio > 0.0);
    CHECK(ratio < 1.0);
    if (contains(r.out, "section copy: SKIP")) return;
    CHECK(benchValue(r.out, "DRAM peak (2 x memory clock x bus width / 8)") > 0.0);
    for (const char* way : {"tensor-map tile copy", "coalesced float4 copy", "cuMemcpyDtoD"}) {
        INFO(way);
        CHECK(benchValue(r.out, std::string(way) + " 256 MiB (read + write)") > 0.0);
        const double share = benchValue(r.out, std::string(way) + " share of DRAM peak");
        CHECK(share > 0.0);
        CHECK(share <= 100.0);  // the theoretical peak bounds every copy of a matrix far larger than L2
    }
}

// ---------------------------------------------------------------------------
// GPU: the same driver behaviour, checked directly through the driver.

#if CUDA_VERSION >= 12000
namespace {

// SKIPs below compute capability 9.0 and with a driver older than 12.0.
void requireTensorMaps() {
    if (driver().driverVersion() < 12000) SKIP("tensor maps need a CUDA 12.0 driver");
    auto attribute = DRIVER_FUNCTION(driver(), cuDeviceGetAttribute);
    REQUIRE(attribute);
    int major = 0;
    REQUIRE(attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0) == CUDA_SUCCESS);
    if (major < 9) SKIP("tensor maps need compute capability 9.0");
}

// cuTensorMapEncodeTiled on a float matrix with one argument changed from a valid map.
struct Encoding {
    CUdeviceptr address = 0;
    cuuint64_t dim[2] = {1000, 700};
    cuuint64_t strides[1] = {4000};
    cuuint32_t box[2] = {32, 32};
    cuuint32_t elementStrides[2] = {1, 1};
    CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B;

    // Through the driver's function, looked up by the caller (no Catch2 macro here: the
    // context test calls this on a thread of its own).
    CUresult encode(decltype(&::cuTensorMapEncodeTiled) encodeTiled) const {
        CUtensorMap map;
        return encodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, reinterpret_cast<void*>(address), dim, strides,
                           box, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    }
};

}  // namespace

TEST_CASE("cuTensorMapEncodeTiled refuses each broken rule of cuda.h with CUDA_ERROR_INVALID_VALUE",
          "[gpu][lesson20]") {
    requireGpu();
    requireTensorMaps();
    CurrentPrimaryContext context;
    auto memAlloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
    auto encodeTiled = DRIVER_FUNCTION(driver(), cuTensorMapEncodeTiled);
    REQUIRE((memAlloc && memFree && encodeTiled));
    Encoding valid;
    REQUIRE(memAlloc(&valid.address, 1000 * 700 * sizeof(float)) == CUDA_SUCCESS);
    Cleanup release([&] { return memFree(valid.address); });
    CHECK(valid.encode(encodeTiled) == CUDA_SUCCESS);
    Encoding e = valid;
    e.address += 8;  // 16-byte alignment
    CHECK(e.encode(encodeTiled) == CUDA_ERROR_INVALID_VALUE);
    e = valid;
    e.strides[0] = 4008;  // a multiple of 8, not of 16
    CHECK(e.encode(encodeTiled) == CUDA_ERROR_INVALID_VALUE);
    e = valid;
    e.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
    e.box[1] = 257;  // at most 256 elements per box dimension
    CHECK(e.encode(encodeTiled) == CUDA_ERROR_INVALID_VALUE);
    e.box[1] = 256;
    CHECK(e.encode(encodeTiled) == CUDA_SUCCESS);
    e = valid;
    e.box[0] = 2;  // 8 bytes: the box's dimension 0 must be a multiple of 16 bytes
    CHECK(e.encode(encodeTiled) == CUDA_ERROR_INVALID_VALUE);
    e = valid;
    e.box[0] = 64;  // 256 bytes: more than the 128-byte swizzle span ...
    CHECK(e.encode(encodeTiled) == CUDA_ERROR_INVALID_VALUE);
    e.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;  // ... which without swizzle is no limit
    CHECK(e.encode(encodeTiled) == CUDA_SUCCESS);
    e = valid;
    e.elementStrides[1] = 9;  // 1 to 8
    CHECK(e.encode(encodeTiled) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("cuTensorMapEncodeTiled wants a current context: a thread without one gets CUDA_ERROR_INVALID_CONTEXT",
          "[gpu][lesson20]") {
    requireGpu();
    requireTensorMaps();
    CurrentPrimaryContext context;
    auto memAlloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
    auto getCurrent = DRIVER_FUNCTION(driver(), cuCtxGetCurrent);
    auto encodeTiled = DRIVER_FUNCTION(driver(), cuTensorMapEncodeTiled);
    REQUIRE((memAlloc && memFree && getCurrent && encodeTiled));
    Encoding valid;
    REQUIRE(memAlloc(&valid.address, 1000 * 700 * sizeof(float)) == CUDA_SUCCESS);
    Cleanup release([&] { return memFree(valid.address); });
    CHECK(valid.encode(encodeTiled) == CUDA_SUCCESS);
    // A new thread has no current context. (cuda.h lists CUDA_ERROR_INVALID_CONTEXT among the
    // call's codes; the 580 driver returns it, though the call only writes the map's bytes.)
    CUcontext current = context.context();
    CUresult result = CUDA_SUCCESS;
    std::thread([&] {
        getCurrent(&current);
        result = valid.encode(encodeTiled);
    }).join();
    CHECK(current == nullptr);
    CHECK(result == CUDA_ERROR_INVALID_CONTEXT);
}
#endif
