// Docs that cannot drift: every lesson has both READMEs with the template's
// sections; the Expected output block is the same in both and matches what the
// program really prints on a GPU, up to the parts that truly vary.
#include <unistd.h>
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/harness.h"

using namespace harness;

namespace {

// The text between the expected-output markers, without the ```text fence.
std::string expectedBlock(const std::string& readme) {
    return markedBlock(readme, "expected-output", "text");
}

// "NAME | devices: N" from the README's "<!-- captured-on: NAME | devices: N -->" marker.
std::string capturedOn(const std::string& readme) {
    static const std::regex marker("<!-- captured-on: (.*?) -->");
    std::smatch match;
    return std::regex_search(readme, match, marker) ? std::string(match[1]) : "";
}

// This machine in the marker's form: the name of device 0 and the number of devices.
std::string thisMachine() {
    return driver().deviceName(0) + " | devices: " + std::to_string(driver().deviceCount());
}

// What the lesson's programs print, stdout and stderr together as a terminal shows them, in
// the form of common/tools/capture-output.sh (a header line per program when there are several),
// from the outputs given in the lesson's program order. `allSkipped` tells whether every program
// exited 77.
std::string lessonOutput(const std::string& folder, const std::vector<RunResult>& runs, bool& allSkipped) {
    const auto programs = lessonPrograms(folder);
    std::string text;
    allSkipped = true;
    for (size_t i = 0; i < programs.size() && i < runs.size(); ++i) {
        if (programs.size() > 1) text += (i > 0 ? "\n" : "") + ("################ " + folder + "/" + programs[i] + " ################\n");
        allSkipped = allSkipped && runs[i].exitCode == course::kExitNotApplicable;
        text += runs[i].out;
    }
    return text;
}

// The course's own build of a lesson, as a terminal shows it (the shared runs of the harness).
std::string courseOutput(const std::string& folder, bool& allSkipped) {
    std::vector<RunResult> runs;
    for (const auto& program : lessonPrograms(folder)) {
        RunResult terminal;
        terminal.out = terminalOutput(lessonBinary(folder, program));
        // The exit code of the plain run of the same program: both are the same deterministic run.
        terminal.exitCode = defaultRun(folder, program).exitCode;
        runs.push_back(terminal);
    }
    return lessonOutput(folder, runs, allSkipped);
}

// Replaces what differs from run to run or machine to machine with a placeholder.
std::string normalise(const std::string& line) {
    static const std::vector<std::pair<std::regex, std::string>> rules = {
        {std::regex("0x[0-9a-fA-F]{6,}"), "<address>"},
        {std::regex("GPU-[0-9a-f]{8}-[0-9a-f-]+"), "<uuid>"},
        {std::regex("[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-9a-fA-F]"), "<pci-bus-id>"},
        {std::regex("(name: ).*"), "$1<device-name>"},
        // The check macro's file:line: moves with every edit above the call, says nothing new.
        {std::regex("([A-Za-z0-9_]+\\.(cpp|h|cu)):[0-9]+"), "$1:<line>"},
        {std::regex("-?[0-9]+(\\.[0-9]+)?(e[-+]?[0-9]+)? ?(ns|us|µs|ms|s|GB/s|TB/s|GiB|MiB|KiB|bytes|%|x)(?![A-Za-z0-9])"),
         "<measured>"},
        // Lesson 09's favoured way is decided by timings, with a margin: its value may differ from
        // run to run on the same machine ("too close to call" near the margin), so only the label
        // is compared.
        {std::regex("^(favoured (on this device|because): ).*"), "$1<measured>"},
        {std::regex("[ \t]+$"), ""},
    };
    std::string result = line;
    for (const auto& [pattern, replacement] : rules) result = std::regex_replace(result, pattern, replacement);
    return result;
}

// The label of a "label: value" line (digits as N, so "device 1" matches "device 0"), or the
// line itself for steps, headers and results. Empty for other lines.
std::string labelOf(const std::string& line) {
    if (line.rfind("== Step", 0) == 0 || line.rfind("################", 0) == 0 || line.rfind("Result = ", 0) == 0)
        return std::regex_replace(line, std::regex("Result = (PASS|FAIL|SKIP).*"), "Result = $1");
    const auto colon = line.find(": ");
    if (colon == std::string::npos || colon == 0) return "";
    return std::regex_replace(line.substr(0, colon), std::regex("[0-9]+"), "N");
}

// Labels in the order they first appear: what stays the same from one machine to another.
std::vector<std::string> labelsInOrder(const std::vector<std::string>& output) {
    std::vector<std::string> labels;
    for (const auto& line : output) {
        const std::string label = labelOf(line);
        if (!label.empty() && std::find(labels.begin(), labels.end(), label) == labels.end()) labels.push_back(label);
    }
    return labels;
}

const char* const kEnglishSections[] = {"## Goal",        "## Concepts", "## API calls introduced",
                                        "## Walkthrough", "## Run it",   "## Expected output",
                                        "## Pitfalls",    "## Exercises"};
const char* const kChineseSections[] = {"## 目标", "## 概念",     "## 引入的 API", "## 代码走读",
                                        "## 运行", "## 预期输出", "## 常见陷阱",   "## 练习"};

}  // namespace

