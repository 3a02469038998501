// context_flags.h — names for the bits of a context's flags word, as cuCtxGetFlags
// and cuDevicePrimaryCtxGetState return it (lessons 03 and 04 print them).
//
// The three low bits (CU_CTX_SCHED_MASK) are one value, the scheduling policy: how
// a CPU thread waits for the GPU. Every other bit stands alone.
//
// Two bits are deprecated but still reported by drivers that set them:
//   CU_CTX_MAP_HOST (0x8): cuda.h, "deprecated as of CUDA 11.0 and it no longer has any
//     effect. All contexts as of CUDA 3.2 behave as though the flag is enabled." A flags word
//     of 0xc is CU_CTX_SCHED_BLOCKING_SYNC (0x4) with this inert bit beside it.
//   CU_CTX_LMEM_RESIZE_TO_MAX (0x10): cuda.h, "the behavior enabled by this flag is now the
//     default and cannot be disabled".
// They are named with "(deprecated, no effect)" so that nobody reads them as live settings.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <string>

namespace course {

// The scheduling policy in the flags' low three bits.
inline const char* schedulingPolicyName(unsigned int flags) {
    switch (flags & CU_CTX_SCHED_MASK) {
        case CU_CTX_SCHED_AUTO: return "CU_CTX_SCHED_AUTO";
        case CU_CTX_SCHED_SPIN: return "CU_CTX_SCHED_SPIN";
        case CU_CTX_SCHED_YIELD: return "CU_CTX_SCHED_YIELD";
        case CU_CTX_SCHED_BLOCKING_SYNC: return "CU_CTX_SCHED_BLOCKING_SYNC";
        default: return "(invalid scheduling bits)";
    }
}

// "CU_CTX_SCHED_BLOCKING_SYNC | CU_CTX_SYNC_MEMOPS": the policy, then each other
// bit that is set, by name where this cuda.h has one and in hex otherwise.
inline std::string describeContextFlags(unsigned int flags) {
    struct NamedBit {
        unsigned int bit;
        const char* name;
    };
    static constexpr NamedBit kNamedBits[] = {
        {CU_CTX_MAP_HOST, "CU_CTX_MAP_HOST (deprecated, no effect)"},
        {CU_CTX_LMEM_RESIZE_TO_MAX, "CU_CTX_LMEM_RESIZE_TO_MAX (deprecated, now always on)"},
#if CUDA_VERSION >= 12010
        {CU_CTX_COREDUMP_ENABLE, "CU_CTX_COREDUMP_ENABLE"},
        {CU_CTX_USER_COREDUMP_ENABLE, "CU_CTX_USER_COREDUMP_ENABLE"},
#endif
#if CUDA_VERSION >= 12040
        {CU_CTX_SYNC_MEMOPS, "CU_CTX_SYNC_MEMOPS"},
#endif
    };
    std::string text = schedulingPolicyName(flags);
    unsigned int rest = flags & ~static_cast<unsigned int>(CU_CTX_SCHED_MASK);
    for (const NamedBit& named : kNamedBits) {
        if ((rest & named.bit) == 0) continue;
        text += std::string(" | ") + named.name;
        rest &= ~named.bit;
    }
    if (rest != 0) {
        char unnamed[32];
        std::snprintf(unnamed, sizeof(unnamed), " | 0x%x", rest);
        text += unnamed;
    }
    return text;
}

}  // namespace course
