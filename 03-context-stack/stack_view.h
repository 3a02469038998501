// stack_view.h — what lesson 03's programs print about a thread's context stack.
//
// The driver only ever shows the top of a stack (cuCtxGetCurrent). A StackView keeps a
// copy of what the program pushed, gives each context a name, prints the copy after
// every change, and checks (through the program's course::Verdict) that its top is what
// the driver says is current. The cu* calls that change the stack stay in the programs;
// the view only records them.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"

namespace lesson03 {

constexpr size_t kMiB = 1024 * 1024;
// Slack for comparisons of free memory. That figure is device-wide (below), so what other
// contexts and processes do moves it too.
constexpr long long kTolerance = 32 * kMiB;

inline double mebibytes(long long bytes) {
    return static_cast<double>(bytes) / static_cast<double>(kMiB);
}

// "free memory <moment>: N MiB", the line every free-memory comparison starts from.
inline void printFree(const char* moment, size_t freeBytes) {
    std::printf("free memory %s: %.1f MiB\n", moment, mebibytes(static_cast<long long>(freeBytes)));
}

// cuMemGetInfo's `free`: "the amount of memory on the device that is free according to
// the OS" (cuda.h), so every context and every process counts, and it can change at any
// moment. (Its `total` is "the total amount of memory available to the current context".)
// It is asked through the current context: cuMemGetInfo needs one.
inline size_t freeDeviceMemory() {
    size_t freeBytes = 0;
    size_t totalBytes = 0;
    CHECK_DRIVER(cuMemGetInfo(&freeBytes, &totalBytes));
    return freeBytes;
}

class StackView {
public:
    explicit StackView(course::Verdict& verdict) : verdict_(verdict) {}

    void name(CUcontext context, const std::string& name) { names_[context] = name; }

    std::string nameOf(CUcontext context) const {
        if (context == nullptr) return "none";
        const auto it = names_.find(context);
        return it != names_.end() ? it->second : "unknown";
    }

    // Prints the current context (asked of the driver) and the copy, top first, by name
    // and by handle, then checks that the driver's current context is the copy's top.
    bool show() const {
        CUcontext current = nullptr;
        CHECK_DRIVER(cuCtxGetCurrent(&current));
        std::string byName;
        std::string byHandle;
        for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) {
            char handle[32];
            std::snprintf(handle, sizeof(handle), " %p", static_cast<void*>(*it));
            byName += " " + nameOf(*it);
            byHandle += handle;
        }
        std::printf("current context: %s\n", nameOf(current).c_str());
        std::printf("stack (top first):%s\n", stack_.empty() ? " (empty)" : byName.c_str());
        std::printf("stack handles (top first):%s\n", stack_.empty() ? " (empty)" : byHandle.c_str());
        const CUcontext top = stack_.empty() ? nullptr : stack_.back();
        if (current != top)
            std::printf("MISMATCH: the driver's current context is %s, the top of the copy is %s\n",
                        nameOf(current).c_str(), nameOf(top).c_str());
        return verdict_.check("current context is the top of the copy", current == top);
    }

    // After cuCtxCreate or cuCtxPushCurrent: `context` is on top now.
    bool pushed(CUcontext context, const std::string& what) {
        stack_.push_back(context);
        std::printf("%s\n", what.c_str());
        return show();
    }

    // After cuCtxPopCurrent: the driver handed back `popped`, which must be the copy's top.
    bool popped(CUcontext popped) {
        const bool wasTop = !stack_.empty() && stack_.back() == popped;
        if (!stack_.empty()) stack_.pop_back();
        std::printf("cuCtxPopCurrent: popped %s\n", nameOf(popped).c_str());
        verdict_.check("cuCtxPopCurrent returned the top of the copy", wasTop);
        return show() && wasTop;
    }

    // After cuCtxDestroy of the context on top: cuda.h says it is then "popped from the
    // current thread's context stack (as though cuCtxPopCurrent() were called)". show()
    // compares that with what the driver says.
    bool destroyedTop(const std::string& what) {
        if (!stack_.empty()) stack_.pop_back();
        std::printf("%s\n", what.c_str());
        return show();
    }

private:
    course::Verdict& verdict_;
    std::vector<CUcontext> stack_;  // back() is the top
    std::map<CUcontext, std::string> names_;
};

}  // namespace lesson03
