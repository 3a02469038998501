// CPU tests of the course's tooling: the driver probe that `make run` uses, the
// lesson runner's summary table, and the Makefile's own targets.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "tests/harness.h"

using namespace harness;

namespace {

RunOptions makeOptions(std::vector<std::string> args) {
    RunOptions options;
    options.args = {"-s", "-C", repoRoot()};
    options.args.insert(options.args.end(), args.begin(), args.end());
    // A make started from `make test` must not inherit the outer make's jobserver.
    options.unsetEnv = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"};
    return options;
}

// A throwaway "lesson": a shell script that prints what it is given and exits with a code.
// A script laid out like a lesson's program: build/tests/fakes/FOLDER/PROGRAM (the
// runners label a program by its folder, and by folder/program when the names differ).
std::string fakeLesson(const std::string& name, const std::string& body, const std::string& folder = "") {
    const std::string dir = scratchDir() + "/fakes/" + (folder.empty() ? name : folder);
    REQUIRE(std::system(("mkdir -p " + dir).c_str()) == 0);
    const std::string path = dir + "/" + name;
    REQUIRE(writeFile(path, "#!/bin/sh\n" + body + "\n", 0755));
    return path;
}

RunOptions runnerArgs(std::vector<std::string> lessons) {
    RunOptions options;
    options.args = std::move(lessons);
    return options;
}

}  // namespace

TEST_CASE("The driver probe explains a machine with no usable GPU instead of a loader error", "[cpu][tools][fault]") {
    // Hiding every device makes this case reproducible on a GPU machine too.
    RunOptions options;
    options.setEnv["CUDA_VISIBLE_DEVICES"] = "";
    const RunResult r = run(buildDir() + "/tools/driver-probe", options);
    CHECK(r.exitCode == 1);
    CHECK(contains(r.err, "Cannot run the lessons"));
    CHECK(contains(r.err, "make test"));
    const bool noDriver = contains(r.err, "libcuda.so.1 could not be loaded");
    const bool noDevice = contains(r.err, "CUDA_ERROR_NO_DEVICE");
    CHECK((noDriver || noDevice));
    CHECK_FALSE(contains(r.err, "error while loading shared libraries"));
}

TEST_CASE("The driver probe recognises NVIDIA's stub library", "[cpu][tools][fault]") {
    RunOptions options;
    options.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();
    const RunResult r = run(buildDir() + "/tools/driver-probe", options);
    CHECK(r.exitCode == 1);
    CHECK(contains(r.err, "CUDA_ERROR_STUB_LIBRARY"));
    CHECK(contains(r.err, "stub"));
}

TEST_CASE("make run-01 on a machine without a usable GPU prints an explanation and fails", "[cpu][tools][fault]") {
    RunOptions options = makeOptions({"run-01"});
    options.setEnv["CUDA_VISIBLE_DEVICES"] = "";
    const RunResult r = run("make", options);
    CHECK(r.exitCode != 0);
    CHECK(contains(r.err, "Cannot run the lessons"));
    CHECK_FALSE(contains(r.out + r.err, "error while loading shared libraries"));
}

TEST_CASE("make help lists every target, one line each", "[cpu][tools]") {
    const RunResult r = run("make", makeOptions({"help"}));
    REQUIRE(r.exitCode == 0);
    for (const char* target : {"all", "run", "test", "clean", "help", "run-NN", "run-01", "run-02"})
        CHECK(contains(r.out, target));
}

TEST_CASE("The lesson runner's table shows PASS, SKIP with its reason, and FAIL, and fails the run", "[cpu][tools]") {
    const std::string pass = fakeLesson("fake-pass", "echo 'Result = PASS'; exit 0");
    const std::string skip = fakeLesson("fake-skip", "echo 'Result = SKIP (needs a Jetson DLA)'; exit 77");
    const std::string fail = fakeLesson("fake-fail", "echo 'Result = FAIL'; exit 1");

    const RunResult some = run(repoRoot() + "/common/tools/run-lessons.sh", runnerArgs({pass, skip}));
    CHECK(some.exitCode == 0);
    CHECK(contains(some.out, "################ fake-pass ################"));
    const auto table = lines(some.out);
    bool passRow = false;
    bool skipRow = false;
    for (const auto& line : table) {
        passRow = passRow || (line.rfind("fake-pass", 0) == 0 && contains(line, "PASS"));
        skipRow = skipRow || (line.rfind("fake-skip", 0) == 0 && contains(line, "SKIP (needs a Jetson DLA)"));
    }
    CHECK(passRow);
    CHECK(skipRow);

    const RunResult withFailure = run(repoRoot() + "/common/tools/run-lessons.sh", runnerArgs({pass, fail}));
    CHECK(withFailure.exitCode != 0);
    CHECK(contains(withFailure.out, "FAIL (exit 1)"));
}

