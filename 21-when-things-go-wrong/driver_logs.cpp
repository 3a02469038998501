// Lesson 21, program 3 — the driver's own explanation of an error.
//
// A CUresult names a kind of failure: CUDA_ERROR_INVALID_VALUE says that an argument was wrong, not
// which one or why. Since CUDA 12.9 the driver also keeps a log of its own (cuda.h: at most 25600
// bytes: "The oldest logs may be overwritten"); which failures it writes a line for is its own
// choice: on NVIDIA H100 80GB HBM3 it wrote one for each failure this program provokes. A callback
// registered with cuLogsRegisterCallback receives each line as it is written, until
// cuLogsUnregisterCallback; cuLogsCurrent + cuLogsDumpToMemory copy out the lines written after a
// point, and not the ones before it, and cuLogsDumpToFile writes them into a file.
// (CUDA_LOG_FILE=stderr, or a file name, wrote them out with no code at all here.) The program
// provokes its errors and prints, for each, the bare CUresult beside the driver's line.
//
//   driver_logs               the steps, with their checks
//   driver_logs --device N    another GPU
#include <cuda.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "../common/check_driver.h"
#include "../common/course_util.h"
#include "lesson21.h"

namespace {

#if CUDA_VERSION >= 12090
// What the callback collected. cuda.h does not say on which thread the driver calls it: a mutex.
struct LogLines {
    std::mutex lock;
    std::vector<std::string> lines;
};

void CUDA_CB onDriverLog(void* data, CUlogLevel level, char* message, size_t length) {
    std::string text(message, strnlen(message, length));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
    LogLines* log = static_cast<LogLines*>(data);
    const std::lock_guard<std::mutex> hold(log->lock);
    log->lines.push_back((level == CU_LOG_LEVEL_ERROR ? "(error) " : "(warning) ") + text);
}

// A log line without the time and the thread id it starts with, "[12:34:56.789][4242]", which
// change from run to run. Only bracketed fields of digits, ':' and '.' are taken off.
std::string withoutTimeAndThread(std::string line) {
    for (int field = 0; field < 2 && !line.empty() && line[0] == '['; ++field) {
        const std::string::size_type close = line.find(']');
        if (close == std::string::npos || close == 1 ||
            line.substr(1, close - 1).find_first_not_of("0123456789:.") != std::string::npos)
            break;
        line.erase(0, close + 1);
    }
    return line;
}

// Prints the callback's lines from the `from`-th on; returns how many there are in all.
size_t printCallbackLines(LogLines& log, size_t from) {
    const std::lock_guard<std::mutex> hold(log.lock);
    for (size_t i = from; i < log.lines.size(); ++i)
        std::printf("driver log (callback): %s\n", withoutTimeAndThread(log.lines[i]).c_str());
    if (from == log.lines.size()) std::printf("driver log (callback): (no line)\n");
    return log.lines.size();
}

size_t lineCount(LogLines& log) {
    const std::lock_guard<std::mutex> hold(log.lock);
    return log.lines.size();
}

// The callback's `index`-th line, "" if there is none. Read under the mutex like every access:
// the driver may call the callback on another thread at any time.
std::string lineAt(LogLines& log, size_t index) {
    const std::lock_guard<std::mutex> hold(log.lock);
    return index < log.lines.size() ? log.lines[index] : std::string();
}

// Whether one of the callback's lines from the `from`-th on contains `text`.
bool anyLineNames(LogLines& log, size_t from, const std::string& text) {
    const std::lock_guard<std::mutex> hold(log.lock);
    for (size_t i = from; i < log.lines.size(); ++i)
        if (log.lines[i].find(text) != std::string::npos) return true;
    return false;
}

// The log's lines written since *iterator, which moves past them (cuLogsDumpToMemory).
std::string dumpSince(CUlogIterator* iterator) {
    std::vector<char> buffer(25600 + 1);  // the log's largest size, and the driver's terminating NUL
    size_t size = buffer.size();
    CHECK_DRIVER(cuLogsDumpToMemory(iterator, buffer.data(), &size, 0));
    return std::string(buffer.data(), size);
}

// The text of a file, "" if it cannot be read.
std::string fileText(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
#endif

}  // namespace

int main(int argc, char** argv) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, "[--device N]", args)) return course::kExitUsage;
    const int ordinal = args.deviceOrdinal();
    course::Verdict verdict;

    course::printStep(1, "initialise the driver, check the versions");
    CHECK_DRIVER(cuInit(0));
    CUdevice device = 0;
    const int driverVersion = lesson21::describeDevice(ordinal, &device);
    std::string why;
    if (!lesson21::sectionAvailable("driver logs", "cuLogs*", 12090, driverVersion, &why)) {
        std::printf("Result = SKIP (%s)\n", why.c_str());
        return course::kExitNotApplicable;
    }
