// check_driver.h — the course's one error-check header for the CUDA Driver API.
//
// Every driver call returns a CUresult. These macros evaluate the call exactly
// once and, on failure, print to stderr:
//   - the expression that failed (the macro's #call),
//   - the error's name and description (cuGetErrorName / cuGetErrorString),
//   - the numeric code, and file:line,
//   - a hint for the errors a learner meets first.
//
// cuGetErrorName and cuGetErrorString are driver calls too: NVIDIA's stub
// libcuda.so answers them with CUDA_ERROR_STUB_LIBRARY and leaves the string
// NULL, and an unknown code gives CUDA_ERROR_INVALID_VALUE. So their output is
// never printed unchecked; a small fallback table covers the codes that appear
// when the real driver is missing.
//
// Three forms (lesson 02 contrasts them):
//   CHECK_DRIVER(call)       fail fast: report, then end the program with exit code 1.
//   CHECK_DRIVER_BOOL(call)  the form common in tutorials: report and carry on; true on success.
//   REPORT_DRIVER(call)      report a failure and hand back the CUresult, for code that
//                            expects a particular error and acts on its code.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>

namespace course {

// Exit code of a lesson whose hardware is not present (make run shows SKIP).
constexpr int kExitNotApplicable = 77;

// Names for the codes a program meets when the driver itself cannot answer.
inline const char* fallbackErrorName(CUresult result) {
    switch (result) {
        case CUDA_SUCCESS: return "CUDA_SUCCESS";
        case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
        case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
        case CUDA_ERROR_STUB_LIBRARY: return "CUDA_ERROR_STUB_LIBRARY";
        case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
        case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
        case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
        default: return nullptr;
    }
}

// "CUDA_ERROR_INVALID_VALUE", or a fallback when the driver cannot name the code.
inline const char* driverErrorName(CUresult result) {
    const char* name = nullptr;
    if (cuGetErrorName(result, &name) == CUDA_SUCCESS && name != nullptr) return name;
    const char* fallback = fallbackErrorName(result);
    return fallback != nullptr ? fallback : "(unnamed CUresult)";
}

// The driver's one-line description, or a note saying it could not give one.
inline const char* driverErrorString(CUresult result) {
    const char* text = nullptr;
    if (cuGetErrorString(result, &text) == CUDA_SUCCESS && text != nullptr) return text;
    return "(no description: cuGetErrorString failed, so the driver is missing, a stub, or too old)";
}

// What to do next, for the errors a learner meets first; nullptr when there is no hint.
inline const char* driverErrorHint(CUresult result) {
    switch (result) {
        case CUDA_ERROR_STUB_LIBRARY:
            return "this process loaded NVIDIA's stub libcuda.so (lib64/stubs), which exists only for linking; "
                   "something made it the libcuda.so.1 that was loaded (a link or copy under that name on the "
                   "library path): remove that, and install the NVIDIA driver";
        case CUDA_ERROR_NO_DEVICE:
            return "the driver sees no CUDA device; check nvidia-smi and CUDA_VISIBLE_DEVICES";
        case CUDA_ERROR_NOT_INITIALIZED:
            return "call cuInit(0) before any other driver call";
        case CUDA_ERROR_INVALID_CONTEXT:
            return "no context is current on this thread: push or set one (lessons 03 and 04)";
        case CUDA_ERROR_INVALID_DEVICE:
            return "the device ordinal is not below cuDeviceGetCount()";
        case CUDA_ERROR_OUT_OF_MEMORY:
            return "the device has not that much free memory (see cuMemGetInfo)";
        case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
            return "the PTX was made by a toolkit newer than this driver; update the driver or ship SASS";
        case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
            return "the CUDA compat package does not match the kernel-mode driver";
        case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
            return "forward-compatibility packages are not supported on this device";
        default:
            return nullptr;
    }
}

// Prints the failure report to stderr. Returns the result unchanged so that a
// caller can both report a failure and act on its code.
inline CUresult reportDriverError(CUresult result, const char* expression, const char* file, int line) {
    if (result == CUDA_SUCCESS) return result;
    std::fflush(stdout);  // keep the report after what the program printed before it
    std::fprintf(stderr,
                 "CUDA driver call failed: %s\n"
                 "  error: %s (code %d): %s\n"
                 "  at:    %s:%d\n",
                 expression, driverErrorName(result), static_cast<int>(result), driverErrorString(result), file,
                 line);
    if (const char* hint = driverErrorHint(result)) std::fprintf(stderr, "  hint:  %s\n", hint);
    std::fflush(stderr);
    return result;
}

// The bool form's function. [[nodiscard]]: ignoring the answer is that form's usual bug (lesson 02).
[[nodiscard]] inline bool driverCallSucceeded(CUresult result, const char* expression, const char* file, int line) {
    return reportDriverError(result, expression, file, line) == CUDA_SUCCESS;
}

}  // namespace course

// Fail fast. The do/while(0) makes the macro one statement, safe after an unbraced if.
#define CHECK_DRIVER(call)                                                                          \
    do {                                                                                            \
        const CUresult checkDriverResult_ = (call);                                                 \
        if (checkDriverResult_ != CUDA_SUCCESS) {                                                   \
            ::course::reportDriverError(checkDriverResult_, #call, __FILE__, __LINE__);             \
            std::exit(EXIT_FAILURE);                                                                \
        }                                                                                           \
    } while (0)

// Report and carry on (the form common in tutorials). The caller must act on the bool.
#define CHECK_DRIVER_BOOL(call) ::course::driverCallSucceeded((call), #call, __FILE__, __LINE__)

// Report and hand back the code, for a failure the program expects and handles.
#define REPORT_DRIVER(call) ::course::reportDriverError((call), #call, __FILE__, __LINE__)
