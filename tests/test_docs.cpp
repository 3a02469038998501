// Docs that cannot drift: every lesson has both READMEs with the template's
// sections; the Expected output block is the same in both and matches what the
// program really prints on a GPU, up to the parts that truly vary.
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

std::string readText(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// The text between the expected-output markers, without the ```text fence.
std::string expectedBlock(const std::string& readme) {
    const std::string begin = "<!-- expected-output:begin -->\n```text\n";
    const std::string end = "\n```\n<!-- expected-output:end -->";
    const auto from = readme.find(begin);
    const auto to = readme.find(end);
    if (from == std::string::npos || to == std::string::npos || to < from + begin.size()) return "";
    return readme.substr(from + begin.size(), to - from - begin.size());
}

// Replaces what differs from run to run or machine to machine with a placeholder.
std::string normalise(const std::string& line) {
    static const std::vector<std::pair<std::regex, std::string>> rules = {
        {std::regex("0x[0-9a-fA-F]{6,}"), "<address>"},
        {std::regex("GPU-[0-9a-f]{8}-[0-9a-f-]+"), "<uuid>"},
        {std::regex("[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-9a-fA-F]"), "<pci-bus-id>"},
        {std::regex("(name: ).*"), "$1<device-name>"},
        {std::regex("-?[0-9]+(\\.[0-9]+)?(e[-+]?[0-9]+)? ?(ns|us|µs|ms|s|GB/s|TB/s|GiB|MiB|KiB|bytes|%|x)\\b"),
         "<measured>"},
        {std::regex("[ \t]+$"), ""},
    };
    std::string result = line;
    for (const auto& [pattern, replacement] : rules) result = std::regex_replace(result, pattern, replacement);
    return result;
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
        // stdout and stderr together, as a terminal shows them.
        RunOptions options;
        options.args = {"-c", "exec \"$0\" 2>&1", lessonBinary(folder)};
        const RunResult r = run("/bin/sh", options);
        if (r.exitCode == course::kExitNotApplicable) continue;  // its README shows the SKIP run
        auto actual = lines(r.out);
        // The README block starts at the program's first non-blank line.
        while (!actual.empty() && actual.front().empty()) actual.erase(actual.begin());
        const auto expected = lines(expectedBlock(readText(repoRoot() + "/" + folder + "/README.md")));
        // The block starts at the program's first line; compare line by line after normalising.
        const size_t count = std::max(actual.size(), expected.size());
        for (size_t i = 0; i < count; ++i) {
            const std::string want = i < expected.size() ? normalise(expected[i]) : "<missing>";
            const std::string got = i < actual.size() ? normalise(actual[i]) : "<missing>";
            INFO(folder << " line " << (i + 1));
            REQUIRE(want == got);
        }
    }
}
