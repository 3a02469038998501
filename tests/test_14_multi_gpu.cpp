#include <cuda.h>
#include <catch2/catch_test_macros.hpp>

#include <string>
#include <utility>
#include <vector>

#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "14-multi-gpu";
// The programs' names (defaultRun's result is taken by value below: a reference to it
// next to temporary strings is what GCC 13's -Wdangling-reference warns about).
const std::string kPeerAccess = "peer_access";
const std::string kPeerCopy = "peer_copy";
const std::string kPeerQueries = "peer_queries";
const std::vector<std::string> kPrograms = {kPeerAccess, kPeerCopy, kPeerQueries};
// The two that need two GPUs; peer_queries runs on one.
const std::vector<std::string> kTwoGpuPrograms = {kPeerAccess, kPeerCopy};
const std::string kOneGpuResult = "Result = SKIP (needs two GPUs with peer access; this machine has 1)";

// The driver functions the direct tests use, looked up once per test.
struct PeerFunctions {
    decltype(&::cuDeviceGet) deviceGet = DRIVER_FUNCTION(driver(), cuDeviceGet);
    decltype(&::cuDeviceCanAccessPeer) canAccessPeer = DRIVER_FUNCTION(driver(), cuDeviceCanAccessPeer);
    decltype(&::cuDeviceGetP2PAttribute) p2pAttribute = DRIVER_FUNCTION(driver(), cuDeviceGetP2PAttribute);
    decltype(&::cuDevicePrimaryCtxRetain) retain = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxRetain);
    decltype(&::cuDevicePrimaryCtxRelease) release = DRIVER_FUNCTION(driver(), cuDevicePrimaryCtxRelease);
    decltype(&::cuCtxSetCurrent) setCurrent = DRIVER_FUNCTION(driver(), cuCtxSetCurrent);
    decltype(&::cuCtxEnablePeerAccess) enablePeer = DRIVER_FUNCTION(driver(), cuCtxEnablePeerAccess);
    decltype(&::cuCtxDisablePeerAccess) disablePeer = DRIVER_FUNCTION(driver(), cuCtxDisablePeerAccess);

    bool complete() const {
        return deviceGet && canAccessPeer && p2pAttribute && retain && release && setCurrent && enablePeer &&
               disablePeer;
    }
};

// The primary context of one device, retained for one test and released at its end.
class RetainedPrimaryContext {
public:
    RetainedPrimaryContext(const PeerFunctions& f, CUdevice device) : f_(f), device_(device) {
        REQUIRE(f_.retain(&context_, device_) == CUDA_SUCCESS);
    }
    ~RetainedPrimaryContext() {
        f_.setCurrent(nullptr);
        f_.release(device_);
    }
    RetainedPrimaryContext(const RetainedPrimaryContext&) = delete;
    RetainedPrimaryContext& operator=(const RetainedPrimaryContext&) = delete;
    CUcontext get() const { return context_; }

private:
    const PeerFunctions& f_;
    CUdevice device_;
    CUcontext context_ = nullptr;
};

// Peer access from the current context to `peer`, enabled for one test and disabled at its
// end, also when a failed REQUIRE ends the test early: a test must not leave it on for the
// tests after it. disable() turns it off now (and reports the result); the destructor then
// does nothing.
class EnabledPeerAccess {
public:
    EnabledPeerAccess(const PeerFunctions& f, CUcontext current, CUcontext peer)
        : f_(f), current_(current), peer_(peer) {
        REQUIRE(f_.setCurrent(current_) == CUDA_SUCCESS);
        REQUIRE(f_.enablePeer(peer_, 0) == CUDA_SUCCESS);
        enabled_ = true;
    }
    ~EnabledPeerAccess() {
        if (!enabled_) return;
        f_.setCurrent(current_);
        f_.disablePeer(peer_);
    }
    EnabledPeerAccess(const EnabledPeerAccess&) = delete;
    EnabledPeerAccess& operator=(const EnabledPeerAccess&) = delete;
    CUresult disable() {
        enabled_ = false;
        const CUresult current = f_.setCurrent(current_);
        return current != CUDA_SUCCESS ? current : f_.disablePeer(peer_);
    }

private:
    const PeerFunctions& f_;
    CUcontext current_;
    CUcontext peer_;
    bool enabled_ = false;
};

