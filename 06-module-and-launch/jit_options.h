// jit_options.h — the options jit_and_link passes to the driver's JIT (cuModuleLoadDataEx,
// cuLinkCreate), with the buffers its logs are written to and readers for what it writes back,
// and which refusal codes it accepts for PTX with an unresolved call.
// Host code only: the driver call that takes them is in jit_and_link.cpp.
#pragma once

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace lesson06 {

// The JIT options this program passes. Each option has a slot in `values`: IN values are set
// here, OUT values are written there by the driver (a log size as unsigned int, the wall time
// as float, in the slot's first bytes). The driver keeps the pointers: for cuModuleLoadDataEx
// until it returns, for cuLinkCreate as long as the CUlinkState lives.
struct JitOptions {
    static constexpr unsigned int kLogBytes = 16384;
    JitOptions() = default;
    JitOptions(const JitOptions&) = delete;  // `values` points into this object's own buffers
    JitOptions& operator=(const JitOptions&) = delete;

    std::vector<char> infoLog = std::vector<char>(kLogBytes, '\0');
    std::vector<char> errorLog = std::vector<char>(kLogBytes, '\0');
    std::array<CUjit_option, 7> names = {
        CU_JIT_INFO_LOG_BUFFER,              // char*: informational messages (ptxas info ...)
        CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,   // IN: buffer size; OUT: bytes written
        CU_JIT_ERROR_LOG_BUFFER,             // char*: errors, with the PTX line they are on
        CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,  // IN: buffer size; OUT: bytes written
        CU_JIT_LOG_VERBOSE,                  // int 1: registers, spills, stack per function
        CU_JIT_WALL_TIME,                    // OUT: float milliseconds spent compiling and linking
        CU_JIT_TARGET_FROM_CUCONTEXT,        // no value: compile for the current context's GPU
    };
    std::array<void*, 7> values = {
        infoLog.data(),
        reinterpret_cast<void*>(std::uintptr_t{kLogBytes}),
        errorLog.data(),
        reinterpret_cast<void*>(std::uintptr_t{kLogBytes}),
        reinterpret_cast<void*>(std::uintptr_t{1}),
        nullptr,
        nullptr,
    };

    unsigned int count() const { return static_cast<unsigned int>(names.size()); }
    template <class T>
    T outValue(std::size_t index) const {
        T value{};
        std::memcpy(&value, &values[index], sizeof(T));
        return value;
    }
    unsigned int infoBytes() const { return outValue<unsigned int>(1); }
    unsigned int errorBytes() const { return outValue<unsigned int>(3); }
    float wallMilliseconds() const { return outValue<float>(5); }
};

// cuda.h documents no code for PTX that calls a function it does not define: cuModuleLoadData
// and cuModuleLoadDataEx list twelve return codes, none tied to an unresolved call. These three
// say the image could not become code: "a PTX JIT compilation failed", "no kernel image
// available that is suitable for the device", "a link to a shared object failed to resolve".
// The others speak of the caller's state or the machine (no context, out of memory, ...).
constexpr bool refusedForTheImage(CUresult result) {
    return result == CUDA_ERROR_INVALID_PTX || result == CUDA_ERROR_NO_BINARY_FOR_GPU ||
           result == CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
}

}  // namespace lesson06
