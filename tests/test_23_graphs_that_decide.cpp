#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "23-graphs-that-decide/lesson23.h"
#include "23-graphs-that-decide/relax_loop.h"
#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kLesson = "23-graphs-that-decide";
const std::vector<std::string> kPrograms = {"conditionals", "general_nodes", "introspect", "capture_more",
                                            "device_launch", "typed_nodes", "graph_or_exec"};

// Every check line of a run said ok, and the run passed.
void requirePassed(const RunResult& r) {
    attachToReport(r);
    requireRan(r);
    REQUIRE(r.exitCode == 0);
    CHECK(contains(r.out, "Result = PASS"));
    requireChecksHeld(r);
}

}  // namespace

// ---------------------------------------------------------------------------
// CPU: no driver needed.

TEST_CASE("Lesson 23 lists its seven programs in the order make run-23 runs them", "[cpu][lesson23]") {
    CHECK(lessonPrograms(kLesson) == kPrograms);
}

TEST_CASE("Every lesson 23 program rejects an unknown argument with a usage line and exit 2", "[cpu][lesson23]") {
    for (const auto& program : kPrograms) checkRefusesArguments(kLesson, {"--no-such-flag"}, program);
    // Only conditionals has a benchmark mode, and only capture_more writes a DOT file to keep.
    for (const char* program :
         {"general_nodes", "introspect", "capture_more", "device_launch", "typed_nodes", "graph_or_exec"}) {
        INFO(program);
        CHECK(runAgainstStub(kLesson, {"--bench"}, program).exitCode == 2);
    }
    for (const char* program :
         {"conditionals", "general_nodes", "introspect", "device_launch", "typed_nodes", "graph_or_exec"}) {
        INFO(program);
        CHECK(runAgainstStub(kLesson, {"--keep-dot"}, program).exitCode == 2);
    }
}

TEST_CASE("Every lesson 23 program fails fast at cuInit against the stub driver, naming the call",
          "[cpu][lesson23]") {
    for (const auto& program : kPrograms) {
        INFO(program);
        const RunResult r = runAgainstStub(kLesson, {}, program);
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "CUDA driver call failed: cuInit(0)"));
        CHECK(contains(r.err, "CUDA_ERROR_STUB_LIBRARY"));
        CHECK_FALSE(contains(r.out, "Result = PASS"));
    }
    // The flags are parsed first, then cuInit fails.
    CHECK(runAgainstStub(kLesson, {"--bench"}, "conditionals").exitCode == 1);
    CHECK(runAgainstStub(kLesson, {"--keep-dot"}, "capture_more").exitCode == 1);
}

TEST_CASE("Lesson 23's version gate asks for 12.4 headers and a 12.4 driver, each on its own", "[cpu][lesson23]") {
    // A GPU with a new driver never shows the driver half of the gate: it is tried here.
    CHECK(lesson23::versionGap(13000, 13000).empty());
    CHECK(lesson23::versionGap(12040, 12040).empty());
    CHECK(lesson23::versionGap(12030, 13000) == "built with CUDA 12.3 headers; the lesson needs 12.4");
    CHECK(lesson23::versionGap(13000, 12030) == "the driver supports CUDA 12.3; the lesson needs 12.4");
    CHECK(lesson23::versionGap(12040, 12020) == "the driver supports CUDA 12.2; the lesson needs 12.4");
}

TEST_CASE("Lesson 23's DOT file folder goes under TMPDIR only where TMPDIR is an absolute path, else /tmp",
          "[cpu][lesson23]") {
    CHECK(lesson23::tempParent("/var/tmp") == "/var/tmp");
    CHECK(lesson23::tempParent("/") == "/");
    // Unset, empty or relative: never under the working directory.
    CHECK(lesson23::tempParent(nullptr) == "/tmp");
    CHECK(lesson23::tempParent("") == "/tmp");
    CHECK(lesson23::tempParent("scratch") == "/tmp");
    CHECK(lesson23::tempParent("./scratch") == "/tmp");
    CHECK(lesson23::tempParent("../scratch") == "/tmp");
}

