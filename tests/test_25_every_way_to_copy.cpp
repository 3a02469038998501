#include <cuda.h>
#include <cudaTypedefs.h>
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "25-every-way-to-copy/batch_compat.h"
#include "25-every-way-to-copy/copy_helpers.h"
#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "25-every-way-to-copy";
const std::vector<std::string> kPrograms = {"batched_gather", "batched_3d", "copies_2d_3d_peer",
                                            "array_copies",   "mipmaps",    "deferred_and_sparse",
                                            "fills",          "pointers",   "copy_bench"};

}  // namespace

// ---------------------------------------------------------------------------
// CPU: no driver needed.

TEST_CASE("Lesson 25 lists its nine programs in the order make run-25 runs them", "[cpu][lesson25]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Every lesson 25 program rejects an unknown argument with a usage line and exit 2", "[cpu][lesson25]") {
    for (const auto& program : kPrograms) checkRefusesArguments(kLesson, {"--no-such-flag"}, program);
    checkRefusesArguments(kLesson, {"--peer", "one"}, "copies_2d_3d_peer");  // --peer takes a GPU number
    // Only copy_bench has a benchmark mode.
    CHECK(runAgainstStub(kLesson, {"--bench"}, "batched_gather").exitCode == 2);
    CHECK(runAgainstStub(kLesson, {"--bench"}, "fills").exitCode == 2);
}

TEST_CASE("Every lesson 25 program fails fast at cuInit against the stub driver, naming the call", "[cpu][lesson25]") {
    for (const auto& program : kPrograms) {
        INFO(program);
        const RunResult r = runAgainstStub(kLesson, {}, program);
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA driver call failed: cuInit(0)"));
        CHECK_FALSE(contains(r.out, "Result = PASS"));
    }
    CHECK(runAgainstStub(kLesson, {"--bench"}, "copy_bench").exitCode == 1);  // --bench parsed, then cuInit
}

TEST_CASE("With CUDA 13 headers cuMemcpyBatchAsync compiles to the _v2 entry point, without failIdx",
          "[cpu][lesson25]") {
#if CUDA_VERSION >= 13000 && !defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
    // cuda.h:122-123 map the plain names to the 13.0 ABI; batch_compat.h needs a 13.0 driver for it.
    CHECK(std::string(COURSE_STRINGIFY_EXPANDED(cuMemcpyBatchAsync)) == "cuMemcpyBatchAsync_v2");
    CHECK(std::string(COURSE_STRINGIFY_EXPANDED(cuMemcpy3DBatchAsync)) == "cuMemcpy3DBatchAsync_v2");
    CHECK(lesson25::batchUnavailableReason(13000).empty());
    CHECK(lesson25::batchUnavailableReason(12080) ==
          "the driver supports CUDA 12.8; this build's cuMemcpyBatchAsync needs 13.0");
#elif CUDA_VERSION >= 12080
    CHECK(lesson25::batchUnavailableReason(12080).empty());
#else
    CHECK(lesson25::batchUnavailableReason(13000) ==
          "built with CUDA " + course::formatCudaVersion(CUDA_VERSION) + " headers; cuMemcpyBatchAsync came with 12.8");
#endif
}

TEST_CASE("No lesson 25 program names a batch-copy entry point in its dynamic symbols", "[cpu][lesson25]") {
    // batch_compat.h resolves cuMemcpyBatchAsync and cuMemcpy3DBatchAsync with cuGetProcAddress, so
    // that a build with CUDA 13 headers (whose plain names are the _v2 symbols, cuda.h:122-123) still
    // loads on a 12.x driver, also with -Wl,-z,now, and reaches its SKIP.
    for (const auto& program : kPrograms) {
        INFO(program);
        RunOptions options;
        options.args = {"--dyn-syms", "-W", lessonBinary(kLesson, program)};
        const RunResult r = run("readelf", options);
        REQUIRE(r.exitCode == 0);
        CHECK(contains(r.out, "cuInit"));  // the table was read
        CHECK_FALSE(contains(r.out, "cuMemcpyBatchAsync"));
        CHECK_FALSE(contains(r.out, "cuMemcpy3DBatchAsync"));
    }
}

