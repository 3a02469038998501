// CPU tests of the set-up step on machines that lack what the course can use: no EGL
// headers, not root, offline. They play such a machine with COURSE_SETUP_ROOT (the file
// checks look under an empty folder) and with stand-ins for `id` and `apt-get` first on PATH.
#include <unistd.h>
#include <catch2/catch_test_macros.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/harness.h"

using namespace harness;

namespace {

// A folder of stand-in commands: `id -u` answers uid, `apt-get` fails as an offline one does.
std::string fakeMachine(const std::string& name, int uid) {
    const std::string dir = scratchDir() + "/machines/" + name;
    REQUIRE(std::system(("rm -rf " + dir + " && mkdir -p " + dir + "/bin " + dir + "/root").c_str()) == 0);
    REQUIRE(writeFile(dir + "/bin/id",
                      "#!/bin/sh\n[ \"$1\" = -u ] && { echo " + std::to_string(uid) + "; exit 0; }\nexec /usr/bin/id \"$@\"\n",
                      0755));
    REQUIRE(writeFile(dir + "/bin/apt-get",
                      "#!/bin/sh\necho 'Err:1 http://mirror.invalid/debian bookworm InRelease'\n"
                      "echo 'E: Unable to locate package libegl-dev' >&2\nexit 100\n",
                      0755));
    return dir;
}

RunOptions onMachine(const std::string& machine, std::vector<std::string> args) {
    RunOptions options;
    options.args = std::move(args);
    options.setEnv["PATH"] = machine + "/bin:" + std::string(std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin");
    options.setEnv["COURSE_SETUP_ROOT"] = machine + "/root";
    options.unsetEnv = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "CATCH2_PREFIX"};
    options.timeoutSeconds = 300;
    return options;
}

std::string lastNonEmptyLine(const std::string& text) {
    std::string last;
    for (const auto& line : lines(text))
        if (line.find_first_not_of(" \t") != std::string::npos) last = line;
    return last;
}

}  // namespace

TEST_CASE("Without EGL headers and without root, lesson 10 still builds and says SKIP with the reason",
          "[cpu][setup][lesson10]") {
    const std::string machine = fakeMachine("no-egl-not-root", 1000);
    const std::string build = machine + "/build";
    const RunResult made =
        run("make", onMachine(machine, {"-s", "-C", repoRoot(), "BUILD=" + build, "WERROR=1", "build-10"}));
    REQUIRE(made.exitCode == 0);
    CHECK(contains(made.err, "lesson 10 is built without EGL: this user is not root"));
    CHECK(contains(made.err, "apt-get install libegl-dev"));
    CHECK_FALSE(contains(made.out + made.err, "E: Unable"));

    // Every program of the lesson is built; each EGL program (egl_*) runs, before any driver
    // call, as "not applicable here". (cudla_hybrid does not use EGL.)
    int eglPrograms = 0;
    std::ifstream list(build + "/10-egl-and-cudla/programs.txt");
    for (std::string program; std::getline(list, program);) {
        if (program.empty()) continue;
        INFO("program " << program);
        CHECK(access((build + "/10-egl-and-cudla/" + program).c_str(), X_OK) == 0);
        if (program.rfind("egl", 0) != 0) continue;
        ++eglPrograms;
        RunOptions options;
        options.setEnv["LD_LIBRARY_PATH"] = stubDriverDir();
        const RunResult r = run(build + "/10-egl-and-cudla/" + program, options);
        CHECK(r.exitCode == course::kExitNotApplicable);
        CHECK(contains(r.out,
                       "Result = SKIP (EGL headers were not found at build time: apt-get install libegl-dev)"));
    }
    CHECK(eglPrograms >= 2);
}

TEST_CASE("Offline as root, the set-up step ends with its own paragraph, not the package manager's output",
          "[cpu][setup]") {
    const std::string machine = fakeMachine("offline-root", 0);
    const std::string out = machine + "/setup";
    const RunResult r = run(repoRoot() + "/common/tools/setup.sh", onMachine(machine, {"egl", out}));
    CHECK(r.exitCode == 0);  // an optional dependency never fails the build
    CHECK(contains(r.err, "lesson 10 is built without EGL: apt-get failed (E: Unable to locate package libegl-dev)"));
    CHECK(lastNonEmptyLine(r.err).find("make again") != std::string::npos);
    std::ifstream cflags(out + "/egl.cflags");
    std::string flag;
    std::getline(cflags, flag);
    CHECK(flag == "-DCOURSE_NO_EGL");

    // The second build on the same offline machine does not ask apt-get again.
    const RunResult again = run(repoRoot() + "/common/tools/setup.sh", onMachine(machine, {"egl", out}));
    CHECK(again.exitCode == 0);
    CHECK(again.err.empty());
}

TEST_CASE("Without Catch2 and without root, make test's set-up says what to install; make run never asks for it",
          "[cpu][setup]") {
    const std::string machine = fakeMachine("no-catch2-not-root", 1000);
    const RunResult r = run(repoRoot() + "/common/tools/setup.sh", onMachine(machine, {"catch2"}));
    CHECK(r.exitCode == 1);
    CHECK(contains(r.err, "make test needs Catch2 v3 (>= 3.4), and it could not be installed: this user is not root"));
    CHECK(contains(r.err, "make run works without it"));

    const RunResult dryRun = run(
        "make", onMachine(machine, {"-n", "-C", repoRoot(), "BUILD=" + machine + "/build", "run"}));
    CHECK(dryRun.exitCode == 0);
    CHECK_FALSE(contains(dryRun.out, "setup.sh catch2"));
}