// ---------------------------------------------------------------------------
// GPU: the programs' output.

TEST_CASE("Lesson 23 conditionals: the IF body runs only when the GPU found a negative value", "[gpu][lesson23]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "conditionals");
    requirePassed(r);
    CHECK(valueOf(r.out, "IF graph nodes") ==
          "2 (decide_any_negative, the IF node; clamp_negatives is in the IF's body)");
    CHECK(valueOf(r.out, "with negatives") ==
          "IF body runs so far: 1, data as the host computes: yes (negatives clamped)");
    CHECK(valueOf(r.out, "without negatives") == "IF body runs so far: 1");
    CHECK(valueOf(r.out, "cudaGraphSetConditional calls in decide_any_negative") ==
          "1 (one thread, in the launch with negatives)");
    CHECK(checkOk(r.out, "IF body ran when the GPU found a negative value"));
    CHECK(checkOk(r.out, "IF body was skipped when the GPU found none"));
    CHECK(checkOk(r.out, "one thread set the IF's value, in the launch that found a negative value"));
}

TEST_CASE("Lesson 23 conditionals: the WHILE loop and the host-driven loop both need the host's 100 sweeps",
          "[gpu][lesson23]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "conditionals");
    requirePassed(r);
    CHECK(valueOf(r.out, "host's count of sweeps needed") == "100 (65536 elements, at most 4 closer per sweep)");
    CHECK(valueOf(r.out, "WHILE loop sweeps") == "100");
    CHECK(valueOf(r.out, "elements at their target") == "65536 of 65536");
    // The same exec again, on the sweep count and handle value the first launch left behind.
    CHECK(valueOf(r.out, "second launch of the WHILE exec") == "100 sweeps, 65536 of 65536 elements at their target");
    CHECK(valueOf(r.out, "host-driven loop sweeps") == "100");
    // The bounded graph stops at its bound of 10, with the elements that need at most 10 sweeps at
    // their target: the host's count from the same data.
    const std::string within = std::to_string(lesson23::arrivedWithin(lesson23::makeLoopData(100), 10));
    CHECK(valueOf(r.out, "WHILE graph bounded at 10 sweeps") ==
          "10 sweeps, " + within + " of 65536 elements at their target (the host expects " + within + ")");
    CHECK(checkOk(r.out, "a WHILE loop bounded at 10 sweeps stopped after 10"));
    CHECK(checkOk(r.out, "WHILE ran as many sweeps as the host counted"));
    CHECK(checkOk(r.out, "WHILE left every element at its target"));
    CHECK(checkOk(r.out, "a second launch ran the loop again from the start"));
    CHECK(checkOk(r.out, "host-driven loop needed the same number of sweeps"));
    CHECK(valueOf(r.out, "timings") == "run with --bench");
    CHECK_FALSE(contains(r.out, "bench:"));
}

