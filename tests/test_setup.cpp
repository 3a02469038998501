// CPU tests of the set-up step on machines that lack what the course can use: no EGL
// headers, not root, offline, a local package mirror. They play such a machine with
// COURSE_SETUP_ROOT (the file checks and the apt sources are read under a folder of the test's
// own) and with stand-ins for `id` and `apt-get` first on PATH.
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
    const std::string dir = buildDir() + "/tests/machines/" + name;
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
    options.unsetEnv = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "CATCH2_PREFIX", "DEBIAN_MIRROR"};
    options.timeoutSeconds = 300;
    return options;
}

// Writes FILE (a path such as etc/os-release) under the fake machine's root.
void onRoot(const std::string& machine, const std::string& file, const std::string& text) {
    const std::string path = machine + "/root/" + file;
    REQUIRE(std::system(("mkdir -p " + path.substr(0, path.rfind('/'))).c_str()) == 0);
    REQUIRE(writeFile(path, text));
}

// What apt-mirror.sh's apt_mirror chooses for the release on the fake machine: stdout is the URI.
RunResult aptMirror(const std::string& machine, const std::string& codename) {
    return run("bash", onMachine(machine, {"-c", ". \"$0\" && apt_mirror \"$1\" setup",
                                           repoRoot() + "/common/tools/apt-mirror.sh", codename}));
}

const char* const kDebianSources =  // Debian 12's own deb822 file, pointed at a local mirror
    "Types: deb\n"
    "# the security archive comes first: its suite is not the release's\n"
    "URIs: http://mirror.invalid/debian-security\n"
    "Suites: bookworm-security\n"
    "Components: main\n"
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    "\n"
    "Types: deb\n"
    "URIs: http://mirror.invalid/debian/\n"
    "Suites: bookworm bookworm-updates\n"
    "Components: main\n"
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n";

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
    CHECK(contains(made.err, "the EGL programs of lessons 10 and 27 are built without EGL: this user is not root"));
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
    struct Optional {
        const char* name;      // setup.sh's argument
        const char* sentence;  // what its paragraph says
        const char* flag;      // what the build then compiles with
    };
    const Optional optionals[] = {
        {"egl", "the EGL programs of lessons 10 and 27 are built without EGL", "-DCOURSE_NO_EGL"},
        {"gl", "the OpenGL programs of lesson 27 are built without OpenGL", "-DCOURSE_NO_GL"},
        {"vulkan", "the Vulkan programs of lesson 27 are built without Vulkan", "-DCOURSE_NO_VULKAN"},
    };
    const std::string machine = fakeMachine("offline-root", 0);
    const std::string out = machine + "/setup";
    for (const Optional& optional : optionals) {
        INFO("setup.sh " << optional.name);
        const RunResult r = run(repoRoot() + "/common/tools/setup.sh", onMachine(machine, {optional.name, out}));
        CHECK(r.exitCode == 0);  // an optional dependency never fails the build
        CHECK(contains(r.err, std::string(optional.sentence) + ": apt-get failed (E: Unable to locate package"));
        CHECK(lastNonEmptyLine(r.err).find("make again") != std::string::npos);
        std::ifstream cflags(out + "/" + optional.name + ".cflags");
        std::string flag;
        std::getline(cflags, flag);
        CHECK(flag == optional.flag);

        // The second build on the same offline machine does not ask apt-get again.
        const RunResult again = run(repoRoot() + "/common/tools/setup.sh", onMachine(machine, {optional.name, out}));
        CHECK(again.exitCode == 0);
        CHECK(again.err.empty());
    }
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

TEST_CASE("The archive for a source the set-up writes is the one in the machine's own apt sources", "[cpu][setup]") {
    const std::string machine = fakeMachine("apt-sources", 0);
    const std::string noSource =
        "setup: no apt source for bookworm with main found in " + machine + "/root/etc/apt/sources.list, " + machine +
        "/root/etc/apt/sources.list.d/*.list or " + machine +
        "/root/etc/apt/sources.list.d/*.sources, so the official archive http://deb.debian.org/debian is used.";

    SECTION("a deb822 file naming a local mirror: the stanza of the release, not its -security one") {
        onRoot(machine, "etc/apt/sources.list.d/debian.sources", kDebianSources);
        const RunResult r = aptMirror(machine, "bookworm");
        CHECK(r.exitCode == 0);
        CHECK(r.out == "http://mirror.invalid/debian\n");
        CHECK(r.err.empty());
    }
    SECTION("a one-line sources.list, with options and a deb-src line before it") {
        onRoot(machine, "etc/apt/sources.list",
               "# deb http://commented.invalid/debian bookworm main\n"
               "deb-src http://apt.example.test/debian-src bookworm main\n"
               "deb http://apt.example.test/debian-security bookworm-security main\n"
               "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
               "http://apt.example.test/debian bookworm main contrib\n");
        const RunResult r = aptMirror(machine, "bookworm");
        CHECK(r.exitCode == 0);
        CHECK(r.out == "http://apt.example.test/debian\n");
        CHECK(r.err.empty());
    }
    SECTION("a file with only the -security stanza, and the release's stanza in another file") {
        onRoot(
            machine, "etc/apt/sources.list.d/a-security.sources",
            "Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\nComponents: main\n");
        onRoot(machine, "etc/apt/sources.list.d/b-main.sources",
               "Types: deb\nURIs: http://apt.example.test/debian\nSuites: bookworm\nComponents: main non-free\n");
        const RunResult r = aptMirror(machine, "bookworm");
        CHECK(r.out == "http://apt.example.test/debian\n");
        CHECK(r.err.empty());
    }
    SECTION("only a -security stanza: no source for the release, said in one sentence") {
        onRoot(
            machine, "etc/apt/sources.list.d/debian.sources",
            "Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\nComponents: main\n");
        const RunResult r = aptMirror(machine, "bookworm");
        CHECK(r.exitCode == 0);
        CHECK(r.out == "http://deb.debian.org/debian\n");
        CHECK(r.err == noSource + "\n");
    }
    SECTION("no sources at all: the official archive, only with the sentence naming the files looked at") {
        const RunResult r = aptMirror(machine, "bookworm");
        CHECK(r.exitCode == 0);
        CHECK(r.out == "http://deb.debian.org/debian\n");
        CHECK(r.err == noSource + "\n");
    }
}

