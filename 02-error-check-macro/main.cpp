// Lesson 02 — the error check macro.
//
// Every Driver API call returns a CUresult, and a failure is silent unless the
// program looks. This lesson provokes real errors on purpose and shows what the
// course's check macros (common/check_driver.h) print for each, then contrasts
// the "print and carry on" check common in tutorials with the fail-fast form.
//
//   02-error-check-macro                  provoke four errors, check their codes and names
//   02-error-check-macro --fail-fast-demo end through CHECK_DRIVER on a bad ordinal (exit 1)
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <source_location>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace {

// One provoked error: did the call fail with exactly the code we expected?
void printProvoked(const char* what, CUresult got, CUresult expected) {
    std::printf("%s: got %s (code %d), expected %s\n", what, course::driverErrorName(got), static_cast<int>(got),
                course::driverErrorName(expected));
}

// What a function can do without a macro (C++20): std::source_location stamps the caller's
// file and line as a default argument. It still receives only the CUresult's value; the
// text of the call that produced it is gone before the function runs.
CUresult reportAt(CUresult result, std::source_location where = std::source_location::current()) {
    std::printf("function form: code %d at %s:%u, call text: (not available to a function)\n",
                static_cast<int>(result), where.file_name(), static_cast<unsigned>(where.line()));
    return result;
}

}  // namespace