TEST_CASE("Lesson 23 conditionals --bench: both ways timed for 100 and 1000 sweeps, every run checked",
          "[gpu][lesson23]") {
    requireGpu();
    RunOptions options;
    options.args = {"--bench"};
    const RunResult r = runLesson(kLesson, options, "conditionals");
    requirePassed(r);
    CHECK(checkOk(r.out, "every timed run needed the host's count of sweeps"));
    // The timings are printed figures, not verdicts (the README names the GPU they came from). What
    // is asserted: each "bench:" line is there for the host's own counts of 100 and 1000 sweeps (the
    // label carries the count the host computed from the data), and the figures agree with the
    // table's row, which also prints each method's total: its first cell is that count, each
    // per-sweep figure is its total divided by the count, and the ratio is the host-driven total over
    // the graph's. A per-sweep figure divided by another count, or a ratio the wrong way round, fails.
    for (const char* sweeps : {"100", "1000"}) {
        INFO(sweeps << " sweeps");
        const double graph = benchValue(r.out, std::string("per sweep, one conditional graph, ") + sweeps + " sweeps");
        const double host = benchValue(r.out, std::string("per sweep, host-driven loop, ") + sweeps + " sweeps");
        const double ratio = benchValue(r.out, std::string("host-driven / conditional graph, ") + sweeps + " sweeps");
        REQUIRE(graph != -1.0);  // -1: no such line
        REQUIRE(host != -1.0);
        REQUIRE(ratio != -1.0);
        // | sweeps | one graph | per sweep | host-driven | per sweep | host / graph |
        std::vector<std::string> cells;
        for (const auto& line : lines(r.out)) {
            if (line.rfind(std::string("| ") + sweeps + " | ", 0) != 0) continue;
            for (size_t start = 1, bar = 0; (bar = line.find('|', start)) != std::string::npos; start = bar + 1)
                cells.push_back(line.substr(start + 1, bar - start - 2));  // without the spaces around it
        }
        REQUIRE(cells.size() == 6);
        CHECK(cells[0] == sweeps);
        const double count = std::strtod(sweeps, nullptr);
        const double graphTotal = std::strtod(cells[1].c_str(), nullptr);  // "723.1 us": the number
        const double hostTotal = std::strtod(cells[3].c_str(), nullptr);
        REQUIRE(graphTotal > 0.0);
        REQUIRE(hostTotal > 0.0);
        // Rounding bounds of what is printed: 0.05 us on a total, 0.005 us on a per-sweep figure,
        // 0.05 on the ratio (and the totals' rounding carried into their quotient).
        CHECK(std::fabs(graph - graphTotal / count) <= 0.005 + 0.05 / count + 1e-9);
        CHECK(std::fabs(host - hostTotal / count) <= 0.005 + 0.05 / count + 1e-9);
        const double quotient = hostTotal / graphTotal;
        CHECK(std::fabs(ratio - quotient) <= 0.05 + quotient * (0.05 / hostTotal + 0.05 / graphTotal) + 1e-9);
    }
}

TEST_CASE("Lesson 23 general_nodes: seven node kinds through cuGraphAddNode, the graph waits for its producer",
          "[gpu][lesson23]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "general_nodes");
    requirePassed(r);
    CHECK(valuesOf(r.out, "node") == std::vector<std::string>{"event wait", "memset", "child graph", "kernel",
                                                                "memcpy", "host", "event record"});
    CHECK(valueOf(r.out, "first launch") == "65536 of 65536 elements = 12 ((1 * 2 + 3) + 1 * 7)");
    CHECK(valueOf(r.out, "host node when the record node's event completed") ==
          "1 call(s), saw 65536 correct elements");
    CHECK(valueOf(r.out, "host node") == "inspect, data the first view");
    CHECK(valueOf(r.out, "event nodes") == "wait for produced, record finished");
    CHECK(valueOf(r.out, "child graph node") == "1 node(s) in its graph");
    for (const char* check : {"the graph waited for the producer's event", "the host node ran after the copy",
                              "the event record node completed after the host node",
                              "the getters return what cuGraphAddNode was given"}) {
        INFO(check);
        CHECK(checkOk(r.out, check));
    }
}

