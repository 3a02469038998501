// CPU tests of common/: pure functions that need no driver.
#include <catch2/catch_test_macros.hpp>

#include <cstring>

#include "common/check_driver.h"
#include "common/course_util.h"

TEST_CASE("CUDA version numbers decode as 1000 * major + 10 * minor", "[cpu][common]") {
    CHECK(course::decodeCudaVersion(13000).major == 13);
    CHECK(course::decodeCudaVersion(13000).minor == 0);
    CHECK(course::decodeCudaVersion(12050).major == 12);
    CHECK(course::decodeCudaVersion(12050).minor == 5);
    CHECK(course::decodeCudaVersion(11040).minor == 4);
    CHECK(course::formatCudaVersion(13000) == "13.0");
    CHECK(course::formatCudaVersion(12080) == "12.8");
    CHECK(course::formatCudaVersion(11040) == "11.4");
}

TEST_CASE("The check header names the codes a driverless machine produces without asking the driver", "[cpu][common]") {
    CHECK(std::strcmp(course::fallbackErrorName(CUDA_ERROR_STUB_LIBRARY), "CUDA_ERROR_STUB_LIBRARY") == 0);
    CHECK(static_cast<int>(CUDA_ERROR_STUB_LIBRARY) == 34);
    CHECK(std::strcmp(course::fallbackErrorName(CUDA_ERROR_NO_DEVICE), "CUDA_ERROR_NO_DEVICE") == 0);
    CHECK(std::strcmp(course::fallbackErrorName(CUDA_ERROR_NOT_INITIALIZED), "CUDA_ERROR_NOT_INITIALIZED") == 0);
    CHECK(course::fallbackErrorName(CUDA_ERROR_LAUNCH_FAILED) == nullptr);
}

TEST_CASE("The check header gives a hint for the errors a learner meets first", "[cpu][common]") {
    CHECK(course::driverErrorHint(CUDA_ERROR_STUB_LIBRARY) != nullptr);
    CHECK(course::driverErrorHint(CUDA_ERROR_INVALID_CONTEXT) != nullptr);
    CHECK(course::driverErrorHint(CUDA_ERROR_OUT_OF_MEMORY) != nullptr);
    CHECK(course::driverErrorHint(CUDA_ERROR_LAUNCH_FAILED) == nullptr);
}

TEST_CASE("A --device value outside int becomes an ordinal no device has instead of wrapping", "[cpu][common]") {
    course::Arguments args;
    CHECK(args.deviceOrdinal() == 0);
    args.values["--device"] = 2;
    CHECK(args.deviceOrdinal() == 2);
    args.values["--device"] = 4294967296LL;  // 2^32 would wrap to device 0 through a plain cast
    CHECK(args.deviceOrdinal() == -1);
    args.values["--device"] = -4294967296LL;
    CHECK(args.deviceOrdinal() == -1);
}