TEST_CASE("On Debian 12 behind a local mirror, the set-up adds bookworm-backports from that mirror", "[cpu][setup]") {
    const std::string machine = fakeMachine("backports-mirror", 0);
    onRoot(machine, "etc/os-release", "ID=debian\nVERSION_CODENAME=bookworm\n");
    onRoot(machine, "etc/apt/sources.list.d/debian.sources", kDebianSources);
    const RunResult r = run(repoRoot() + "/common/tools/setup.sh", onMachine(machine, {"catch2"}));
    CHECK(r.exitCode == 1);  // the stand-in apt-get is offline
    CHECK(readText(machine + "/root/etc/apt/sources.list.d/bookworm-backports.list") ==
          "deb http://mirror.invalid/debian bookworm-backports main\n");
    CHECK_FALSE(contains(r.err, "no apt source"));
    CHECK(contains(r.err, "make test needs Catch2 v3 (>= 3.4), and it could not be installed: apt-get failed"));
}

TEST_CASE("fetch-cuda-headers asks the machine's Debian mirror for the suite the toolkit needs, or says why not",
          "[cpu][setup]") {
    const std::string machine = fakeMachine("fetch-headers", 0);
    // An apt-get that shows the source list it was given, then fails as an offline one does.
    REQUIRE(
        writeFile(machine + "/bin/apt-get",
                  "#!/bin/sh\nfor a; do case \"$a\" in Dir::Etc::SourceList=*) echo \"source: $(cat \"${a#*=}\")\";;"
                  " esac; done\necho 'E: offline'\nexit 100\n",
                  0755));
    const std::string dest = machine + "/headers";
    const auto fetch = [&](const std::string& version, const std::string& debianMirror = "") {
        RunOptions options = onMachine(machine, {version, dest});
        if (!debianMirror.empty()) options.setEnv["DEBIAN_MIRROR"] = debianMirror;
        return run(repoRoot() + "/common/tools/fetch-cuda-headers.sh", options);
    };
    const std::string keyring = "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ";
    const std::string advice =
        "run it again with DEBIAN_MIRROR=URI, a Debian archive (mirror or proxy) this machine can reach.";

    SECTION("on Debian 13 behind a mirror: that mirror, with Debian 12's suite for 11.8") {
        onRoot(machine, "etc/os-release", "ID=debian\nVERSION_CODENAME=trixie\n");
        onRoot(machine, "etc/apt/sources.list.d/debian.sources",
               "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: trixie trixie-updates\nComponents: main\n");
        const RunResult r = fetch("11.8");
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "source: " + keyring + "http://mirror.invalid/debian bookworm main non-free\n"));
        CHECK(contains(
            r.err,
            "fetch-cuda-headers: apt-get could not fetch bookworm from http://mirror.invalid/debian; " + advice));
        CHECK_FALSE(contains(r.err, "official"));
    }
    SECTION("on Debian without sources: the official archive, said first") {
        onRoot(machine, "etc/os-release", "ID=debian\nVERSION_CODENAME=bookworm\n");
        const RunResult r = fetch("12.4");
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "fetch-cuda-headers: no apt source for bookworm with main found in " + machine +
                                  "/root/etc/apt/sources.list, "));
        CHECK(contains(r.err, "source: " + keyring + "http://deb.debian.org/debian trixie main non-free\n"));
    }
    SECTION("on Ubuntu: its archive does not carry Debian's packages, which the message says") {
        onRoot(machine, "etc/os-release", "ID=ubuntu\nVERSION_CODENAME=noble\n");
        onRoot(machine, "etc/apt/sources.list.d/ubuntu.sources",
               "Types: deb\nURIs: http://apt.example.test/ubuntu\nSuites: noble noble-updates\nComponents: main\n");
        const RunResult r = fetch("11.8");
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err,
                       "fetch-cuda-headers: this machine is ubuntu, not Debian, and its archive does not carry "
                       "Debian's nvidia-cuda-dev, so the official Debian archive http://deb.debian.org/debian "
                       "is used (DEBIAN_MIRROR=URI names a Debian mirror or proxy instead)."));
        CHECK(contains(r.err, "source: " + keyring + "http://deb.debian.org/debian bookworm main non-free\n"));
        CHECK_FALSE(contains(r.err, "apt.example.test"));
    }
    SECTION("DEBIAN_MIRROR names the archive, without looking at the machine's sources") {
        onRoot(machine, "etc/os-release", "ID=ubuntu\nVERSION_CODENAME=noble\n");
        const RunResult r = fetch("12.4", "http://apt.example.test/debian/");
        CHECK(r.exitCode == 1);
        CHECK(contains(r.err, "source: " + keyring + "http://apt.example.test/debian trixie main non-free\n"));
        CHECK_FALSE(contains(r.err, "official"));
        CHECK_FALSE(contains(r.err, "no apt source"));
    }
}