TEST_CASE("Every lesson has an English and a Chinese README with the template's sections in order", "[cpu][docs]") {
    const auto folders = lessonFolders();
    REQUIRE(folders.size() >= 2);
    for (const auto& folder : folders) {
        for (const auto& [file, sections] :
             {std::pair{"README.md", kEnglishSections}, std::pair{"README.zh-CN.md", kChineseSections}}) {
            INFO(folder << "/" << file);
            const std::string text = readText(repoRoot() + "/" + folder + "/" + file);
            REQUIRE_FALSE(text.empty());
            size_t at = 0;
            for (int i = 0; i < 8; ++i) {
                INFO("section " << sections[i]);
                const auto found = text.find(std::string("\n") + sections[i] + "\n", at);
                CHECK(found != std::string::npos);
                if (found != std::string::npos) at = found;
            }
            CHECK(contains(text, "make run-" + folder.substr(0, 2)));
            CHECK(contains(text, "```mermaid"));
        }
    }
}

TEST_CASE("Both READMEs of a lesson carry the same real expected output", "[cpu][docs]") {
    for (const auto& folder : lessonFolders()) {
        INFO(folder);
        const std::string english = expectedBlock(readText(repoRoot() + "/" + folder + "/README.md"));
        const std::string chinese = expectedBlock(readText(repoRoot() + "/" + folder + "/README.zh-CN.md"));
        CHECK_FALSE(english.empty());
        CHECK(contains(english, "Result = "));
        CHECK(english == chinese);
    }
}

TEST_CASE("Every make run-NN named in the docs names a lesson that exists", "[cpu][docs]") {
    const auto folders = lessonFolders();
    std::vector<std::string> documents = {"README.md", "README.zh-CN.md", "CONTRIBUTING.md"};
    for (const auto& folder : folders) {
        documents.push_back(folder + "/README.md");
        documents.push_back(folder + "/README.zh-CN.md");
    }
    const std::regex runTarget("make run-([0-9][0-9])");
    int seen = 0;
    for (const auto& document : documents) {
        const std::string text = readText(repoRoot() + "/" + document);
        for (std::sregex_iterator it(text.begin(), text.end(), runTarget), end; it != end; ++it) {
            const std::string number = (*it)[1];
            INFO(document << " names make run-" << number);
            CHECK(std::any_of(folders.begin(), folders.end(),
                              [&](const std::string& f) { return f.rfind(number + "-", 0) == 0; }));
            ++seen;
        }
    }
    CHECK(seen >= static_cast<int>(folders.size()));
}

TEST_CASE("Each lesson's README expected output matches what the lesson prints on this GPU", "[gpu][docs]") {
    requireGpu();
    for (const auto& folder : lessonFolders()) {
        const std::string readme = readText(repoRoot() + "/" + folder + "/README.md");
        bool allSkipped = false;
        auto actual = lines(courseOutput(folder, allSkipped));
        if (allSkipped) continue;  // its README shows the run on hardware where it applies
        // The README block starts at the program's first non-blank line.
        while (!actual.empty() && actual.front().empty()) actual.erase(actual.begin());
        const auto expected = lines(expectedBlock(readme));
        const std::string captured = capturedOn(readme);
        INFO(folder << ": README captured on '" << captured << "', this machine is '" << thisMachine() << "'");
        if (captured == thisMachine()) {
            // The machine the README was captured on: line by line, after normalising.
            // The first line that differs is reported; the other lessons are still compared.
            const size_t count = std::max(actual.size(), expected.size());
            for (size_t i = 0; i < count; ++i) {
                const std::string want = i < expected.size() ? normalise(expected[i]) : "<missing>";
                const std::string got = i < actual.size() ? normalise(actual[i]) : "<missing>";
                INFO(folder << " line " << (i + 1));
                CHECK(want == got);
                if (want != got) break;
            }
        } else {
            // Another GPU model or device count: the same steps, labels in the same order (a block
            // per device counts once) and the same result; the values belong to the machine.
            std::vector<std::string> normalisedActual;
            std::vector<std::string> normalisedExpected;
            for (const auto& line : actual) normalisedActual.push_back(normalise(line));
            for (const auto& line : expected) normalisedExpected.push_back(normalise(line));
            CHECK(labelsInOrder(normalisedActual) == labelsInOrder(normalisedExpected));
            CHECK_FALSE(expected.empty());
            CHECK(labelOf(actual.empty() ? "" : actual.back()) == labelOf(expected.empty() ? "" : expected.back()));
        }
    }
}

TEST_CASE("Every README marks the machine its expected output was captured on", "[cpu][docs]") {
    const std::regex form(".+ \\| devices: [0-9]+");
    for (const auto& folder : lessonFolders()) {
        INFO(folder);
        const std::string english = capturedOn(readText(repoRoot() + "/" + folder + "/README.md"));
        CHECK(std::regex_match(english, form));
        CHECK(english == capturedOn(readText(repoRoot() + "/" + folder + "/README.zh-CN.md")));
    }
}