TEST_CASE("Lesson 25's byte pattern differs between neighbouring bytes and between seeds", "[cpu][lesson25]") {
    // The checks find a byte copied from the wrong place only if the pattern there differs.
    const std::vector<unsigned char> a = lesson25::pattern(65536, 1);
    const std::vector<unsigned char> b = lesson25::pattern(65536, 2);
    size_t sameAsNext = 0;
    for (size_t i = 0; i + 1 < a.size(); ++i) sameAsNext += a[i] == a[i + 1] ? 1 : 0;
    CHECK(sameAsNext < 65536 / 64);  // about 1 in 256 for an even spread
    CHECK(lesson25::differences(a.data(), b.data(), a.size()) > 65536 - 65536 / 64);
    CHECK(lesson25::notFill(a.data(), a.size()) > 65536 - 65536 / 64);
}

// ---------------------------------------------------------------------------
// GPU: the programs' output.

TEST_CASE("Lesson 25 batched_gather: 1536 scattered blocks in one call, byte for byte, the guard untouched",
          "[gpu][lesson25]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "batched_gather");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "pieces equal to their block, byte for byte") == "1536 of 1536");
    CHECK(valueOf(r.out, "guard bytes after the last piece still 0xa5") == "4096 of 4096");
    CHECK(valueOf(r.out, "header words on the device as they were during the call") == "64 of 64");
    CHECK(valueOf(r.out, "header words still the kernel's mark") == "0 of 64");  // the batch wrote after it
    CHECK(valueOf(r.out, "srcAccessOrder CU_MEMCPY_SRC_ACCESS_ORDER_INVALID") == "CUDA_ERROR_INVALID_VALUE");
    requireChecksHeldOrSkipped(r, {"the managed pieces the CPU wrote arrive intact, in reverse order",
                                   "nothing was copied past the managed pieces"});
}

TEST_CASE("Lesson 25 batched_3d: boxes, a host volume into an array and a box out, each batch one call",
          "[gpu][lesson25]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "batched_3d");
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "box bytes equal to their place in the volume") == "8192 of 8192");
    CHECK(valueOf(r.out, "array elements equal to the host volume") == "16384 of 16384");
    CHECK(valueOf(r.out, "array box elements in place") == "384 of 384");
    CHECK(valueOf(r.out, "elements between its rows and layers still fill") == "216 of 216");
    CHECK(valueOf(r.out, "operation with srcAccessOrder 0") == "CUDA_ERROR_INVALID_VALUE");
    requireChecksHeld(r);
}

TEST_CASE("Lesson 25 copies_2d_3d_peer: every strided copy lands, the padding and gaps keep the fill",
          "[gpu][lesson25]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "copies_2d_3d_peer");
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "rectangle bytes in place") == "6000 of 6000");
    CHECK(valueOf(r.out, "box bytes in place") == "2400 of 2400");
    CHECK(valueOf(r.out, "bytes of C equal to what A held") == "1048576 of 1048576");
    CHECK(valueOf(r.out, "tail guard bytes after C intact") == "4096 of 4096");
    CHECK(valueOf(r.out, "bytes of B as expected (64 KiB at B + 128, the rest as step 5 left it)") ==
          "1052672 of 1052672");  // its megabyte and its tail guard
    CHECK(valueOf(r.out, "bytes back on the host after three cuMemcpy calls") == "65536 of 65536");
    // cuMemcpy2D "may fail" for pitches of 1001 and 777: judged only where it accepted them.
    const std::string kPlain = "where cuMemcpy2D accepted the odd pitches, it copied the rectangle, nothing else";
    if (valueOf(r.out, "cuMemcpy2D with pitches 1001 and 777") == "CUDA_SUCCESS")
        CHECK(checkOk(r.out, kPlain));
    else
        CHECK(valueOf(r.out, "scratch bytes as expected (rectangle copied, the rest 0xa5)") == "not run");
    const std::vector<std::string> peerChecks = {"cuMemcpy3DPeer wrote the box on the other GPU and nothing else",
                                                 "cuMemcpy3DPeerAsync brought the box back",
                                                 "nothing was copied past the box brought back"};
    if (driver().deviceCount() >= 2) {
        CHECK(valueOf(r.out, "peer device") == "1");
        for (const auto& name : peerChecks) CHECK(checkOk(r.out, name));
    } else {
        CHECK(valueOf(r.out, "peer device") == "not run (this machine has 1 GPU)");
        for (const auto& name : peerChecks)
            CHECK(valueOf(r.out, "check " + name) == "SKIP (needs two GPUs; this machine has 1)");
    }
    requireChecksHeldOrSkipped(r, {peerChecks[0], peerChecks[1], peerChecks[2], kPlain});
}