#if CUDA_VERSION >= 12090
    CUcontext context = nullptr;
    CHECK_DRIVER(cuDevicePrimaryCtxRetain(&context, device));
    CHECK_DRIVER(cuCtxSetCurrent(context));
    CUmodule module = nullptr;
    CHECK_DRIVER(cuModuleLoad(&module, lesson21::faultsModulePath().c_str()));
    CUfunction fill = nullptr;
    CHECK_DRIVER(cuModuleGetFunction(&fill, module, "fillPattern"));
    CUdeviceptr words = 0;
    CHECK_DRIVER(cuMemAlloc(&words, 1024 * sizeof(unsigned int)));
    int maxThreads = 0;
    CHECK_DRIVER(cuDeviceGetAttribute(&maxThreads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device));

    // Step 2: both ways in: a callback, and an iterator at the log's end. Between them, a failed
    // lookup, so that the log holds a line from before the iterator, which no dump from it may show.
    course::printStep(2, "a log callback, and an iterator at the end of the driver's log");
    LogLines log;
    CUlogsCallbackHandle callback = nullptr;
    CHECK_DRIVER(cuLogsRegisterCallback(onDriverLog, &log, &callback));
    CUfunction early = nullptr;
    const CUresult earlyResult = cuModuleGetFunction(&early, module, "beforeTheIterator");
    std::printf("cuModuleGetFunction(\"beforeTheIterator\"), before the iterator: %s\n",
                course::driverErrorName(earlyResult));
    const size_t beforeIterator = printCallbackLines(log, 0);
    CUlogIterator iterator = 0;
    CHECK_DRIVER(cuLogsCurrent(&iterator, 0));
    std::printf("callback registered, iterator taken (cuLogsRegisterCallback, cuLogsCurrent)\n");

    course::printStep(3, "an invalid launch: the bare CUresult, and the driver's line");
    unsigned long long count = 1024;
    unsigned int seed = 0x21u;
    void* params[] = {&words, &count, &seed};
    const unsigned int tooMany = 2u * static_cast<unsigned int>(maxThreads);
    const CUresult refused = cuLaunchKernel(fill, 1, 1, 1, tooMany, 1, 1, 0, nullptr, params, nullptr);
    std::printf("cuLaunchKernel with %u threads per block, bare CUresult: %s (%s)\n", tooMany,
                course::driverErrorName(refused), course::driverErrorString(refused));
    const size_t afterLaunch = printCallbackLines(log, beforeIterator);
    // Not just any line: one that names the call that was refused.
    verdict.check("the callback received a line about the invalid launch",
                  refused != CUDA_SUCCESS && anyLineNames(log, beforeIterator, "cuLaunchKernel"));

    // Step 4: the same lines from the log buffer; the iterator moves past what it dumped.
    course::printStep(4, "the same line from the log buffer (cuLogsDumpToMemory)");
    const std::string dumped = dumpSince(&iterator);
    std::string::size_type at = 0;
    while (at < dumped.size()) {
        const std::string::size_type end = dumped.find('\n', at);
        std::printf("driver log (dump): %s\n", withoutTimeAndThread(dumped.substr(at, end - at)).c_str());
        at = end == std::string::npos ? dumped.size() : end + 1;
    }
    const std::string firstLine = lineAt(log, beforeIterator);
    const std::string firstText = withoutTimeAndThread(firstLine.substr(firstLine.find(' ') + 1));
    verdict.check("the dump since the iterator holds the callback's line",
                  !firstText.empty() && dumped.find(firstText) != std::string::npos);
    // Step 2's failed lookup was logged (the callback got a line naming it) before the iterator
    // was taken: the dump must leave it out. No other lookup fails before this dump.
    verdict.check("the dump leaves out the line logged before cuLogsCurrent",
                  earlyResult != CUDA_SUCCESS && anyLineNames(log, 0, "cuModuleGetFunction") &&
                      dumped.find("cuModuleGetFunction") == std::string::npos);
    const std::string again = dumpSince(&iterator);
    std::printf("second dump from the advanced iterator: %zu bytes\n", again.size());
    verdict.check("a second dump from the advanced iterator is empty", again.empty());

    // Step 5: observations only: what the driver logs is its own choice ("may", the docs say).
    course::printStep(5, "a kernel name the module does not have, and a healthy launch");
    CUfunction missing = nullptr;
    const CUresult notFound = cuModuleGetFunction(&missing, module, "fillPatern");
    std::printf("cuModuleGetFunction(\"fillPatern\"), bare CUresult: %s (%s)\n", course::driverErrorName(notFound),
                course::driverErrorString(notFound));
    const size_t afterLookup = printCallbackLines(log, afterLaunch);
    CHECK_DRIVER(cuLaunchKernel(fill, 4, 1, 1, lesson21::kThreads, 1, 1, 0, nullptr, params, nullptr));
    CHECK_DRIVER(cuCtxSynchronize());
    std::printf("callback lines after a healthy launch: %zu\n", lineCount(log) - afterLookup);

    // Step 6: after cuLogsUnregisterCallback a failed call still reaches the log (a dump from a
    // new iterator shows it) but no longer the callback. cuLogsDumpToFile writes the same lines
    // into a file.
    course::printStep(6, "unregister the callback, release everything");
    CHECK_DRIVER(cuLogsUnregisterCallback(callback));
    const size_t beforeLate = lineCount(log);
    // Two iterators at the same point: one for a dump to memory, one for a dump to a file.
    CUlogIterator late = 0;
    CHECK_DRIVER(cuLogsCurrent(&late, 0));
    CUlogIterator lateForFile = 0;
    CHECK_DRIVER(cuLogsCurrent(&lateForFile, 0));
    CUfunction afterUnregister = nullptr;
    const CUresult lateResult = cuModuleGetFunction(&afterUnregister, module, "afterTheCallback");
    const std::string lateDump = dumpSince(&late);
    const size_t lateLines = lineCount(log) - beforeLate;
    const bool lateLogged = lateDump.find("cuModuleGetFunction") != std::string::npos;
    std::printf("cuModuleGetFunction(\"afterTheCallback\") after cuLogsUnregisterCallback: %s\n",
                course::driverErrorName(lateResult));
    std::printf("its lines in the callback: %zu; in a dump: %s\n", lateLines, lateLogged ? "yes" : "no");
    verdict.check("after cuLogsUnregisterCallback a failed call is logged but reaches no callback",
                  lateResult != CUDA_SUCCESS && lateLogged && lateLines == 0);
    // The same lines, written by the driver into a file of this user's (mkstemp), then removed.
    const char* tmp = std::getenv("TMPDIR");
    std::string logFile = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/lesson21-log-XXXXXX";
    const int descriptor = mkstemp(logFile.data());
    if (descriptor < 0) std::perror("mkstemp for the log file");
    std::string written;
    if (descriptor >= 0) {
        close(descriptor);
        CHECK_DRIVER(cuLogsDumpToFile(&lateForFile, logFile.c_str(), 0));
        written = fileText(logFile);
        std::remove(logFile.c_str());
    }
    const std::string lateFirst = withoutTimeAndThread(lateDump.substr(0, lateDump.find('\n')));
    // ... and only the lines since its iterator: not step 3's refused launch, logged before it.
    const bool fileHoldsIt = !lateFirst.empty() && written.find(lateFirst) != std::string::npos &&
                             written.find("cuLaunchKernel") == std::string::npos;
    std::printf("the file cuLogsDumpToFile wrote from the second iterator holds that line: %s\n",
                fileHoldsIt ? "yes" : "no");
    verdict.check("cuLogsDumpToFile writes the line cuLogsDumpToMemory returned", fileHoldsIt);
    CHECK_DRIVER(cuMemFree(words));
    CHECK_DRIVER(cuModuleUnload(module));
    CHECK_DRIVER(cuDevicePrimaryCtxRelease(device));
    std::printf("callback, buffer, module and primary context: released\n");
#endif
    return verdict.finish();
}