// GPUs 0 and 1, or a SKIP that says why this machine cannot run the two-GPU path.
std::pair<CUdevice, CUdevice> requireTwoPeerGpus(const PeerFunctions& f) {
    requireGpu();
    REQUIRE(f.complete());
    if (driver().deviceCount() < 2)
        SKIP("needs two GPUs with peer access; this machine has " << driver().deviceCount());
    CUdevice first = 0;
    CUdevice second = 0;
    REQUIRE(f.deviceGet(&first, 0) == CUDA_SUCCESS);
    REQUIRE(f.deviceGet(&second, 1) == CUDA_SUCCESS);
    int firstToSecond = 0;
    int secondToFirst = 0;
    REQUIRE(f.canAccessPeer(&firstToSecond, first, second) == CUDA_SUCCESS);
    REQUIRE(f.canAccessPeer(&secondToFirst, second, first) == CUDA_SUCCESS);
    if (!firstToSecond || !secondToFirst)
        SKIP("needs two GPUs with peer access; cuDeviceCanAccessPeer GPU 0 -> GPU 1 = "
             << firstToSecond << ", GPU 1 -> GPU 0 = " << secondToFirst);
    return {first, second};
}


}  // namespace

// ---------------------------------------------------------------------------
// CPU: no driver needed.

TEST_CASE("Lesson 14 runs its three programs in order", "[cpu][lesson14]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Lesson 14 rejects unknown, incomplete or same-GPU arguments with a usage message and exit 2",
          "[cpu][lesson14]") {
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {"peer_access", {"--bench"}},  // only peer_copy has a benchmark
        {"peer_access", {"--peer"}},  {"peer_access", {"--peer", "one"}}, {"peer_access", {"--devices", "0", "1"}},
        {"peer_copy", {"--device"}},  {"peer_copy", {"--size", "4096"}},
    };
    for (const auto& [program, args] : cases) checkRefusesArguments(kLesson, args, program);
    for (const auto& program : kPrograms) {
        INFO(program);
        for (const std::vector<std::string>& args :
             {std::vector<std::string>{"--device", "1", "--peer", "1"}, std::vector<std::string>{"--peer", "0"}}) {
            const RunResult r = runAgainstStub(kLesson, args, program);
            CHECK(r.exitCode == 2);
            CHECK(contains(r.err, "--device and --peer must name two different GPUs"));
            CHECK_FALSE(contains(r.err, "CUDA_ERROR_STUB_LIBRARY"));
        }
    }
}

TEST_CASE("Lesson 14 accepts --device 1 alone (the peer is then GPU 0) and --bench for peer_copy",
          "[cpu][lesson14]") {
    // Past the argument check, the stub stops them at cuInit: exit 1, not a usage error.
    CHECK(runAgainstStub(kLesson, {"--device", "1"}, "peer_access").exitCode == 1);
    CHECK(runAgainstStub(kLesson, {"--device", "1", "--peer", "0"}, "peer_copy").exitCode == 1);
    CHECK(runAgainstStub(kLesson, {"--bench"}, "peer_copy").exitCode == 1);
}

// ---------------------------------------------------------------------------
// GPU, any number of GPUs.

TEST_CASE("With one GPU visible, each program of lesson 14 says what it would do and exits 77 with the reason",
          "[gpu][lesson14]") {
    requireGpu();
    // CUDA_VISIBLE_DEVICES=0 shows the programs a one-GPU machine on any machine.
    RunOptions options;
    options.setEnv.emplace("CUDA_VISIBLE_DEVICES", "0");
    for (const auto& program : kTwoGpuPrograms) {
        INFO(program);
        const RunResult r = runLesson(kLesson, options, program);
        attachToReport(r);
        CHECK(r.exitCode == 77);
        CHECK(valueOf(r.out, "device count") == "1");
        CHECK(contains(r.out, "on a machine with two GPUs that can access each other, this program would:\n  - "));
        CHECK(valueOf(r.out, "section peer access") == "SKIP (one GPU cannot be its own peer)");
        CHECK(contains(r.out, kOneGpuResult + "\n"));
        CHECK(r.err.empty());
    }
}

TEST_CASE("With one GPU visible, lesson 14's peer_queries proves the refusals one GPU can show and passes",
          "[gpu][lesson14]") {
    requireGpu();
    RunOptions options;
    options.setEnv.emplace("CUDA_VISIBLE_DEVICES", "0");
    const RunResult r = runLesson(kLesson, options, kPeerQueries);
    attachToReport(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "device count") == "1");
    CHECK(valueOf(r.out, "cuDeviceGetP2PAttribute(GPU 0 -> GPU 0)") == "CUDA_ERROR_INVALID_DEVICE");
    CHECK(valueOf(r.out, "cuCtxDisablePeerAccess, never enabled, two contexts of GPU 0") ==
          "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED");
    CHECK(valueOf(r.out, "section two GPUs") == "SKIP (this machine has 1)");
    for (const char* check : {"a device is no link to itself",
                              "disabling a direction never enabled gives CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
                              "enabling follows what cuDeviceCanAccessPeer says"}) {
        INFO(check);
        CHECK(valueOf(r.out, std::string("check ") + check) == "ok");
    }
#if CUDA_VERSION >= 13000
    CHECK(valueOf(r.out, "check a device has no atomics link to itself") == "ok");
#endif
}