TEST_CASE("The lesson runner names each program of a lesson of several programs", "[cpu][tools]") {
    const std::string first = fakeLesson("load", "echo 'Result = PASS'", "fake-multi");
    const std::string second = fakeLesson("link", "echo 'Result = PASS'", "fake-multi");
    const RunResult r = run(repoRoot() + "/common/tools/run-lessons.sh", runnerArgs({first, second}));
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "################ fake-multi/load ################"));
    CHECK(contains(r.out, "################ fake-multi/link ################"));
    int rows = 0;
    for (const auto& line : lines(r.out))
        if ((line.rfind("fake-multi/load ", 0) == 0 || line.rfind("fake-multi/link ", 0) == 0) && contains(line, "PASS"))
            ++rows;
    CHECK(rows == 2);
}

TEST_CASE("The bench runner names the GPU, collects bench lines, and runs nvbandwidth beside them when it can",
          "[cpu][tools][bench]") {
    const std::string lesson =
        fakeLesson("fake-bench", "echo 'bench: copy ratio = 98.5 % (of the link, same run)'; exit 0");
    const std::string notHere =
        fakeLesson("fake-bench-skip", "echo 'Result = SKIP (needs two GPUs; this machine has 1)'; exit 77");
    // A stand-in nvbandwidth, first on PATH, prints its summary lines as the real one does.
    const std::string tools = scratchDir() + "/fakes/path";
    REQUIRE(std::system(("mkdir -p " + tools).c_str()) == 0);
    REQUIRE(writeFile(tools + "/nvbandwidth", "#!/bin/sh\necho 'SUM host_to_device_memcpy_ce 55.23'\n", 0755));

    RunOptions options = runnerArgs({lesson, notHere});
    options.setEnv["PATH"] = tools + ":" + std::string(std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin");
    options.setEnv["DRIVER_PROBE"] = buildDir() + "/tools/driver-probe";
    options.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();  // the stub: the probe cannot name a GPU
    const RunResult r = run(repoRoot() + "/common/tools/bench-lessons.sh", options);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "GPU: unknown GPU"));
    bool lessonRow = false;
    bool nvbandwidthRow = false;
    for (const auto& line : lines(r.out)) {
        lessonRow = lessonRow || (line.rfind("fake-bench", 0) == 0 && contains(line, "copy ratio") &&
                                  contains(line, "98.5 % (of the link, same run)"));
        nvbandwidthRow = nvbandwidthRow || (line.rfind("nvbandwidth", 0) == 0 &&
                                            contains(line, "host_to_device_memcpy_ce (SUM)") && contains(line, "55.23 GB/s"));
    }
    CHECK(lessonRow);
    CHECK(nvbandwidthRow);
    // A bench that does not apply here is a SKIP row with its reason, not a failure.
    CHECK(contains(r.out, "SKIP (needs two GPUs; this machine has 1)"));
}