TEST_CASE("Lesson 23 general_nodes: exec setters change the exec only, a disabled node is skipped",
          "[gpu][lesson23]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "general_nodes");
    requirePassed(r);
    CHECK(valueOf(r.out, "second launch") ==
          "second buffer 65536 of 65536 = 16 ((3 * 2 + 3) + 7), first buffer 65536 still -1");
    CHECK(valueOf(r.out, "host node calls") == "first view 1, second view 1");
    CHECK(valueOf(r.out, "graph's nodes after the exec setters") ==
          "memset 0x3f800000, memcpy to the first buffer, host node data the first view");
    CHECK(valueOf(r.out, "graph's add_scaled node") == "s = 3");
    CHECK(valueOf(r.out, "third launch") == "65536 of 65536 = 23 ((3 * 2 + 3) + 2 * 7), 0 = 30 (s = 3)");
    CHECK(valueOf(r.out, "disabled") == "cuGraphNodeGetEnabled 0, 65536 of 65536 elements = 9 (3 * 2 + 3)");
    CHECK(valueOf(r.out, "enabled again") == "cuGraphNodeGetEnabled 1, 65536 of 65536 elements = 23");
    for (const char* check :
         {"the exec setters redirected the copy", "the exec's host node looked at the second view",
          "the graph's own nodes kept their parameters", "cuGraphExecNodeSetParams changed the next launch",
          "cuGraphNodeSetParams changed the graph, not the exec", "a disabled kernel node did not run",
          "the enabled node ran again"}) {
        INFO(check);
        CHECK(checkOk(r.out, check));
    }
}

TEST_CASE("Lesson 23 introspect: reads the diamond, rewires it into a chain, and the clone keeps its own node",
          "[gpu][lesson23]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "introspect");
    requirePassed(r);
    CHECK(valueOf(r.out, "root nodes") == "1 (fill)");
    CHECK(valueOf(r.out, "diamond") ==
          "5 edges: fill -> twice, fill -> plus3, twice -> copy, plus3 -> copy, copy -> count");
    CHECK(valueOf(r.out, "copy's dependencies") == "twice, plus3");
    CHECK(valueOf(r.out, "fill's dependents") == "twice, plus3");
    CHECK(valueOf(r.out, "chain") == "4 edges: fill -> twice, twice -> plus3, plus3 -> copy, copy -> count");
    CHECK(valueOf(r.out, "plus3's dependencies") == "twice");
    CHECK(valueOf(r.out, "after cuGraphUpload") == "65536 of 65536 elements still -1, host node calls: 0");
    CHECK(valueOf(r.out, "chain launch") == "65536 of 65536 elements = 5 (1 * 2 + 3; plus3 first would give 8)");
    // The clone read back against the original: every node found in it, with its type, and the
    // same four edges between the counterparts.
    CHECK(valueOf(r.out, "clone's nodes") == "5 (the original's: 5), found in it with the original's type: 5 of 5");
    CHECK(valueOf(r.out, "clone") == "4 edges: fill -> twice, twice -> plus3, plus3 -> copy, copy -> count");
    CHECK(valueOf(r.out, "clone's twice node") == "its own handle, type kernel");
    CHECK(valueOf(r.out, "clone launch") == "65536 of 65536 elements = 13 (1 * 10 + 3)");
    CHECK(valueOf(r.out, "original launch") == "65536 of 65536 elements = 5");
    for (const char* check : {"introspection finds the diamond", "the rewired graph is a chain",
                              "the clone has the original's nodes and edges", "the clone runs its own parameters",
                              "the original graph kept its parameters"}) {
        INFO(check);
        CHECK(checkOk(r.out, check));
    }
}

TEST_CASE("Lesson 23 introspect: the user object's release callback runs once, after the graph lets go",
          "[gpu][lesson23]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "introspect");
    requirePassed(r);
    CHECK(valueOf(r.out, "release callback calls 200 ms after our last reference went") == "0");
    CHECK(valueOf(r.out, "release callback calls after the graph's release") == "1");
    CHECK(valueOf(r.out, "launches the host node counted") == "3");
    CHECK(checkOk(r.out, "the graph's reference keeps the resource"));
    CHECK(checkOk(r.out, "the release callback ran exactly once"));
}