int main(int argc, char** argv) {
    const bool failFastDemo = argc > 1 && std::strcmp(argv[1], "--fail-fast-demo") == 0;
    if (argc > 1 && !failFastDemo) {
        std::fprintf(stderr, "usage: %s [--fail-fast-demo]\n", argv[0]);
        return 2;
    }
    course::Verdict verdict;

    // Step 1: why a macro. A function can stamp where it was called from (std::source_location),
    // but only the preprocessor can turn the call itself into text (#call). The macro
    // evaluates the call once and keeps the CUresult. cuDriverGetVersion(NULL) is a safe error
    // to provoke: cuda.h says it returns CUDA_ERROR_INVALID_VALUE, and CUDA_ERROR_NOT_INITIALIZED
    // is not among the codes it lists, so the program calls it before cuInit.
    course::printStep(1, "what the macro captures");
    const CUresult viaFunction = reportAt(cuDriverGetVersion(nullptr));
    const CUresult viaMacro = REPORT_DRIVER(cuDriverGetVersion(nullptr));
    printProvoked("cuDriverGetVersion(nullptr)", viaMacro, CUDA_ERROR_INVALID_VALUE);
    verdict.check("a NULL version pointer gives CUDA_ERROR_INVALID_VALUE",
                  viaFunction == CUDA_ERROR_INVALID_VALUE && viaMacro == CUDA_ERROR_INVALID_VALUE);

    // Step 2: a driver call before cuInit. REPORT_DRIVER prints the report (on
    // stderr) and hands back the CUresult, so the lesson can compare the code.
    course::printStep(2, "a call before cuInit");
    int deviceCount = -1;
    const CUresult beforeInit = REPORT_DRIVER(cuDeviceGetCount(&deviceCount));
    printProvoked("cuDeviceGetCount before cuInit", beforeInit, CUDA_ERROR_NOT_INITIALIZED);
    verdict.check("a call before cuInit gives CUDA_ERROR_NOT_INITIALIZED", beforeInit == CUDA_ERROR_NOT_INITIALIZED);

    // Step 3: now initialise properly, then pass cuInit a flag that does not exist.
    course::printStep(3, "invalid cuInit flags");
    CHECK_DRIVER(cuInit(0));
    const CUresult badFlags = REPORT_DRIVER(cuInit(0xFFFFFFFFu));
    printProvoked("cuInit(0xFFFFFFFF)", badFlags, CUDA_ERROR_INVALID_VALUE);
    verdict.check("undefined cuInit flags give CUDA_ERROR_INVALID_VALUE", badFlags == CUDA_ERROR_INVALID_VALUE);

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

    // The tutorial form: it reports, returns false, and the program goes on. If the caller
    // ignores the bool, `device` is used as if valid, although cuda.h promises nothing about
    // what a failed call leaves in its out-parameter: it may be untouched, or not.
    CUdevice device = -1;
    const bool gotDevice = CHECK_DRIVER_BOOL(cuDeviceGet(&device, deviceCount));
    std::printf("CHECK_DRIVER_BOOL returned %s\n", gotDevice ? "true" : "false");
    std::printf("device handle after the failed call: %d (set to -1 before it; not promised either way)\n",
                static_cast<int>(device));
    verdict.check("the bool form returned false for the failed call", !gotDevice);
    const CUresult badOrdinal = REPORT_DRIVER(cuDeviceGet(&device, deviceCount));
    printProvoked("cuDeviceGet(&device, deviceCount)", badOrdinal, CUDA_ERROR_INVALID_DEVICE);
    verdict.check("an ordinal past the last device gives CUDA_ERROR_INVALID_DEVICE",
                  badOrdinal == CUDA_ERROR_INVALID_DEVICE);
    std::printf("fail-fast form: run with --fail-fast-demo to see CHECK_DRIVER end the program with exit 1\n");

    // Step 5: where the reports' words come from. cuGetErrorName gives "the name of the enum
    // error code", its spelling in cuda.h; cuGetErrorString "a NULL-terminated string
    // description" of it. For a code it does not recognise, each returns CUDA_ERROR_INVALID_VALUE
    // and sets *pStr "to the NULL address" (cuda.h). 1000 is no CUresult: cuda.h's largest is
    // CUDA_ERROR_UNKNOWN (999), and 1000 still fits the enum's range.
    course::printStep(5, "names and descriptions of codes");
    const char* name = nullptr;
    const CUresult nameResult = cuGetErrorName(CUDA_ERROR_INVALID_DEVICE, &name);
    const char* description = nullptr;
    const CUresult descriptionResult = cuGetErrorString(CUDA_ERROR_INVALID_DEVICE, &description);
    const bool named = nameResult == CUDA_SUCCESS && name != nullptr;
    const bool described = descriptionResult == CUDA_SUCCESS && description != nullptr;
    std::printf("cuGetErrorName(CUDA_ERROR_INVALID_DEVICE): %s\n", named ? name : "(no name)");
    std::printf("cuGetErrorString(CUDA_ERROR_INVALID_DEVICE): %s\n", described ? description : "(no description)");
    verdict.check("cuGetErrorName spells the enumerator", named && std::strcmp(name, "CUDA_ERROR_INVALID_DEVICE") == 0);
    verdict.check("cuGetErrorString gives a description, not the name",
                  named && described && std::strcmp(description, name) != 0);

    constexpr auto kNoSuchCode = static_cast<CUresult>(1000);
    const char* unknownName = "(set before the call)";  // the call must overwrite it with NULL
    const CUresult unknownNameResult = cuGetErrorName(kNoSuchCode, &unknownName);
    const char* unknownDescription = "(set before the call)";
    const CUresult unknownDescriptionResult = cuGetErrorString(kNoSuchCode, &unknownDescription);
    std::printf("cuGetErrorName(1000): %s, *pStr %s\n", course::driverErrorName(unknownNameResult),
                unknownName == nullptr ? "NULL" : "not NULL");
    std::printf("cuGetErrorString(1000): %s, *pStr %s\n", course::driverErrorName(unknownDescriptionResult),
                unknownDescription == nullptr ? "NULL" : "not NULL");
    verdict.check("cuGetErrorName refuses an unknown code with a NULL string",
                  unknownNameResult == CUDA_ERROR_INVALID_VALUE && unknownName == nullptr);
    verdict.check("cuGetErrorString refuses an unknown code with a NULL string",
                  unknownDescriptionResult == CUDA_ERROR_INVALID_VALUE && unknownDescription == nullptr);

    // Step 6: the verdict: every provoked error had exactly the expected code, and the
    // driver named and described the codes as cuda.h says.
    course::printStep(6, "check");
    return verdict.finish();
}