TEST_CASE("The sanitize runner's table counts each tool's errors, also with runs in parallel", "[cpu][tools]") {
    // A stand-in compute-sanitizer: runs the program, then reports 2 errors for racecheck on
    // programs named *-racy, none otherwise, in the real tool's summary formats.
    const std::string fake = scratchDir() + "/fakes/fake-sanitizer";
    REQUIRE(std::system(("mkdir -p " + scratchDir() + "/fakes").c_str()) == 0);
    REQUIRE(writeFile(fake,
                      "#!/bin/bash\ntool=$2; program=${@: -1}\n\"$program\"; code=$?\n"
                      "errors=0; [ \"$tool\" = racecheck ] && [[ $program == *-racy ]] && errors=2\n"
                      "if [ \"$tool\" = racecheck ]; then echo \"========= RACECHECK SUMMARY: 0 hazards "
                      "displayed ($errors errors, 0 warnings)\"; else echo \"========= ERROR SUMMARY: $errors "
                      "errors\"; fi\n[ $errors = 0 ] && exit $code || exit 99\n",
                      0755));
    const std::string clean = fakeLesson("fake-clean", "echo 'Result = PASS'");
    const std::string racy = fakeLesson("fake-racy", "echo 'Result = PASS'");
    const std::string skip = fakeLesson("fake-skipped", "echo 'Result = SKIP (not here)'; exit 77");

    for (const char* jobs : {"1", "4"}) {
        INFO("SANITIZE_JOBS=" << jobs);
        RunOptions options = runnerArgs({clean, skip, racy});
        options.setEnv["COMPUTE_SANITIZER"] = fake;
        options.setEnv["SANITIZE_JOBS"] = jobs;
        const RunResult r = run(repoRoot() + "/common/tools/sanitize-lessons.sh", options);
        CHECK(r.exitCode != 0);
        const std::regex cleanRow("fake-clean +0 +0 +0 +0 *");
        const std::regex skipRow("fake-skipped +SKIP +SKIP +SKIP +SKIP *");
        const std::regex racyRow("fake-racy +0 +2 +0 +0 *");
        bool sawClean = false, sawSkip = false, sawRacy = false;
        for (const auto& line : lines(r.out)) {
            sawClean = sawClean || std::regex_match(line, cleanRow);
            sawSkip = sawSkip || std::regex_match(line, skipRow);
            sawRacy = sawRacy || std::regex_match(line, racyRow);
        }
        CHECK(sawClean);
        CHECK(sawSkip);
        CHECK(sawRacy);
    }
}

namespace {

// A stand-in course for common/tools/mutate.sh: one lesson, 99-demo, whose program is a shell
// script with one check that holds while `answer=42`, and a Makefile with the one target the
// runner uses (build-99). Returns the tree's root.
std::string fakeMutationTree() {
    const std::string root = scratchDir() + "/fakes/mutate-tree";
    REQUIRE(std::system(("rm -rf " + root + " && mkdir -p " + root + "/99-demo " + root + "/tests/mutants/99-demo")
                            .c_str()) == 0);
    REQUIRE(writeFile(root + "/99-demo/demo.sh",
                      "#!/bin/sh\n"
                      "answer=42\n"
                      "if [ $answer = 42 ]; then\n"
                      "    echo 'check answer is 42: ok'; echo 'Result = PASS'; exit 0\n"
                      "fi\n"
                      "echo 'check answer is 42: FAIL'; echo 'Result = FAIL'; exit 1\n"));
    REQUIRE(writeFile(root + "/Makefile", "build-99:\n\tmkdir -p $(BUILD)/99-demo && cp 99-demo/demo.sh "
                                          "$(BUILD)/99-demo/demo && chmod +x $(BUILD)/99-demo/demo\n"));
    return root;
}

void writeMutant(const std::string& root, const std::string& name, const std::string& header,
                 const std::string& from, const std::string& to) {
    REQUIRE(writeFile(root + "/tests/mutants/99-demo/" + name + ".patch",
                      header + "\n--- a/99-demo/demo.sh\n+++ b/99-demo/demo.sh\n@@ -1,3 +1,3 @@\n #!/bin/sh\n-" + from +
                          "\n+" + to + "\n if [ $answer = 42 ]; then\n"));
}

RunResult runMutate(const std::string& root, const std::string& driverProbe, std::vector<std::string> patches) {
    RunOptions options;
    options.args = {repoRoot() + "/common/tools/mutate.sh"};
    for (const std::string& patch : patches) options.args.push_back(root + "/tests/mutants/99-demo/" + patch);
    options.workingDir = root;
    options.setEnv = {{"BUILD", root + "/build"}, {"DRIVER_PROBE", driverProbe}, {"MUTATE_JOBS", "2"}};
    options.unsetEnv = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"};
    return run("bash", options);
}

}  // namespace

