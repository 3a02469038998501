// Lesson 02 — the error check macro.
//
// Every Driver API call returns a CUresult, and a failure is silent unless the
// program looks. This lesson provokes real errors on purpose and shows what the
// course's check macros (common/check_driver.h) print for each, then contrasts
// the "print and carry on" check common in tutorials with the fail-fast form.
//
//   02-error-check-macro                  provoke three errors, check their codes
//   02-error-check-macro --fail-fast-demo end through CHECK_DRIVER on a bad ordinal (exit 1)
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace {

// One provoked error: did the call fail with exactly the code we expected?
bool expectError(const char* what, CUresult got, CUresult expected) {
    const bool ok = got == expected;
    std::printf("%s: got %s (code %d), expected %s -> %s\n", what, course::driverErrorName(got),
                static_cast<int>(got), course::driverErrorName(expected), ok ? "as expected" : "UNEXPECTED");
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    const bool failFastDemo = argc > 1 && std::strcmp(argv[1], "--fail-fast-demo") == 0;
    if (argc > 1 && !failFastDemo) {
        std::fprintf(stderr, "usage: %s [--fail-fast-demo]\n", argv[0]);
        return 2;
    }

    // Step 1: why a macro. Only the preprocessor can turn the call into text (#call)
    // and stamp the place it was written (__FILE__, __LINE__); a function would report
    // its own line. The macro evaluates the call once and keeps the CUresult.
    course::printStep(1, "what the macro captures");
    std::printf("#call  -> \"%s\"\n", "cuInit(0)");
    std::printf("__FILE__:__LINE__ -> %s:%d\n", __FILE__, __LINE__);

    // Step 2: a driver call before cuInit. REPORT_DRIVER prints the report (on
    // stderr) and hands back the CUresult, so the lesson can compare the code.
    course::printStep(2, "a call before cuInit");
    int deviceCount = -1;
    const CUresult beforeInit = REPORT_DRIVER(cuDeviceGetCount(&deviceCount));
    bool pass = expectError("cuDeviceGetCount before cuInit", beforeInit, CUDA_ERROR_NOT_INITIALIZED);

    // Step 3: now initialise properly, then pass cuInit a flag that does not exist.
    course::printStep(3, "invalid cuInit flags");
    CHECK_DRIVER(cuInit(0));
    const CUresult badFlags = REPORT_DRIVER(cuInit(0xFFFFFFFFu));
    pass = expectError("cuInit(0xFFFFFFFF)", badFlags, CUDA_ERROR_INVALID_VALUE) && pass;

    // Step 4: an ordinal one past the last device.
    course::printStep(4, "an invalid device ordinal");
    CHECK_DRIVER(cuDeviceGetCount(&deviceCount));
    std::printf("device count: %d\n", deviceCount);

    if (failFastDemo) {
        // The fail-fast form: the report, then exit(1). Nothing after this line runs.
        CUdevice device = 0;
        CHECK_DRIVER(cuDeviceGet(&device, deviceCount));
        std::printf("unreachable: CHECK_DRIVER returned after a failure\n");
        return EXIT_SUCCESS;
    }

    // The tutorial form: it reports, returns false, and the program goes on. If the
    // caller ignores the bool, `device` keeps whatever it held and is used as if valid.
    CUdevice device = -1;
    const bool gotDevice = CHECK_DRIVER_BOOL(cuDeviceGet(&device, deviceCount));
    std::printf("CHECK_DRIVER_BOOL returned %s; device handle is still %d\n", gotDevice ? "true" : "false",
                static_cast<int>(device));
    const CUresult badOrdinal = REPORT_DRIVER(cuDeviceGet(&device, deviceCount));
    pass = expectError("cuDeviceGet(&device, deviceCount)", badOrdinal, CUDA_ERROR_INVALID_DEVICE) && pass;
    pass = !gotDevice && pass;
    std::printf("fail-fast form: run with --fail-fast-demo to see CHECK_DRIVER end the program with exit 1\n");

    // Step 5: the lesson's own check: every provoked error had the expected code.
    course::printStep(5, "check");
    std::printf("Result = %s\n", pass ? "PASS" : "FAIL");
    return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}