TEST_CASE("Lesson 25 array_copies: byte offsets into 1-D arrays, and the two planes of NV12 where it exists",
          "[gpu][lesson25]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "array_copies");
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "bytes back through the array") == "1024 of 1024");
    CHECK(valueOf(r.out, "tail guard bytes after them intact") == "4096 of 4096");
    CHECK(valueOf(r.out, "array bytes as expected (as before, and 1024 at 8192)") == "16384 of 16384");
    // cuda.h:11993-11994: an array without a multi-planar format has no plane to return.
    CHECK(valueOf(r.out, "cuArrayGetPlane on the UNSIGNED_INT32 array") == "CUDA_ERROR_INVALID_VALUE");
    const std::vector<std::string> tried = valuesOf(r.out, "cuArrayCreate of a 64 x 32 NV12 array, NumChannels 1");
    REQUIRE(tried.size() == 1);
    if (contains(r.out, "section NV12 planes: SKIP (")) {
        // Every count cuda.h allows (1, 2 and 4) was tried and refused.
        CHECK(tried[0] != "CUDA_SUCCESS");
        CHECK(valueOf(r.out, "cuArrayCreate of a 64 x 32 NV12 array, NumChannels 4").has_value());
        CHECK_FALSE(contains(r.out, "plane 0:"));
        CHECK(checkLines(r.out).size() == 6);
    } else {
        CHECK(valueOf(r.out, "plane 0") == "64 x 32, 1 channel(s) of CU_AD_FORMAT_UNSIGNED_INT8");
        CHECK(valueOf(r.out, "plane 1") == "32 x 16, 2 channel(s) of CU_AD_FORMAT_UNSIGNED_INT8");
        CHECK(checkLines(r.out).size() == 8);
    }
    requireChecksHeld(r);
}

TEST_CASE("Lesson 25 mipmaps: a texture reads level 0 and level 1 exactly", "[gpu][lesson25]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "mipmaps");
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "level 0") == "64 x 32");  // level 0 is the array as created
    CHECK(valueOf(r.out, "level 0 fetches equal to its texels") == "2048 of 2048");
    CHECK(valueOf(r.out, "level 3 fetches equal to its texels") == "32 of 32");  // 8 x 4: each level halves
    CHECK(valueOf(r.out, "tail guard bytes after the fetched values intact") == "16384 of 16384");  // 4 x 4096
    if (contains(r.out, "texels of level 0, from its descriptor"))  // where deferred mapping is supported
        CHECK(valueOf(r.out, "texels of level 0, from its descriptor") ==
              "4194304 bytes (1024 x 1024 floats: 4194304)");
    requireChecksHeldOrSkipped(r, {"the requirement holds the texels of all four levels, sized from their descriptors",
                                   "a mipmapped array without deferred mapping has no requirements to give"});
}

TEST_CASE("Lesson 25 deferred_and_sparse: memory mapped into arrays holds what is copied in", "[gpu][lesson25]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "deferred_and_sparse");
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    requireChecksHeldOrSkipped(
        r, {"the requirement covers every texel", "an array without deferred mapping has no requirements to give",
            "the mapped deferred array holds what was copied into it",
            "the sparse array has a tile, mip tail from level 0, of size 0 unless SINGLE_MIPTAIL",
            "the mip tail starts at the first level smaller than a tile",
            "the mapped tile holds what was copied into it"});
}