TEST_CASE("make mutate's runner tells a caught mutant from one not caught, and from one that does not apply",
          "[cpu][tools]") {
    const std::string root = fakeMutationTree();
    const std::string header = "Mutant: breaks the answer\nProgram: demo\nExpect-Check: answer is 42\n";
    writeMutant(root, "wrong-answer", header, "answer=42", "answer=41");
    writeMutant(root, "harmless", header, "answer=42", "answer=42 # same");
    writeMutant(root, "stale", header, "answer=7", "answer=8");
    writeMutant(root, "no-check", "Mutant: names no check\nProgram: demo\n", "answer=42", "answer=41");

    // A usable GPU (the probe says yes): mutants are run.
    const RunResult r = runMutate(root, "/bin/true", {"wrong-answer.patch", "harmless.patch", "stale.patch",
                                                      "no-check.patch"});
    CHECK(r.exitCode == 1);
    CHECK(std::regex_search(r.out, std::regex(R"(99-demo/wrong-answer +answer is 42 +caught\n)")));
    CHECK(std::regex_search(r.out, std::regex(R"(99-demo/harmless +answer is 42 +NOT CAUGHT \(exit 0; no 'Result = FAIL'; no 'check answer is 42: FAIL'\))")));
    CHECK(std::regex_search(r.out, std::regex(R"(99-demo/stale +answer is 42 +did not apply)")));
    CHECK(std::regex_search(r.out, std::regex(R"(99-demo/no-check +header: needs Mutant, Program and Expect-Check)")));
    CHECK(contains(r.out, "mutants: 4, caught: 1"));
    // The lesson's own source is untouched: the patch went into a copy.
    std::ifstream source(root + "/99-demo/demo.sh");
    std::string text((std::istreambuf_iterator<char>(source)), std::istreambuf_iterator<char>());
    CHECK(contains(text, "answer=42\n"));

    // No usable GPU: every mutant is applied and built, none run, and that passes.
    const RunResult built = runMutate(root, "/bin/false", {"wrong-answer.patch", "harmless.patch"});
    CHECK(built.exitCode == 0);
    CHECK(std::regex_search(built.out, std::regex(R"(99-demo/harmless +answer is 42 +built \(not run: no GPU\))")));
    CHECK(contains(built.out, "mutants: 2 applied and built; none run"));
}

TEST_CASE("Every mutant names a lesson program and a check that the program prints", "[cpu][tools]") {
    // The header's Program must be one of the lesson's programs, and its Expect-Check must be
    // a check the lesson makes (so a renamed check cannot leave a mutant looking for a line that
    // no longer exists).
    RunOptions listing;
    listing.args = {"-c", "ls " + repoRoot() + "/tests/mutants/*/*.patch"};
    const RunResult list = run("sh", listing);
    REQUIRE(list.exitCode == 0);
    int mutants = 0;
    for (const std::string& patch : lines(list.out)) {
        if (patch.empty()) continue;
        ++mutants;
        INFO(patch);
        std::ifstream in(patch);
        std::string program;
        std::string check;
        for (std::string line; std::getline(in, line) && line.rfind("--- ", 0) != 0;) {
            if (line.rfind("Program: ", 0) == 0) program = line.substr(9);
            if (line.rfind("Expect-Check: ", 0) == 0) check = line.substr(14);
        }
        const std::string folder = patch.substr(0, patch.rfind('/'));
        const std::string lesson = folder.substr(folder.rfind('/') + 1);
        const std::vector<std::string> programs = lessonPrograms(lesson);
        CHECK(std::find(programs.begin(), programs.end(), program) != programs.end());
        // Either the name is written out in the source, or (a name composed at run time, such as
        // "<way> parent reads ...") the README's real output shows the program printing it.
        RunOptions inSource;
        inSource.args = {"-rqF", "\"" + check + "\"", repoRoot() + "/" + lesson};
        RunOptions inOutput;
        inOutput.args = {"-qF", "check " + check + ": ok", repoRoot() + "/" + lesson + "/README.md"};
        CHECK((run("grep", inSource).exitCode == 0 || run("grep", inOutput).exitCode == 0));
    }
    CHECK(mutants > 0);
}

