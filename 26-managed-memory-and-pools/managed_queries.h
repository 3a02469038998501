// managed_queries.h — what lesson 26 asks the driver about a managed range and about the link to
// the host: where a range was last prefetched and what advice it carries (cuMemRangeGetAttribute,
// cuMemRangeGetAttributes), in the old form and in the _TYPE/_ID form, and which atomic operations
// the link does natively (cuDeviceGetHostAtomicCapabilities). Which headers have what:
// managed_compat.h.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <string>

#include "../common/check_driver.h"
#include "managed_compat.h"
#include "managed_helpers.h"

namespace lesson26 {

// One location attribute of a range in both forms. The old one is a 32-bit device ordinal,
// CU_DEVICE_CPU or CU_DEVICE_INVALID; the _TYPE/_ID one a CUmemLocationType and an id, which "should be
// ignored" unless the type is DEVICE or HOST_NUMA (cuda.h:14725-14727, 14737-14739).
struct Where {
    int legacy = 12345;  // no answer has this value: an answer left unwritten shows
    bool forms = false;  // whether the _TYPE/_ID form was read (the course asks 12.2 headers and driver)
    int type = -1;       // a CUmemLocationType
    int id = 12345;
};

inline void printWhere(const char* label, const Where& where) {
    std::printf("%s: %s\n", label, locationName(where.legacy).c_str());
#if CUDA_VERSION >= 12020
    if (where.forms) {
        const bool idMeans = where.type == CU_MEM_LOCATION_TYPE_DEVICE || where.type == CU_MEM_LOCATION_TYPE_HOST_NUMA;
        const std::string id = idMeans ? "id " + std::to_string(where.id) : "id ignored";
        std::printf("%s, type and id: %s, %s\n", label, locationTypeName(static_cast<CUmemLocationType>(where.type)),
                    id.c_str());
        return;
    }
#endif
    std::printf("%s, type and id: not read\n", label);
}

// The answers for a device, the host and "none": the old form, and the new one where it was read.
inline bool isDevice(const Where& where, int ordinal) {
    return where.legacy == ordinal &&
           (!where.forms || (where.type == CU_MEM_LOCATION_TYPE_DEVICE && where.id == ordinal));
}

inline bool isHost(const Where& where) {
#if CUDA_VERSION >= 12020
    if (where.forms && where.type != CU_MEM_LOCATION_TYPE_HOST) return false;
#endif
    return where.legacy == CU_DEVICE_CPU;
}

inline bool isNowhere(const Where& where) {
    return where.legacy == CU_DEVICE_INVALID && (!where.forms || where.type == CU_MEM_LOCATION_TYPE_INVALID);
}

// CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION (and _TYPE, _ID), one cuMemRangeGetAttribute each.
inline Where readLastPrefetch(CUdeviceptr pointer, size_t bytes, bool forms) {
    Where where;
    where.legacy = rangeInt(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, pointer, bytes);
#if CUDA_VERSION >= 12020
    if (forms) {
        where.forms = true;
        where.type = rangeLocationType(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, pointer, bytes);
        where.id = rangeInt(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID, pointer, bytes);
    }
#else
    (void)forms;
#endif
    return where;
}

// The advice a range carries, all in one cuMemRangeGetAttributes call.
struct Advice {
    int readMostly = 12345;
    Where preferred;
    int accessedBy[4] = {12345, 12345, 12345, 12345};  // device ordinals, then CU_DEVICE_INVALID
};

inline Advice readAdvice(CUdeviceptr pointer, size_t bytes, bool forms) {
    Advice advice;
    void* data[5] = {&advice.readMostly, &advice.preferred.legacy, advice.accessedBy, nullptr, &advice.preferred.id};
    size_t sizes[5] = {sizeof(int), sizeof(int), sizeof(advice.accessedBy), 0, sizeof(int)};
    CUmem_range_attribute attributes[5] = {
        CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
        CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY};
    size_t count = 3;
#if CUDA_VERSION >= 12020
    CUmemLocationType type = CU_MEM_LOCATION_TYPE_MAX;
    if (forms) {
        data[3] = &type;
        sizes[3] = sizeof(type);
        attributes[3] = CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE;
        attributes[4] = CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID;
        count = 5;
    }
#else
    (void)forms;
#endif
    CHECK_DRIVER(cuMemRangeGetAttributes(data, sizes, attributes, count, pointer, bytes));
#if CUDA_VERSION >= 12020
    if (forms) {
        advice.preferred.forms = true;
        advice.preferred.type = type;
    }
#endif
    return advice;
}

// "GPU 0, CU_DEVICE_INVALID, CU_DEVICE_INVALID, CU_DEVICE_INVALID"
inline std::string accessedByList(const Advice& advice) {
    std::string text;
    for (int entry : advice.accessedBy) text += (text.empty() ? "" : ", ") + locationName(entry);
    return text;
}

// The first entry is `first` (a device, or CU_DEVICE_INVALID for none) and every other entry is
// CU_DEVICE_INVALID: cuda.h fills "all the extra space provided" with it (cuda.h:14703-14704).
inline bool onlyAccessedBy(const Advice& advice, int first) {
    if (advice.accessedBy[0] != first) return false;
    for (int i = 1; i < 4; ++i)
        if (advice.accessedBy[i] != CU_DEVICE_INVALID) return false;
    return true;
}

// Step 6 of managed_memory: the link's native atomics (13.0 headers and driver, as the course asks).
// Each answer is "a bitmask indicating which of CUatomicOperationCapability the link supports
// natively" (cuda.h:5507-5508); printed, never judged: the values belong to the machine. Checked: that
// the driver wrote an answer for every operation asked (each entry is preset to a value no answer has),
// and how it answers CU_ATOMIC_OPERATION_MAX. That is an enumerator of CUatomicOperation, the one after
// the thirteen operations (INTEGER_ADD = 0 to FLOAT_MAX = 12), so 13, with no comment of its own
// (cuda.h:3197-3212); cuda.h documents INVALID_VALUE "if any of *operations is not valid"
// (cuda.h:5512-5513) and does not say whether CU_ATOMIC_OPERATION_MAX is valid. The refusal the check
// expects is the one observed on the H200 in the README's captured run.
inline void printHostAtomics([[maybe_unused]] course::Verdict& verdict, [[maybe_unused]] CUdevice device,
                             int driverVersion) {
    const char* const kAnswered = "cuDeviceGetHostAtomicCapabilities wrote an answer for each of the 13 operations";
    const char* const kRefused =
        "CU_ATOMIC_OPERATION_MAX, the enumerator after the 13 operations, is refused with CUDA_ERROR_INVALID_VALUE";
    const std::string reason = versionReason(kCuda13, driverVersion, "cuDeviceGetHostAtomicCapabilities");
    if (!reason.empty()) {
        std::printf("section host atomics: SKIP (%s)\n", reason.c_str());
        skipCheck(kAnswered, reason);
        skipCheck(kRefused, reason);
        return;
    }
#if CUDA_VERSION >= 13000
    const int all = course::deviceAttribute(device, CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED);
    const int some = course::deviceAttribute(device, CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED);
    std::printf(
        "CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: %d (%s: \"Link between the device and the host supports "
        "all native atomic operations\")\n",
        all, all ? "1 means" : "1 would mean");  // cuda.h:814
    std::printf(
        "CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED: %d (%s: \"Link between the device and the host "
        "supports only some native atomic operations\")\n",
        some, some ? "1 means" : "1 would mean");  // cuda.h:876
    static const char* const kOperations[] = {
        "INTEGER_ADD", "INTEGER_MIN", "INTEGER_MAX", "INTEGER_INCREMENT", "INTEGER_DECREMENT", "AND",      "OR",
        "XOR",         "EXCHANGE",    "CAS",         "FLOAT_ADD",         "FLOAT_MIN",         "FLOAT_MAX"};
    static const char* const kCapabilities[] = {"SIGNED",    "UNSIGNED",   "REDUCTION",  "SCALAR_32",
                                                "SCALAR_64", "SCALAR_128", "VECTOR_32x4"};
    constexpr unsigned int kCount = CU_ATOMIC_OPERATION_MAX;  // 13: the operations 0 to 12 cuda.h lists
    // Every bit set: cuda.h names seven capability bits (cuda.h:3218-3224), so no answer it describes has
    // all 32, and an entry the driver left unwritten reads as this, not as "none natively".
    constexpr unsigned int kUnwritten = 0xFFFFFFFFu;
    CUatomicOperation operations[kCount];
    unsigned int capabilities[kCount];
    for (unsigned int i = 0; i < kCount; ++i) {
        operations[i] = static_cast<CUatomicOperation>(i);
        capabilities[i] = kUnwritten;
    }
    CHECK_DRIVER(cuDeviceGetHostAtomicCapabilities(capabilities, operations, kCount, device));
    unsigned int answered = 0;
    for (unsigned int i = 0; i < kCount; ++i) {
        if (capabilities[i] == kUnwritten) {
            std::printf("host atomic %s: not written\n", kOperations[i]);
            continue;
        }
        ++answered;
        std::string bits;
        for (unsigned int b = 0; b < 7; ++b)
            if (capabilities[i] & (1u << b)) bits += (bits.empty() ? "" : " | ") + std::string(kCapabilities[b]);
        if (capabilities[i] >> 7) {  // bits this cuda.h does not name
            char rest[16];
            std::snprintf(rest, sizeof(rest), "0x%x", capabilities[i] >> 7 << 7);
            bits += (bits.empty() ? "" : " | ") + std::string(rest);
        }
        std::printf("host atomic %s: %s\n", kOperations[i], bits.empty() ? "none natively" : bits.c_str());
    }
    std::printf("operations answered: %u of %u\n", answered, kCount);
    verdict.check(kAnswered, answered == kCount);
    CUatomicOperation invalid = CU_ATOMIC_OPERATION_MAX;
    unsigned int ignored = 0;
    const CUresult refused = cuDeviceGetHostAtomicCapabilities(&ignored, &invalid, 1, device);
    std::printf("cuDeviceGetHostAtomicCapabilities for CU_ATOMIC_OPERATION_MAX: %s\n",
                course::driverErrorName(refused));
    verdict.check(kRefused, refused == CUDA_ERROR_INVALID_VALUE);
#endif
}

}  // namespace lesson26