TEST_CASE("Lesson 25 fills: six 2-D fills and one 1-D fill, every other byte of the pitch untouched",
          "[gpu][lesson25]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "fills");
    REQUIRE(r.exitCode == 0);
    CHECK(checkLines(r.out).size() == 7);
    requireChecksHeld(r);
    CHECK(valueOf(r.out, "buffer bytes as expected (0xbeef in bytes 2 to 2001, the rest 0xa5)") == "4096 of 4096");
}

TEST_CASE("Lesson 25 pointers: the attributes of four kinds of memory, an interior pointer, SYNC_MEMOPS",
          "[gpu][lesson25]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "pointers");
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "SYNC_MEMOPS after cuPointerSetAttribute") == "1");
    CHECK(valueOf(r.out, "BUFFER_ID of device memory + 4096") == "the same as the allocation's");
    requireChecksHeldOrSkipped(r, {"malloc'd memory: no context, by either answer cuda.h gives"});
}

TEST_CASE("Lesson 25 copy_bench: every way of copying writes the bytes the host expects; timings only with --bench",
          "[gpu][lesson25]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "copy_bench");
    REQUIRE(r.exitCode == 0);
    CHECK(valueOf(r.out, "timings") == "run with --bench");
    CHECK_FALSE(contains(r.out, "bench:"));
    CHECK(valueOf(r.out, "rows wrong after the copy (data, or padding no longer 0xa5)") ==
          "2-D 0 of 4096, 3-D 0 of 32768");
    CHECK(valueOf(r.out, "flat copy bytes as expected (16384000 from the pool, the rest 0xa5)") ==
          "16781312 of 16781312");
    CHECK_FALSE(contains(r.out, "every timed way wrote its own destination"));  // a --bench check only
    requireChecksHeldOrSkipped(r, {"cuMemcpyBatchAsync gathered every piece, nothing past them"});
}

TEST_CASE("Lesson 25 copy_bench --bench: a time for every way, printed, not judged", "[gpu][lesson25]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench"};
    const RunResult r = runLesson(kLesson, options, "copy_bench");
    attachToReport(r);
    REQUIRE(r.exitCode == 0);
    requireChecksHeldOrSkipped(r, {"cuMemcpyBatchAsync gathered every piece, nothing past them"});
    // After the timings every destination is judged again: the batch counts where it ran.
    const bool withBatch = lesson25::batchUnavailableReason(driver().driverVersion()).empty();
    CHECK(valueOf(r.out, "destinations as their way writes them, after the timed runs") ==
          (withBatch ? "6 of 6" : "5 of 5"));
    CHECK(checkOk(r.out, "every timed way wrote its own destination, as in step 2"));
    // Every ratio line is the quotient of the two times printed beside it, to the rounding of what
    // is printed and no more: each time is printed to 0.1 us, so it lies within 0.05 us of the time
    // measured, and each ratio to three significant digits, so the quotient of the measured times lies
    // within 0.5 % of the printed ratio. The two ranges must meet. A missing time, a ratio of two other
    // figures, or a ratio taken from a run other than the one printed (one that copied nothing, or
    // part of the pieces, or timed another way) misses by more than that.
    const auto quotientOf = [&](const char* ratio, const char* numerator, const char* denominator, double scale) {
        INFO(ratio);
        const double top = benchValue(r.out, numerator);
        const double bottom = benchValue(r.out, denominator);
        REQUIRE(top > 0.0);
        REQUIRE(bottom > 0.05);  // at least 0.1 us: a quotient with an upper bound
        const double printed = benchValue(r.out, ratio);
        REQUIRE(printed > 0.0);
        const double lowest = scale * (top - 0.05) / (bottom + 0.05);
        const double highest = scale * (top + 0.05) / (bottom - 0.05);
        INFO("printed " << printed << ", the printed times allow " << lowest << " to " << highest);
        CHECK(printed * (1.0 - 0.005) <= highest * (1.0 + 1e-9));
        CHECK(printed * (1.0 + 0.005) >= lowest * (1.0 - 1e-9));
    };
    quotientOf("gather speed, one cuMemcpyAsync per piece / contiguous copy", "contiguous cuMemcpyAsync of 16 MiB",
               "gather 4096 x 4 KiB, one cuMemcpyAsync per piece", 100.0);
    quotientOf("cuMemcpy2DAsync time / cuMemcpyDtoDAsync time", "cuMemcpy2DAsync 4000 x 4096 bytes",
               "cuMemcpyDtoDAsync of 16384000 bytes", 1.0);
    quotientOf("cuMemcpy3DAsync time / cuMemcpyDtoDAsync time", "cuMemcpy3DAsync 500 x 128 x 256 bytes",
               "cuMemcpyDtoDAsync of 16384000 bytes", 1.0);
    if (withBatch)
        quotientOf("gather speed, cuMemcpyBatchAsync / contiguous copy", "contiguous cuMemcpyAsync of 16 MiB",
                   "gather 4096 x 4 KiB, one cuMemcpyBatchAsync", 100.0);
    else
        CHECK(benchValue(r.out, "gather 4096 x 4 KiB, one cuMemcpyBatchAsync") == -1.0);
}