TEST_CASE("Every program of every lesson has at least one mutant", "[cpu][tools]") {
    for (const auto& lesson : lessonFolders())
        for (const auto& program : lessonPrograms(lesson)) {
            INFO(lesson << "/" << program);
            RunOptions search;
            search.args = {"-lx", "Program: " + program, "-r", repoRoot() + "/tests/mutants/" + lesson};
            CHECK(run("grep", search).exitCode == 0);
        }
}

TEST_CASE("The bench capture runs a lesson's --bench programs and fills both READMEs' make-bench block",
          "[cpu][tools][bench]") {
    // A stand-in build: lesson 99-demo with two --bench programs (bench.txt, as the Makefile writes
    // it) and a driver probe that names a GPU.
    const std::string build = scratchDir() + "/fakes/bench-capture/build";
    const std::string lesson = scratchDir() + "/fakes/bench-capture/99-demo";
    REQUIRE(std::system(
                ("rm -rf " + build + " " + lesson + " && mkdir -p " + build + "/99-demo " + build + "/tools " + lesson)
                    .c_str()) == 0);
    REQUIRE(writeFile(build + "/99-demo/bench.txt", "copy\nlaunch\n"));
    REQUIRE(
        writeFile(build + "/99-demo/copy", "#!/bin/sh\necho \"copy args: $*\"\necho 'bench: copy = 1.5 us'\n", 0755));
    REQUIRE(
        writeFile(build + "/99-demo/launch", "#!/bin/sh\necho 'Result = SKIP (needs two GPUs)' >&2\nexit 77\n", 0755));
    REQUIRE(writeFile(build + "/tools/driver-probe", "#!/bin/sh\necho 'NVIDIA Stand-in | devices: 1'\n", 0755));
    const RunResult capture = run(repoRoot() + "/common/tools/capture-bench.sh", runnerArgs({build, "99-demo"}));
    CHECK(capture.exitCode == 0);
    CHECK(capture.out ==
          "################ 99-demo/copy --bench ################\ncopy args: --bench\nbench: copy = 1.5 us\n\n"
          "################ 99-demo/launch --bench ################\nResult = SKIP (needs two GPUs)\n"
          "captured-on: NVIDIA Stand-in | devices: 1 | make bench\n");

    // Both READMEs get the block, folded, at the end of their Expected output section, and a second
    // fill replaces it instead of adding another.
    REQUIRE(writeFile(lesson + "/README.md", "# Demo\n## Expected output\nIt prints.\n\n## Pitfalls\nNone.\n"));
    REQUIRE(writeFile(lesson + "/README.zh-CN.md", "# 演示\n## 预期输出\n它会打印。\n\n## 常见陷阱\n无。\n"));
    REQUIRE(writeFile(lesson + "/bench.txt", capture.out));
    RunOptions fill =
        runnerArgs({repoRoot() + "/common/tools/fill-expected-output.py", "--bench", lesson, lesson + "/bench.txt"});
    REQUIRE(run("python3", fill).exitCode == 0);
    const std::string once = readText(lesson + "/README.md");
    REQUIRE(run("python3", fill).exitCode == 0);
    CHECK(readText(lesson + "/README.md") == once);
    const std::string block = "<!-- captured-on: NVIDIA Stand-in | devices: 1 | make bench -->\n";
    const std::string fenced = "```text\n################ 99-demo/copy --bench ################\n";
    for (const auto& name : {"/README.md", "/README.zh-CN.md"}) {
        INFO(name);
        const std::string text = readText(lesson + name);
        CHECK(contains(text, "<!-- bench-output:begin -->\n" + block));
        CHECK(contains(text, fenced));
        CHECK(contains(text, "SKIP (needs two GPUs)\n```\n<!-- bench-output:end -->\n\n</details>\n\n## "));
        CHECK(contains(text, "<details>\n<summary>"));
    }
    // A capture without its make-bench marker is refused.
    REQUIRE(writeFile(lesson + "/plain.txt", "bench: copy = 1.5 us\ncaptured-on: NVIDIA Stand-in | devices: 1\n"));
    CHECK(run("python3", runnerArgs({repoRoot() + "/common/tools/fill-expected-output.py", "--bench", lesson,
                                     lesson + "/plain.txt"}))
              .exitCode == 1);
}
