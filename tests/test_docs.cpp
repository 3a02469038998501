// Docs that cannot drift: every lesson has both READMEs with the template's
// sections; the Expected output block is the same in both and matches what the
// program really prints on a GPU, up to the parts that truly vary.
#include <unistd.h>
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <map>
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

// "NAME | devices: N" from the "<!-- captured-on: NAME | devices: N -->" marker of the README's
// expected output (the marker just above its begin marker).
std::string capturedOn(const std::string& readme) {
    static const std::regex marker("<!-- captured-on: (.*?) -->\n<!-- expected-output:begin -->");
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

// A lesson's make-bench block: what common/tools/fill-expected-output.py --bench writes between
// "<!-- bench-output:begin -->" and "<!-- bench-output:end -->" (its captured-on marker, a line of
// prose in the README's language, the ```text fence), as the marker line and the fenced text, the
// part that must be the same in both READMEs. Empty when the README has none.
std::string benchBlock(const std::string& readme) {
    static const std::regex block(
        "<!-- bench-output:begin -->\n(<!-- captured-on: .*? -->)\n[^\n]*\n```text\n([\\s\\S]*?)\n```\n<!-- "
        "bench-output:end -->");
    std::smatch match;
    return std::regex_search(readme, match, block) ? std::string(match[1]) + "\n" + std::string(match[2]) : "";
}

// ---------------------------------------------------------------------------------------------
// Per-GPU figures in prose. A sentence of a README (outside code fences) that names a GPU model may
// quote a figure only where a captured ```text block of that model on the same page holds it, its
// "<!-- captured-on: NAME ... -->" marker naming the model: a figure measured once on one GPU must
// be the one that the page shows that GPU printing. In a table, each cell is a sentence, headed by
// the GPU names of its column's header. A figure: a decimal number, a number with thousands
// separators, or a number followed by a unit (ns us µs ms s GB/s TB/s KiB MiB GiB bytes x × %
// times 倍 字节); the first number of a range ("31 to 48 µs") takes the range's unit. Not figures:
// versions, header citations, products and sizes (8 × 132), GPU counts (2×H200), intervals
// ([0.0, 1.0]) and quotations ("…", `…`) that hold no number with a unit. A block holds a figure
// when it has the same number (separators dropped) standing alone, followed by the same unit where
// the prose gives one.
// The rule is a heuristic, matched byte by byte (ASCII classes): where it takes a real non-figure
// for a figure, improve the rule; it must never let a measured per-GPU value through.

const std::string kModels =
    "(H100|H200|A100|GH200|GB200|B200|L40S?|L4|T4|V100|A10|RTX ?[0-9]{4}|Orin|Thor|Xavier)s?\\b";
const std::string kUnits = "(GB/s|TB/s|KiB|MiB|GiB|bytes|times|ns|us|µs|ms|s|x)(?![A-Za-z0-9_])| ?(×|%|倍|字节)";

struct Figure {
    std::string number;  // without thousands separators
    std::string unit;    // µs as us, × times 倍 as x, 字节 as bytes; empty when none
    bool operator==(const Figure&) const = default;
};

// The GPU models a text names.
std::vector<std::string> modelsIn(const std::string& text) {
    static const std::regex model("\\b" + kModels);
    std::vector<std::string> found;
    for (std::sregex_iterator it(text.begin(), text.end(), model), end; it != end; ++it) found.push_back((*it)[1]);
    return found;
}

// The unit right after a number, if any, as Figure::unit holds it; empty when none.
bool unitAt(const std::string& after, std::string& unit) {
    static const std::regex pattern(" ?" + kUnits);
    static const std::map<std::string, std::string> canonical = {
        {"µs", "us"}, {"×", "x"}, {"times", "x"}, {"倍", "x"}, {"字节", "bytes"}};
    std::smatch match;
    if (!std::regex_search(after, match, pattern, std::regex_constants::match_continuous)) return false;
    unit = match[1].matched ? match[1] : match[2];
    if (canonical.count(unit)) unit = canonical.at(unit);
    return true;
}

// Every number of a text that stands alone (not part of a name such as H100, x16 or 12.8.1), with
// the unit that follows it; with `figuresOnly`, only the figures.
std::vector<Figure> numbersIn(const std::string& text, bool figuresOnly) {
    static const std::regex number("[0-9]{1,3}(?:,[0-9]{3})+(?:\\.[0-9]+)?(?![0-9])|[0-9]+(?:\\.[0-9]+)?");
    static const std::regex glued("[A-Za-z0-9_]|[.,][0-9]");
    static const std::regex rangeTo("\\s*(?:to|–|-|~|到|至)\\s*");
    const auto here = std::regex_constants::match_continuous;
    std::vector<Figure> found;
    for (std::sregex_iterator it(text.begin(), text.end(), number), end; it != end; ++it) {
        const auto at = static_cast<size_t>(it->position());
        const char before = at > 0 ? text[at - 1] : ' ';
        if (std::isalnum(static_cast<unsigned char>(before)) || std::string("_.:/-").find(before) != std::string::npos)
            continue;
        const std::string digits = it->str();
        const std::string after = text.substr(at + digits.size(), 40);
        std::string unit;
        std::smatch match;
        if (!unitAt(after, unit)) {
            if (std::regex_search(after, match, glued, here)) continue;
            // The first number of a range takes the range's unit: "31 to 48 µs".
            if (std::regex_search(after, match, rangeTo, here)) {
                const std::string rest = after.substr(static_cast<size_t>(match.length()));
                std::smatch next;
                if (std::regex_search(rest, next, number, here))
                    unitAt(rest.substr(static_cast<size_t>(next.length())), unit);
            }
        }
        const bool figure = digits.find_first_of(".,") != std::string::npos || !unit.empty();
        if (figuresOnly && !figure) continue;
        std::string plain;
        std::copy_if(digits.begin(), digits.end(), std::back_inserter(plain), [](char c) { return c != ','; });
        found.push_back({plain, unit});
    }
    return found;
}

// The figures a sentence quotes: its numbers without versions, citations, products, GPU counts,
// intervals and quotations that hold no number with a unit.
std::vector<Figure> figuresIn(const std::string& sentence) {
    const std::string version = "[0-9]+(?:\\.[0-9]+)*(?:\\.x)?";
    const std::string versions = version + "(?:\\s?(?:–|-)\\s?" + version + ")?";
    static const std::regex excluded(
        "[\\w./-]*\\.(?:h|hpp|cpp|cu|md|py|sh|txt|mk):[0-9]+(?:-[0-9]+)?"
        "|\\b(?:CUDA|driver|drivers|JetPack|R|sm_|compute_|capability|Catch2|g\\+\\+|clang|C\\+\\+|Ubuntu|Debian"
        "|version|versions|PCIe|gen|v|cuda-gdb|nvcc|glibc|Python)\\s?(?:(?:≥|>=|≤|<=)\\s?)?" +
        versions + "|(?:驱动|计算能力|版本|≥|>=|≤|<=)\\s?" + versions +
        "|[0-9]+\\.[0-9]+ (?:headers|or newer|and newer|drivers?|toolkits?)|[0-9]+\\.[0-9]+\\.[0-9]+"
        "|[0-9]+ ?(?:x|×) ?(?:NVIDIA )?(?=" +
        kModels +
        ")"
        "|[0-9]+(?: ?(?:x|×) ?[0-9]+)+(?![0-9.])"
        "|[\\[(][0-9.]+, ?[0-9.]+[\\])]");
    static const std::regex quoted("`[^`]*`|\"[^\"]*\"|“(?:(?!”)[\\s\\S])*”");
    static const std::regex figureInside("[0-9]{1,3},[0-9]{3}|[0-9](?: ?" + kUnits + ")");
    static const std::regex decimal("[0-9]+\\.[0-9]+");
    const std::string text = std::regex_replace(sentence, excluded, " ");
    std::string kept;
    size_t from = 0;
    for (std::sregex_iterator it(text.begin(), text.end(), quoted), end; it != end; ++it) {
        const std::string quote = it->str();
        const bool keep =
            std::regex_search(quote, figureInside) || (quote[0] == '`' && std::regex_search(quote, decimal));
        kept += text.substr(from, static_cast<size_t>(it->position()) - from) + (keep ? quote : " ");
        from = static_cast<size_t>(it->position() + it->length());
    }
    return numbersIn(kept + text.substr(from), true);
}

// The cells of a table row.
std::vector<std::string> cellsOf(std::string row) {
    row = trim(row);
    row = row.substr(row.find_first_not_of('|') == std::string::npos ? row.size() : row.find_first_not_of('|'));
    row = row.substr(0, row.find_last_not_of('|') + 1);
    std::vector<std::string> cells;
    std::stringstream stream(row);
    for (std::string cell; std::getline(stream, cell, '|');) cells.push_back(cell);
    return cells;
}

// A paragraph's sentences; in a table, each cell after the GPU names of its column's header cell.
std::vector<std::string> sentencesOf(const std::string& paragraph) {
    std::vector<std::string> sentences;
    const auto rows = lines(paragraph);
    if (!rows.empty() && trim(rows[0]).rfind('|', 0) == 0) {
        const auto header = cellsOf(rows[0]);
        for (const auto& row : rows) {
            const auto cells = cellsOf(row);
            for (size_t i = 0; i < cells.size(); ++i) {
                std::string models;
                for (const auto& model : modelsIn(i < header.size() ? header[i] : "")) models += model + " ";
                sentences.push_back(models + cells[i]);
            }
        }
        return sentences;
    }
    static const std::regex boundary(
        "([.;:!?])\\s+(?=[A-Z(*`\"]|cuda\\.h)|。|；|！|？|\\n(?=\\s*(?:[-*|]|[0-9]+\\.)\\s)");
    size_t from = 0;
    const auto add = [&](size_t to) {
        const std::string sentence = paragraph.substr(from, to - from);
        if (sentence.find_first_not_of(" \t\n") != std::string::npos) sentences.push_back(sentence);
    };
    for (std::sregex_iterator it(paragraph.begin(), paragraph.end(), boundary), end; it != end; ++it) {
        add(static_cast<size_t>(it->position()) + ((*it)[1].matched ? 1 : 0));
        from = static_cast<size_t>(it->position() + it->length());
    }
    add(paragraph.size());
    return sentences;
}

// A README's captured blocks (marker, text) and its prose paragraphs (first line, text): a heading
// is a paragraph of its own; comments and fenced blocks are not prose.
struct Page {
    std::vector<std::pair<std::string, std::string>> captured;
    std::vector<std::pair<size_t, std::string>> paragraphs;
};
Page pageOf(const std::string& readme) {
    static const std::regex marker("<!-- captured-on: (.*?) -->");
    const auto text = lines(readme);
    Page page;
    std::string capturedOn;  // the marker that the next fence belongs to
    std::string paragraph;
    size_t first = 0;
    const auto close = [&] {
        if (!paragraph.empty()) page.paragraphs.emplace_back(first, paragraph);
        paragraph.clear();
    };
    for (size_t i = 0; i < text.size(); ++i) {
        const std::string& line = text[i];
        const std::string trimmed = trim(line);
        std::smatch match;
        if (std::regex_search(line, match, marker)) capturedOn = match[1];
        if (trimmed.rfind("```", 0) == 0) {
            close();
            size_t j = i + 1;
            std::string block;
            for (; j < text.size() && trim(text[j]).rfind("```", 0) != 0; ++j) block += text[j] + "\n";
            if (!capturedOn.empty() && trimmed == "```text") page.captured.emplace_back(capturedOn, block);
            capturedOn.clear();
            i = j;
        } else if (trimmed.empty() || trimmed[0] == '#') {
            close();
            if (!trimmed.empty()) page.paragraphs.emplace_back(i + 1, line);
        } else if (trimmed.rfind("<!--", 0) != 0) {
            if (paragraph.empty()) first = i + 1;
            paragraph += (paragraph.empty() ? "" : "\n") + line;
        }
    }
    close();
    return page;
}

// "line N: FIGURE | sentence" for every figure of the README's prose that no captured block of the
// GPUs its sentence names holds; empty when the README keeps the rule.
std::vector<std::string> uncapturedFigures(const std::string& readme) {
    const Page page = pageOf(readme);
    std::vector<std::string> found;
    for (const auto& [line, paragraph] : page.paragraphs)
        for (const auto& sentence : sentencesOf(paragraph)) {
            const auto models = modelsIn(sentence);
            if (models.empty()) continue;
            std::string blocks;
            for (const auto& [marker, block] : page.captured)
                if (std::any_of(models.begin(), models.end(),
                                [&](const std::string& m) { return contains(marker, m); }))
                    blocks += block;
            const auto held = numbersIn(blocks, false);
            // The sentence's start, cut before a character rather than inside one (UTF-8).
            size_t cut = std::min<size_t>(sentence.size(), 120);
            while (cut < sentence.size() && (static_cast<unsigned char>(sentence[cut]) & 0xC0) == 0x80) --cut;
            const std::string start = std::regex_replace(sentence.substr(0, cut), std::regex("\\s+"), " ");
            for (const auto& figure : figuresIn(sentence)) {
                const bool inBlock = std::any_of(held.begin(), held.end(), [&](const Figure& h) {
                    return h.number == figure.number && (h.unit == figure.unit || figure.unit.empty());
                });
                if (!inBlock)
                    found.push_back("line " + std::to_string(line) + ": " + figure.number +
                                    (figure.unit.empty() ? "" : " " + figure.unit) + " | " + start);
            }
        }
    return found;
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
        // A block captured on more GPUs than this machine has shows steps this machine skips.
        const auto devicesOf = [](const std::string& marker) {
            const std::string::size_type at = marker.find("devices: ");
            return at == std::string::npos ? 1 : std::atoi(marker.c_str() + at + 9);
        };
        if (devicesOf(captured) > driver().deviceCount()) {
            WARN(folder << ": README captured on '" << captured << "'; this machine has fewer GPUs: not compared");
            continue;
        }
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

TEST_CASE("Prose quotes a per-GPU figure only where a captured block of that GPU on the same page holds it",
          "[cpu][docs]") {
    std::vector<std::string> documents = {"README.md", "README.zh-CN.md"};
    for (const auto& folder : lessonFolders()) {
        documents.push_back(folder + "/README.md");
        documents.push_back(folder + "/README.zh-CN.md");
    }
    for (const auto& document : documents) {
        const auto found = uncapturedFigures(readText(repoRoot() + "/" + document));
        std::string list;
        for (const auto& figure : found) list += "\n  " + figure;
        INFO(document << ": figures no captured block of the GPU named holds:" << list);
        CHECK(found.empty());
    }
}

TEST_CASE("The per-GPU figure rule passes what the GPU's own block holds and nothing else", "[cpu][docs]") {
    const std::string page =
        "<!-- captured-on: NVIDIA H100 80GB HBM3 | devices: 1 -->\n<!-- expected-output:begin -->\n```text\n"
        "first launch: 19.2 us\ncopied: 5,570,560 bytes\nratio: 3.48 x\n== Step 14 ==\n```\n<!-- expected-output:end "
        "-->\n\n"
        "<!-- captured-on: NVIDIA H200 | devices: 2 | make bench -->\n```text\nfirst launch: 17.5 us\n```\n\n"
        "```text\nuncaptured: 42.5 us\n```\n\n";
    const auto flagged = [&](const std::string& prose) { return uncapturedFigures(page + prose + "\n").size(); };
    // A figure its GPU's block holds, whatever the spelling of the unit or of the separators.
    CHECK(flagged("On the H100 the first launch took 19.2 µs and copied 5570560 bytes, 3.48× as many.") == 0);
    CHECK(flagged("在 H100 上复制了 5,570,560 字节。") == 0);
    CHECK(flagged("On the H200 the first launch took 17.5 µs.") == 0);
    // Absent from the block, rounded, or only in another GPU's block or in a block with no marker.
    CHECK(flagged("On the H100 the first launch took 19.3 µs.") == 1);
    CHECK(flagged("On the H100 the ratio was about 3 x, and 14 x once.") == 2);
    CHECK(flagged("On the H100 the first launch took 17.5 µs.") == 1);
    CHECK(flagged("On the H100 it was 42.5 µs.") == 1);
    CHECK(flagged("在 H100 上为 5,636,096 字节。") == 1);
    CHECK(flagged("Observed on the H200: 31 to 48 µs.") == 2);
    // A table: the header's GPU names apply to the cells of their column.
    CHECK(flagged("| | H100 | H200 |\n| --- | --- | --- |\n| first launch | 19.2 us | 17.5 us |") == 0);
    CHECK(flagged("| | H100 | H200 |\n| --- | --- | --- |\n| first launch | 17.5 us | 19.2 us |") == 2);
    // Not figures: versions, citations, products, GPU counts, quotations; and sentences naming no GPU.
    CHECK(flagged("The H100 ran CUDA 13.0 and driver 580.159.04 (compute capability ≥ 9.0, PCIe 5.0, 12.4 headers, "
                  "cuda.h:1234-1240, main.cpp:12).") == 0);
    CHECK(flagged("2×H200 and an H100 ran it: 8 × 132 blocks of an 8192 × 8192 image, texels in [0.0, 1.0], "
                  "\"a step of 0.5\".") == 0);
    CHECK(flagged("On the H100 it launched 132 blocks on 16 streams.") == 0);
    CHECK(flagged("The first launch took 99.9 µs.") == 0);
}

TEST_CASE("A lesson's make-bench block is the same in both READMEs and names its GPU", "[cpu][docs]") {
    const std::regex marker("<!-- captured-on: .+ \\| devices: [0-9]+ \\| make bench -->\n[\\s\\S]+");
    for (const auto& folder : lessonFolders()) {
        INFO(folder);
        const std::string english = benchBlock(readText(repoRoot() + "/" + folder + "/README.md"));
        CHECK(english == benchBlock(readText(repoRoot() + "/" + folder + "/README.zh-CN.md")));
        if (!english.empty()) CHECK(std::regex_match(english, marker));
    }
    const std::string sample =
        "<!-- bench-output:begin -->\n<!-- captured-on: NVIDIA H200 | devices: 1 | make bench -->\n"
        "What it printed:\n```text\nbench: x = 1.0 us\n```\n<!-- bench-output:end -->\n";
    CHECK(benchBlock("# Lesson\n" + sample) ==
          "<!-- captured-on: NVIDIA H200 | devices: 1 | make bench -->\nbench: x = 1.0 us");
    CHECK(std::regex_match(benchBlock(sample), marker));
    CHECK(benchBlock("no block here").empty());
}