TEST_CASE("Lesson 23 capture_more: capture continues a graph, joins a hand-added node, a GLOBAL thread mode "
          "refuses cuMemAlloc and a RELAXED one lets it through",
          "[gpu][lesson23]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "capture_more");
    requirePassed(r);
    CHECK(valueOf(r.out, "cuStreamEndCapture returned") == "the graph given to the capture");
    CHECK(valueOf(r.out, "continued graph nodes") == "4 (the memset + 3 captured), root nodes: 1");
    CHECK(valueOf(r.out, "continued graph launch") == "65536 of 65536 elements = 50 ((1 * 2 + 3) * 10)");
    CHECK(valueOf(r.out, "capture status") == "CU_STREAM_CAPTURE_STATUS_ACTIVE, 1 dependency for the next node");
    CHECK(valueOf(r.out, "the hand-added node depends on") == "the node the capture reported");
    CHECK(valueOf(r.out, "nodes that depend on the hand-added one") == "1");
    CHECK(valueOf(r.out, "the next captured node depends on") == "the hand-added node only");
    CHECK(valueOf(r.out, "joined graph launch") == "65536 of 65536 elements = 70 ((2 * 2 + 3) * 10)");
    // GLOBAL: the thread's default mode (cuda.h), so both exchanges hand it back.
    const std::string global = "thread mode CU_STREAM_CAPTURE_MODE_GLOBAL, ";
    const std::string relaxed = "thread mode CU_STREAM_CAPTURE_MODE_RELAXED, ";
    CHECK(valueOf(r.out, global + "the exchange handed back") == "CU_STREAM_CAPTURE_MODE_GLOBAL");
    CHECK(valueOf(r.out, relaxed + "the exchange handed back") == "CU_STREAM_CAPTURE_MODE_GLOBAL");
    const auto refused = valueOf(r.out, global + "cuMemAlloc in the capture");
    REQUIRE(refused);
    CHECK(refused->rfind("CUDA_SUCCESS", 0) != 0);  // which error: printed, not asserted
    CHECK(contains(r.err, "CUDA driver call failed: cuMemAlloc(&scratch, 4096)"));
    CHECK(valueOf(r.out, relaxed + "cuMemAlloc in the capture") ==
          "CUDA_SUCCESS, capture status after it: CU_STREAM_CAPTURE_STATUS_ACTIVE");
    CHECK(valueOf(r.out, relaxed + "cuStreamEndCapture") == "CUDA_SUCCESS, graph returned");
    CHECK(valueOf(r.out, "this thread's capture mode after the swaps") == "CU_STREAM_CAPTURE_MODE_GLOBAL");
    CHECK(valueOf(r.out, "DOT file names the kernel axpb") == "yes");
    // The plain run leaves no DOT file behind (and never writes into its working directory, /):
    // the line reports what remove and rmdir answered.
    CHECK(valueOf(r.out, "DOT file and its folder removed") == "yes (--keep-dot keeps them)");
    for (const char* check : {"the hand-added node depends on the node the capture reported",
                              "the next captured node depends on the hand-added node only",
                              "a GLOBAL thread mode refused cuMemAlloc during the capture",
                              "a RELAXED thread mode let cuMemAlloc through the capture",
                              "the thread's capture mode is GLOBAL again after the swaps",
                              "the DOT file names the graph's kernel",
                              "the program removed the DOT file and its folder"}) {
        INFO(check);
        CHECK(checkOk(r.out, check));
    }
}