TEST_CASE("A device is not its own peer: cuDeviceGetP2PAttribute says CUDA_ERROR_INVALID_DEVICE",
          "[gpu][lesson14]") {
    requireGpu();
    const PeerFunctions f;
    REQUIRE(f.complete());
    CUdevice device = 0;
    REQUIRE(f.deviceGet(&device, 0) == CUDA_SUCCESS);
    int value = -1;
    CHECK(f.p2pAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, device, device) ==
          CUDA_ERROR_INVALID_DEVICE);
}

TEST_CASE("A context cannot enable peer access to itself", "[gpu][lesson14]") {
    requireGpu();
    const PeerFunctions f;
    REQUIRE(f.complete());
    CUdevice device = 0;
    REQUIRE(f.deviceGet(&device, 0) == CUDA_SUCCESS);
    RetainedPrimaryContext context(f, device);
    REQUIRE(f.setCurrent(context.get()) == CUDA_SUCCESS);
    // The documentation names CUDA_ERROR_INVALID_CONTEXT for "the current context is
    // peerContext"; driver 580 answers CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (a device is not
    // its own peer). Either way it is refused, and nothing needs disabling afterwards.
    const CUresult result = f.enablePeer(context.get(), 0);
    INFO("cuCtxEnablePeerAccess(own context) = " << driver().nameOf(result));
    CHECK((result == CUDA_ERROR_INVALID_CONTEXT || result == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED));
}

// ---------------------------------------------------------------------------
// GPU, two GPUs with peer access (GPUs 0 and 1): skipped, with the reason, elsewhere.

TEST_CASE("Lesson 14 peer_queries finds each link's attributes agreeing with cuDeviceCanAccessPeer, both ways",
          "[gpu][lesson14][two-gpus]") {
    const PeerFunctions f;
    requireTwoPeerGpus(f);
    const RunResult r = defaultRun(kLesson, kPeerQueries);
    attachToReport(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valuesOf(r.out, "check ACCESS_SUPPORTED is cuDeviceCanAccessPeer's answer").size() == 2);
#if CUDA_VERSION >= 13000
    CHECK(valuesOf(r.out, "check cuDeviceGetP2PAtomicCapabilities answers for the link").size() == 2);
#endif
    CHECK_FALSE(contains(r.out, ": FAIL"));
}

