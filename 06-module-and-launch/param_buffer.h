// param_buffer.h — kernel arguments packed into one buffer, for cuLaunchKernel's `extra`
// (CU_LAUNCH_PARAM_BUFFER_POINTER / CU_LAUNCH_PARAM_BUFFER_SIZE).
//
// The driver copies the buffer byte for byte into the kernel's parameter space, so each
// argument must sit exactly where the kernel looks for it: at the next offset that is a
// multiple of the argument's own alignment, as the members of a C struct are laid out.
// The alignment comes from alignof(T), never typed by hand at each call. NVIDIA's Programming
// Guide (section 3.3.3) packs its sample buffer with ALIGN_UP() and ADD_TO_PARAM_BUFFER(value,
// alignment) and types some alignments (`ADD_TO_PARAM_BUFFER(f4, 16)`): right for float4, but
// a typed number that is not the device's alignment (a struct's, guessed) puts the argument
// where the kernel does not look. cuFuncGetParamInfo's offsets, read from the kernel's image,
// are the truth: param_buffer.cpp checks every offset placed here against them.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

namespace lesson06 {

// The smallest multiple of `alignment` (a power of two) that is not below `offset`.
constexpr std::size_t alignUp(std::size_t offset, std::size_t alignment) {
    return (offset + alignment - 1) & ~(alignment - 1);
}

// A growing parameter buffer. add() places one argument and returns its offset.
// The host type must have the device type's size and alignment: true for float, int,
// CUdeviceptr (for a T* parameter) and CUDA's vector types, which are declared
// __align__(N); a home-made struct { float x, y, z, w; } is only 4-byte aligned.
class ParamBuffer {
public:
    template <class T>
    std::size_t add(const T& value) {
        static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are copied byte for byte");
        const std::size_t offset = alignUp(bytes_.size(), alignof(T));
        bytes_.resize(offset + sizeof(T));  // padding bytes are value-initialised to zero
        std::memcpy(bytes_.data() + offset, &value, sizeof(T));
        return offset;
    }

    void* data() { return bytes_.data(); }
    const void* data() const { return bytes_.data(); }
    // What CU_LAUNCH_PARAM_BUFFER_SIZE points at: the end of the last argument.
    std::size_t size() const { return bytes_.size(); }

private:
    std::vector<unsigned char> bytes_;
};

}  // namespace lesson06