TEST_CASE("Lesson 23 capture_more --keep-dot: the DOT file is in a new folder of mode 0700 under TMPDIR",
          "[gpu][lesson23]") {
    requireGpu();
    RunOptions options;
    options.args = {"--keep-dot"};
    options.setEnv["TMPDIR"] = scratchDir();
    const RunResult r = runLesson(kLesson, options, "capture_more");
    requirePassed(r);
    CHECK_FALSE(contains(r.out, "check the program removed the DOT file"));  // kept on purpose
    const auto path = valueOf(r.out, "DOT file kept at");
    REQUIRE(path);
    CHECK(path->rfind(scratchDir() + "/lesson23-dot-", 0) == 0);
    const std::string folder = path->substr(0, path->rfind('/'));
    struct stat info {};
    REQUIRE(stat(folder.c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0700);  // mkdtemp's mode: no other user can plant a file there
    const std::string dot = readText(*path);
    CHECK(contains(dot, "axpb"));
    // cuda.h:21282: the file holds the topology. The graph has four edges; "->" is how DOT writes
    // an edge of a directed graph, so at least one must be there (the file's layout is the driver's).
    CHECK(contains(dot, "->"));
    std::remove(path->c_str());
    rmdir(folder.c_str());
}

TEST_CASE("Lesson 23 capture_more --keep-dot with a relative TMPDIR: the DOT file goes under /tmp",
          "[gpu][lesson23]") {
    requireGpu();
    RunOptions options;
    options.args = {"--keep-dot"};
    options.setEnv["TMPDIR"] = "relative-tmpdir";  // would resolve against the working directory
    const RunResult r = runLesson(kLesson, options, "capture_more");
    requirePassed(r);
    const auto path = valueOf(r.out, "DOT file kept at");
    REQUIRE(path);
    CHECK(path->rfind("/tmp/lesson23-dot-", 0) == 0);
    std::remove(path->c_str());
    rmdir(path->substr(0, path->rfind('/')).c_str());
}

TEST_CASE("Lesson 23 device_launch: the refusal names the host node, and a kernel launches the graph three times",
          "[gpu][lesson23]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "device_launch");
    requirePassed(r);
    CHECK(valueOf(r.out, "result_out") == "CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED");
    CHECK(valueOf(r.out, "hErrNode_out") == "the host node");
    CHECK(contains(r.err, "CUDA driver call failed: cuGraphInstantiateWithParams"));
    CHECK(valueOf(r.out, "instantiate for device launch, kernel node only") == "CUDA_GRAPH_INSTANTIATE_SUCCESS");
    CHECK(valueOf(r.out, "check the exec reports the flags it was instantiated with") == "ok");
    CHECK(valueOf(r.out, "counter after cuGraphUpload") == "0");
    CHECK(valueOf(r.out, "device-side cudaGraphLaunch, first error code") == "0 (0: none)");
    CHECK(valueOf(r.out, "counter after 3 launches of the launcher graph") == "3");
    CHECK(valueOf(r.out, "counter after one cuGraphLaunch from the host") == "4");
}

TEST_CASE(
    "Lesson 23 typed_nodes: one typed call per node kind, a node replaced, batch, attribute and "
    "allocation parameters read back",
    "[gpu][lesson23]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "typed_nodes");
    requirePassed(r);
    CHECK(valueOf(r.out, "graph nodes") == "9");
    CHECK(valueOf(r.out, "nodes") ==
          "10 with both, 9 after cuGraphDestroyNode; copy depends on 1 node(s), the replacement");
    CHECK(valueOf(r.out, "x") == "65536 of 65536 elements = 12 ((1 * 2 + 3) + 1 * 7)");
    CHECK(valueOf(r.out, "host node") == "1 call(s), saw 65536 correct elements");
    CHECK(valueOf(r.out, "words the batch node wrote") == "0xa11ce 0xb0b");
    CHECK(valueOf(r.out, "cuEventElapsedTime(started, finished)") == "CUDA_SUCCESS");
    CHECK(valueOf(r.out, "batch node") == "2 operation(s), the two writes it was given");
    CHECK(valueOf(r.out, "allocation node") ==
          "32 MiB, on this device, at the address cuGraphAddMemAllocNode returned");
    CHECK(valueOf(r.out, "free node frees") == "the allocation node's address");
    for (const char* check :
         {"cuGraphDestroyNode removed the old node and its edges",
          "the child graph ran, after the producer's event, and the old node did not",
          "the host node ran once, after the copy", "the batch node wrote both words",
          "both event record nodes recorded their events", "the batch node reads back its two writes",
          "the allocation node reads back the size, device and address it was given",
          "the free node reads back the allocation node's address"}) {
        INFO(check);
        CHECK(checkOk(r.out, check));
    }
    // The priority checks run where the context has more than one priority level (the H200 in the
    // README showed six: 0 to -5).
    if (!contains(r.out, "section kernel node priority: SKIP")) {
        CHECK(checkOk(r.out, "the priority set on the kernel node reads back"));
        CHECK(checkOk(r.out, "cuGraphKernelNodeCopyAttributes gave the replacement that priority"));
    }
}

TEST_CASE(
    "Lesson 23 graph_or_exec: a graph edit reaches the exec only through cuGraphExecUpdate, an exec "
    "setter changes the exec only",
    "[gpu][lesson23]") {
    requireGpu();
    const RunResult r = defaultRun(kLesson, "graph_or_exec");
    requirePassed(r);
    CHECK(valueOf(r.out, "first launch") == "first buffer 65536 of 65536 = 12 ((1 * 2 + 3) + 1 * 7), word 1");
    CHECK(valueOf(r.out, "old exec after the edits") ==
          "first buffer 65536 of 65536 = 12, second buffer 65536 still -1");
    CHECK(valuesOf(r.out, "host node calls") ==
          std::vector<std::string>{"first view 2, second view 0; second record event: CUDA_ERROR_INVALID_HANDLE",
                                   "first view 2, second view 1; second record event: CUDA_SUCCESS"});
    CHECK(valueOf(r.out, "cuGraphExecUpdate") == "CU_GRAPH_EXEC_UPDATE_SUCCESS");
    CHECK(valueOf(r.out, "updated exec") == "second buffer 65536 of 65536 = 12, 0 still -1");
    CHECK(valueOf(r.out, "exec after its setters") == "second buffer 65536 of 65536 = 20 ((1 * 10 + 3) + 7)");
    CHECK(valueOf(r.out, "word the exec wrote") == "3; the graph's batch node writes: 2");
    CHECK(valueOf(r.out, "third record event") == "CUDA_SUCCESS");
    for (const char* check :
         {"the exec kept its parameters after the graph was edited", "the update carried the copy's new destination",
          "the update carried the wait node's new event", "the update carried the host node's new data",
          "the update carried the record node's new event",
          "the exec ran the new child graph, after the third producer event",
          "cuGraphExecBatchMemOpNodeSetParams changed the word the exec writes",
          "cuGraphBatchMemOpNodeSetParams changed the graph's batch node",
          "the exec's record node recorded the third event"}) {
        INFO(check);
        CHECK(checkOk(r.out, check));
    }
}

// ---------------------------------------------------------------------------
// GPU: the driver itself, without the lesson.

TEST_CASE("The driver refuses to clone a graph with a conditional node or to embed it as a child graph",
          "[gpu][lesson23]") {
    requireGpu();
#if CUDA_VERSION >= 12040
    if (driver().driverVersion() < 12040) SKIP("the driver supports CUDA below 12.4");
    CurrentPrimaryContext context;
    auto graphCreate = DRIVER_FUNCTION(driver(), cuGraphCreate);
    auto graphDestroy = DRIVER_FUNCTION(driver(), cuGraphDestroy);
    auto handleCreate = DRIVER_FUNCTION(driver(), cuGraphConditionalHandleCreate);
    auto addNode = DRIVER_FUNCTION(driver(), cuGraphAddNode);  // cuGraphAddNode_v2 with 13.0's cuda.h
    auto clone = DRIVER_FUNCTION(driver(), cuGraphClone);
    auto addChild = DRIVER_FUNCTION(driver(), cuGraphAddChildGraphNode);
    REQUIRE((graphCreate && graphDestroy && handleCreate && addNode && clone && addChild));
    CUgraph graph = nullptr;
    REQUIRE(graphCreate(&graph, 0) == CUDA_SUCCESS);
    const Cleanup destroyGraph([&] { graphDestroy(graph); });
    CUgraphConditionalHandle handle = 0;
    REQUIRE(handleCreate(&handle, graph, context.context(), 0, 0) == CUDA_SUCCESS);
    CUgraphNodeParams params{};
    params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    params.conditional.handle = handle;
    params.conditional.type = CU_GRAPH_COND_TYPE_IF;
    params.conditional.size = 1;
    params.conditional.ctx = context.context();
    CUgraphNode node = nullptr;
#if CUDA_VERSION >= 13000
    REQUIRE(addNode(&node, graph, nullptr, nullptr, 0, &params) == CUDA_SUCCESS);
#else
    REQUIRE(addNode(&node, graph, nullptr, 0, &params) == CUDA_SUCCESS);
#endif
    // cuda.h (CU_GRAPH_NODE_TYPE_CONDITIONAL, cuGraphClone, cuGraphAddChildGraphNode): such a graph
    // "cannot be cloned" and "cannot be used in a child node".
    CUgraph copy = nullptr;
    const CUresult cloned = clone(&copy, graph);
    CHECK(cloned != CUDA_SUCCESS);
    if (cloned == CUDA_SUCCESS) graphDestroy(copy);
    CUgraph parent = nullptr;
    REQUIRE(graphCreate(&parent, 0) == CUDA_SUCCESS);
    const Cleanup destroyParent([&] { graphDestroy(parent); });
    CUgraphNode child = nullptr;
    CHECK(addChild(&child, parent, nullptr, 0, graph) != CUDA_SUCCESS);
#else
    SKIP("built with headers older than CUDA 12.4, the version the lesson asks for; its programs skip too");
#endif
}

TEST_CASE("The driver answers cuStreamUpdateCaptureDependencies on a stream that is not capturing with "
          "CUDA_ERROR_ILLEGAL_STATE",
          "[gpu][lesson23]") {
    requireGpu();
#if CUDA_VERSION >= 12040
    if (driver().driverVersion() < 12040) SKIP("the driver supports CUDA below 12.4");
    CurrentPrimaryContext context;
    auto streamCreate = DRIVER_FUNCTION(driver(), cuStreamCreate);
    auto streamDestroy = DRIVER_FUNCTION(driver(), cuStreamDestroy);
    auto graphCreate = DRIVER_FUNCTION(driver(), cuGraphCreate);
    auto graphDestroy = DRIVER_FUNCTION(driver(), cuGraphDestroy);
    auto addEmpty = DRIVER_FUNCTION(driver(), cuGraphAddEmptyNode);
    auto update = DRIVER_FUNCTION(driver(), cuStreamUpdateCaptureDependencies);  // _v2 with 13.0's cuda.h
    REQUIRE((streamCreate && streamDestroy && graphCreate && graphDestroy && addEmpty && update));
    CUstream stream = nullptr;
    REQUIRE(streamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    const Cleanup destroyStream([&] { streamDestroy(stream); });
    CUgraph graph = nullptr;
    REQUIRE(graphCreate(&graph, 0) == CUDA_SUCCESS);
    const Cleanup destroyGraph([&] { graphDestroy(graph); });
    CUgraphNode node = nullptr;
    REQUIRE(addEmpty(&node, graph, nullptr, 0) == CUDA_SUCCESS);
    // cuda.h: "Returns CUDA_ERROR_ILLEGAL_STATE if the stream is not capturing."
#if CUDA_VERSION >= 13000
    CHECK(update(stream, &node, nullptr, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES) == CUDA_ERROR_ILLEGAL_STATE);
#else
    CHECK(update(stream, &node, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES) == CUDA_ERROR_ILLEGAL_STATE);
#endif
#else
    SKIP("built with headers older than CUDA 12.4, the version the lesson asks for");
#endif
}