TEST_CASE("Labels, not values, are what the docs test compares across machines", "[cpu][docs]") {
    const std::vector<std::string> oneGpu = {"== Step 1: devices ==", "device count: 1", "device 0 name: H100",
                                             "Result = PASS"};
    const std::vector<std::string> twoGpus = {"== Step 1: devices ==", "device count: 2", "device 0 name: H200",
                                              "device 1 name: H200", "Result = PASS"};
    CHECK(labelsInOrder(oneGpu) == labelsInOrder(twoGpus));
    const std::vector<std::string> reordered = {"== Step 1: devices ==", "device 0 name: H100", "device count: 1",
                                                "Result = PASS"};
    CHECK_FALSE(labelsInOrder(oneGpu) == labelsInOrder(reordered));
    CHECK(labelOf("Result = PASS") != labelOf("Result = FAIL"));
    CHECK(labelOf("section clusters: SKIP (needs 9.0)") == labelOf("section clusters: ran"));
}

// Copies the lesson folder and common/ into an empty folder and runs exactly the commands its
// README shows; every program of the lesson must come out of it.
TEST_CASE("Each lesson builds outside the course with the command its README shows", "[cpu][docs][outside][outside-build]") {
    // Every lesson's commands run at once (harness::startOutsideBuilds), then each is checked.
    const auto folders = lessonFolders();
    const auto& results = outsideBuildResults();
    REQUIRE(results.size() == folders.size());
    for (size_t i = 0; i < folders.size(); ++i) {
        const std::string& folder = folders[i];
        INFO(folder);
        const std::string commands = buildOutsideBlock(readText(repoRoot() + "/" + folder + "/README.md"));
        REQUIRE_FALSE(commands.empty());
        CHECK(commands == buildOutsideBlock(readText(repoRoot() + "/" + folder + "/README.zh-CN.md")));
        attachToReport(results[i]);
        CHECK(results[i].exitCode == 0);
        for (const auto& program : lessonPrograms(folder)) {
            INFO("program " << program);
            CHECK(access((outsideDir(folder) + "/" + program).c_str(), X_OK) == 0);
        }
    }
}

TEST_CASE("Programs built outside the course run on this GPU with the course's result", "[gpu][docs][outside]") {
    requireGpu();
    const auto& builds = outsideBuildResults();
    // Every outside-built program, run the way the course's own are (runPrograms: in parallel
    // where the lesson allows it), and started from / too.
    std::vector<Job> jobs;
    for (const auto& folder : lessonFolders())
        for (const auto& program : lessonPrograms(folder)) {
            Job job{outsideDir(folder) + "/" + program, {}};
            job.options.workingDir = "/";
            jobs.push_back(job);
        }
    const auto results = runPrograms(jobs);
    size_t next = 0;
    const auto folders = lessonFolders();
    for (size_t f = 0; f < folders.size(); ++f) {
        const std::string& folder = folders[f];
        INFO(folder);
        const auto programs = lessonPrograms(folder);
        const std::vector<RunResult> runs(results.begin() + static_cast<long>(next),
                                          results.begin() + static_cast<long>(next + programs.size()));
        next += programs.size();
        if (builds[f].exitCode != 0) FAIL("the outside build failed (the [outside-build] test shows how)");
        bool outsideSkipped = false;
        bool courseSkipped = false;
        const auto outside = lines(lessonOutput(folder, runs, outsideSkipped));
        const auto course = lines(courseOutput(folder, courseSkipped));
        CHECK(outsideSkipped == courseSkipped);
        std::vector<std::string> outsideResults;
        std::vector<std::string> courseResults;
        for (const auto& line : outside)
            if (line.rfind("Result = ", 0) == 0) outsideResults.push_back(labelOf(line));
        for (const auto& line : course)
            if (line.rfind("Result = ", 0) == 0) courseResults.push_back(labelOf(line));
        CHECK_FALSE(courseResults.empty());
        CHECK(outsideResults == courseResults);
    }
}

TEST_CASE("The docs comparison replaces measured numbers, percentages and file:line, nothing else", "[cpu][docs]") {
    CHECK(normalise("bench: H2D pinned vs PCIe link = 86.8 %") == normalise("bench: H2D pinned vs PCIe link = 87.5 %"));
    CHECK(normalise("copy took 1.25 ms, 3.5 µs each") == normalise("copy took 2.5 ms, 4 µs each"));
    CHECK(normalise("at:    push_pop.cpp:57") == normalise("at:    push_pop.cpp:61"));
    CHECK(normalise("device count: 1") != normalise("device count: 2"));
    CHECK(normalise("Result = PASS") != normalise("Result = FAIL"));
    CHECK(normalise("speed-up: 5.4 x faster") == normalise("speed-up: 2.0 x faster"));
    CHECK(normalise("exit code: 77") != normalise("exit code: 1"));
    CHECK(normalise("favoured on this device: dGPU way") == normalise("favoured on this device: too close to call"));
    CHECK(normalise("favoured because: the fastest") == normalise("favoured because: within the margin"));
}