// ---------------------------------------------------------------------------
// GPU: the driver itself, without the lesson.

TEST_CASE("A CUDA 13 driver answers both cuMemcpyBatchAsync ABIs: 12.8's with failIdx, and _v2", "[gpu][lesson25]") {
    requireGpu();
#if CUDA_VERSION >= 13000
    if (driver().driverVersion() < 13000) SKIP("the driver is older than CUDA 13.0: it has no _v2");
    // cuda.h:25716-25726 declare the unversioned 12.8 form (with failIdx) beside the _v2 one;
    // cudaTypedefs.h:518-521 give their types. cuGetProcAddress hands out each at its version
    // (batch_compat.h asks at the version of its headers' ABI), and each copies with its arguments.
    auto getProc = driver().exported<PFN_cuGetProcAddress_v12000>("cuGetProcAddress_v2");
    REQUIRE(getProc != nullptr);
    void* at12080 = nullptr;
    void* at13000 = nullptr;
    CUdriverProcAddressQueryResult found12080 = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUdriverProcAddressQueryResult found13000 = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    REQUIRE(getProc("cuMemcpyBatchAsync", &at12080, 12080, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found12080) ==
            CUDA_SUCCESS);
    REQUIRE(getProc("cuMemcpyBatchAsync", &at13000, 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found13000) ==
            CUDA_SUCCESS);
    CHECK(found12080 == CU_GET_PROC_ADDRESS_SUCCESS);
    CHECK(found13000 == CU_GET_PROC_ADDRESS_SUCCESS);
    REQUIRE((at12080 != nullptr && at13000 != nullptr && at12080 != at13000));
    // Both are exported too (which export each pointer is, is the driver's business).
    CHECK(driver().exported<void*>("cuMemcpyBatchAsync") != nullptr);
    CHECK(driver().exported<void*>("cuMemcpyBatchAsync_v2") != nullptr);

    // Each one, called with its own arguments, copies 4096 bytes.
    CurrentPrimaryContext context;
    auto memAlloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
    auto memcpyHtoD = DRIVER_FUNCTION(driver(), cuMemcpyHtoD);
    auto memcpyDtoH = DRIVER_FUNCTION(driver(), cuMemcpyDtoH);
    auto memsetD8 = DRIVER_FUNCTION(driver(), cuMemsetD8);
    auto streamCreate = DRIVER_FUNCTION(driver(), cuStreamCreate);
    auto streamSynchronize = DRIVER_FUNCTION(driver(), cuStreamSynchronize);
    auto streamDestroy = DRIVER_FUNCTION(driver(), cuStreamDestroy);
    REQUIRE((memAlloc && memFree && memcpyHtoD && memcpyDtoH && memsetD8 && streamCreate && streamSynchronize &&
             streamDestroy));
    CUdeviceptr buffer = 0;
    REQUIRE(memAlloc(&buffer, 3 * 4096) == CUDA_SUCCESS);
    const Cleanup freeBuffer([&] { return memFree(buffer); });
    CUstream stream = nullptr;
    REQUIRE(streamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    const Cleanup destroyStream([&] { return streamDestroy(stream); });
    const std::vector<unsigned char> data = lesson25::pattern(4096, 30);
    REQUIRE(memcpyHtoD(buffer, data.data(), data.size()) == CUDA_SUCCESS);
    REQUIRE(memsetD8(buffer + 4096, lesson25::kFill, 2 * 4096) == CUDA_SUCCESS);
    REQUIRE(streamSynchronize(nullptr) == CUDA_SUCCESS);  // the NON_BLOCKING stream does not wait for these
    CUmemcpyAttributes attrs{};
    attrs.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    size_t firstCopy = 0;
    CUdeviceptr src = buffer;
    CUdeviceptr dst12080 = buffer + 4096;
    CUdeviceptr dst13000 = buffer + 2 * 4096;
    size_t size = 4096;
    size_t failIdx = 0;
    CHECK(reinterpret_cast<PFN_cuMemcpyBatchAsync_v12080>(at12080)(&dst12080, &src, &size, 1, &attrs, &firstCopy, 1,
                                                                   &failIdx, stream) == CUDA_SUCCESS);
    CHECK(reinterpret_cast<PFN_cuMemcpyBatchAsync_v13000>(at13000)(&dst13000, &src, &size, 1, &attrs, &firstCopy, 1,
                                                                   stream) == CUDA_SUCCESS);
    REQUIRE(streamSynchronize(stream) == CUDA_SUCCESS);
    std::vector<unsigned char> back(2 * 4096);
    REQUIRE(memcpyDtoH(back.data(), buffer + 4096, back.size()) == CUDA_SUCCESS);
    CHECK(lesson25::differences(back.data(), data.data(), 4096) == 0);         // the 12.8 ABI's copy
    CHECK(lesson25::differences(back.data() + 4096, data.data(), 4096) == 0);  // the _v2 copy
#else
    SKIP("the typedefs of both ABIs (cudaTypedefs.h) need CUDA 13 headers");
#endif
}

TEST_CASE("The driver refuses a batch copy whose srcAccessOrder is INVALID", "[gpu][lesson25]") {
    requireGpu();
#if CUDA_VERSION >= 13000
    if (driver().driverVersion() < 13000) SKIP("this build calls cuMemcpyBatchAsync_v2, which needs a 13.0 driver");
    CurrentPrimaryContext context;
    auto memAlloc = DRIVER_FUNCTION(driver(), cuMemAlloc);
    auto memFree = DRIVER_FUNCTION(driver(), cuMemFree);
    auto streamCreate = DRIVER_FUNCTION(driver(), cuStreamCreate);
    auto streamDestroy = DRIVER_FUNCTION(driver(), cuStreamDestroy);
    auto batch = DRIVER_FUNCTION(driver(), cuMemcpyBatchAsync);
    REQUIRE((memAlloc && memFree && streamCreate && streamDestroy && batch));
    CUdeviceptr buffer = 0;
    REQUIRE(memAlloc(&buffer, 8192) == CUDA_SUCCESS);
    const Cleanup freeBuffer([&] { return memFree(buffer); });
    CUstream stream = nullptr;
    REQUIRE(streamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    const Cleanup destroyStream([&] { return streamDestroy(stream); });
    CUdeviceptr dst = buffer + 4096;
    CUdeviceptr src = buffer;
    size_t size = 4096;
    CUmemcpyAttributes attrs{};  // srcAccessOrder 0: CU_MEMCPY_SRC_ACCESS_ORDER_INVALID
    size_t firstCopy = 0;
    CHECK(batch(&dst, &src, &size, 1, &attrs, &firstCopy, 1, stream) == CUDA_ERROR_INVALID_VALUE);
#else
    SKIP("cuMemcpyBatchAsync with CUDA 13.0's arguments needs CUDA 13 headers");
#endif
}