TEST_CASE("Lesson 14 peer_access enables one direction and a kernel on GPU 0 reads GPU 1's buffer",
          "[gpu][lesson14][two-gpus]") {
    const PeerFunctions f;
    requireTwoPeerGpus(f);
    const RunResult r = defaultRun(kLesson, kPeerAccess);
    attachToReport(r);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    CHECK(valueOf(r.out, "cuDeviceCanAccessPeer(GPU 0 -> GPU 1)") == "1");
    CHECK(valueOf(r.out, "cuDeviceCanAccessPeer(GPU 1 -> GPU 0)") == "1");
    CHECK(valueOf(r.out, "link GPU 0 -> GPU 1, access supported") == "1");
    CHECK(valueOf(r.out, "link GPU 1 -> GPU 0, access supported") == "1");
    for (const char* label :
         {"link GPU 0 -> GPU 1, performance rank", "link GPU 0 -> GPU 1, native atomics supported",
          "link GPU 0 -> GPU 1, CUDA array access supported", "GPU 0 compute capability", "GPU 1 compute capability"}) {
        INFO(label);
        CHECK(valueOf(r.out, label).has_value());
    }
#if CUDA_VERSION >= 13000
    // Printed next to NATIVE_ATOMIC_SUPPORTED, so that a 0 there is not read as "no atomics".
    CHECK(valueOf(r.out, "link GPU 0 -> GPU 1, only partial native atomics supported").has_value());
#endif
    CHECK(valueOf(r.out, "cuCtxEnablePeerAccess again, same two contexts") == "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED");
    CHECK(valueOf(r.out, "cuCtxDisablePeerAccess in GPU 1's context for GPU 0's (never enabled)") ==
          "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED");
    CHECK(contains(r.err, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED (code 704)"));
    CHECK(contains(r.err, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED (code 705)"));
    CHECK(valueOf(r.out, "kernel on GPU 0 read GPU 1's buffer") == "1048576 of 1048576 words = 2 * in + 1");
    for (const char* check :
         {"driver records the direction as already enabled", "driver records the reverse direction as not enabled",
          "buffer belongs to the peer GPU", "kernel on the first GPU computed from the peer's buffer"}) {
        INFO(check);
        CHECK(valueOf(r.out, std::string("check ") + check) == "ok");
    }
}

TEST_CASE("Lesson 14 peer_access --device 1 --peer 0 runs the same story the other way round",
          "[gpu][lesson14][two-gpus]") {
    const PeerFunctions f;
    requireTwoPeerGpus(f);
    RunOptions options;
    options.args = {"--device", "1", "--peer", "0"};
    const RunResult r = runLesson(kLesson, options, "peer_access");
    attachToReport(r);
    CHECK(r.exitCode == 0);
    CHECK(valueOf(r.out, "cuDeviceCanAccessPeer(GPU 1 -> GPU 0)") == "1");
    CHECK(valueOf(r.out, "cuDeviceCanAccessPeer(GPU 0 -> GPU 1)") == "1");
    CHECK(valueOf(r.out, "kernel on GPU 1 read GPU 0's buffer") == "1048576 of 1048576 words = 2 * in + 1");
    CHECK(valueOf(r.out, "check buffer belongs to the peer GPU") == "ok");
    CHECK(contains(r.out, "Result = PASS"));
}

TEST_CASE("Lesson 14 peer_copy copies GPU 0 -> GPU 1 and back exactly, with and without peer access",
          "[gpu][lesson14][two-gpus]") {
    const PeerFunctions f;
    requireTwoPeerGpus(f);
    const RunResult r = defaultRun(kLesson, kPeerCopy);
    attachToReport(r);
    CHECK(r.exitCode == 0);
    CHECK(valueOf(r.out, "cuMemcpyPeer GPU 0 -> GPU 1") == "4194304 of 4194304 words match");
    CHECK(valueOf(r.out, "cuMemcpyPeerAsync GPU 1 -> GPU 0") == "4194304 of 4194304 words match");
    CHECK(valueOf(r.out, "benchmark") == "not run (add --bench)");
    CHECK(valueOf(r.out, "check copy without peer access is exact") == "ok");
    CHECK(valueOf(r.out, "check copy back with peer access is exact") == "ok");
    CHECK(r.err.empty());
    CHECK(contains(r.out, "Result = PASS"));
}

TEST_CASE("Lesson 14 peer_copy --bench: peer copies beat copies staged through pinned host memory, both ways",
          "[gpu][lesson14][two-gpus]") {
    const PeerFunctions f;
    requireTwoPeerGpus(f);
    RunOptions options;
    options.args = {"--bench"};
    const RunResult r = runLesson(kLesson, options, "peer_copy");
    attachToReport(r);
    CHECK(r.exitCode == 0);
    for (const char* direction : {"GPU 0 -> GPU 1", "GPU 1 -> GPU 0"}) {
        INFO(direction);
        const double peer = benchValue(r.out, std::string("peer copy ") + direction);
        const double staged = benchValue(r.out, std::string("staged copy via pinned host ") + direction);
        CHECK(staged > 0.0);
        // The direction the README states, on means of 10 copies of 256 MiB: the peer copy
        // is faster than the staged one. Margin: 1.5 x (two H200 over NVLink showed 14 x), so
        // noise cannot flip it; a machine whose peer path goes over slow PCIe may fail it,
        // and that is worth knowing.
        CHECK(peer >= 1.5 * staged);
        CHECK(benchValue(r.out, std::string("peer / staged ") + direction) >= 1.5);
    }
    CHECK(contains(r.out, "Result = PASS"));
}

TEST_CASE("The driver records peer access per direction: enabling 0 -> 1 leaves 1 -> 0 not enabled",
          "[gpu][lesson14][two-gpus]") {
    // What the driver's bookkeeping says (the error codes of cuCtxEnablePeerAccess and
    // cuCtxDisablePeerAccess), not what a kernel of GPU 1 would do: none runs here.
    const PeerFunctions f;
    const auto [first, second] = requireTwoPeerGpus(f);
    RetainedPrimaryContext contextFirst(f, first);
    RetainedPrimaryContext contextSecond(f, second);
    EnabledPeerAccess firstToSecond(f, contextFirst.get(), contextSecond.get());
    CHECK(f.enablePeer(contextSecond.get(), 0) == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    REQUIRE(f.setCurrent(contextSecond.get()) == CUDA_SUCCESS);
    CHECK(f.disablePeer(contextFirst.get()) == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    CHECK(firstToSecond.disable() == CUDA_SUCCESS);
    CHECK(f.disablePeer(contextSecond.get()) == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
}

TEST_CASE("cuDeviceGetP2PAttribute's ACCESS_SUPPORTED agrees with cuDeviceCanAccessPeer both ways",
          "[gpu][lesson14][two-gpus]") {
    const PeerFunctions f;
    const auto [first, second] = requireTwoPeerGpus(f);
    for (const auto& [source, destination] : {std::pair{first, second}, std::pair{second, first}}) {
        int canAccess = -1;
        int supported = -1;
        REQUIRE(f.canAccessPeer(&canAccess, source, destination) == CUDA_SUCCESS);
        REQUIRE(f.p2pAttribute(&supported, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, source, destination) ==
                CUDA_SUCCESS);
        CHECK(canAccess == supported);
    }
}
