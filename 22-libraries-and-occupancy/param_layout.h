// param_layout.h — where each parameter of a kernel sits in its parameter buffer, computed on
// the host from the C++ types of the kernel's signature. Each parameter starts at the next
// multiple of its alignment and takes sizeof bytes, as the members of a struct do (lesson 06
// builds such a buffer by hand). The libraries program compares this with what the driver
// reads from the kernel's image (cuKernelGetParamInfo); a CPU test checks the arithmetic.
#pragma once

#include <cstddef>
#include <vector>

namespace lesson22 {

struct ParamSlot {
    size_t offset;
    size_t size;
    bool operator==(const ParamSlot&) const = default;
};

constexpr size_t alignUp(size_t value, size_t alignment) {
    return (value + alignment - 1) / alignment * alignment;
}

// The slots of a kernel taking (Params...), in order.
template <typename... Params>
std::vector<ParamSlot> layoutOf() {
    std::vector<ParamSlot> slots;
    size_t end = 0;
    ((slots.push_back({alignUp(end, alignof(Params)), sizeof(Params)}), end = slots.back().offset + sizeof(Params)),
     ...);
    return slots;
}

}  // namespace lesson22
