// Pages a learner reads: the way in on the first screen, lesson READMEs that read as lessons
// (a short Goal, prose within one sitting, captured output folded, header citations in source
// notes, no maintainer material) and Chinese that reads as Chinese (one paragraph per line,
// full-width quotes, the terms of docs/glossary.md).
#include <catch2/catch_test_macros.hpp>

#include <dirent.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "tests/harness.h"

using namespace harness;

namespace {

struct PageLine {
    size_t number;  // 1-based
    std::string text;
};

bool startsWith(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// The lines a reader reads as text: outside fenced blocks and HTML comments, not blank, and, with
// skipFolded, outside <details> folds. Footnote definitions ("[^1]: ...") are source notes, not prose.
std::vector<PageLine> proseLines(const std::string& page, bool skipFolded) {
    std::vector<PageLine> result;
    bool fenced = false, comment = false;
    int folded = 0;
    const auto rows = lines(page);
    for (size_t i = 0; i < rows.size(); ++i) {
        const std::string row = trim(rows[i]);
        if (startsWith(row, "```")) {
            fenced = !fenced;
            continue;
        }
        if (fenced) continue;
        if (comment) {
            comment = !contains(row, "-->");
            continue;
        }
        if (startsWith(row, "<!--")) {
            comment = !contains(row, "-->");
            continue;
        }
        if (startsWith(row, "<details")) ++folded;
        if (startsWith(row, "</details>")) {
            folded = std::max(0, folded - 1);
            continue;
        }
        if (row.empty() || startsWith(row, "[^") || (skipFolded && folded > 0)) continue;
        result.push_back({i + 1, rows[i]});
    }
    return result;
}

// The Unicode code points of a UTF-8 string.
std::vector<char32_t> codePoints(const std::string& text) {
    std::vector<char32_t> points;
    for (size_t i = 0; i < text.size();) {
        const unsigned char lead = static_cast<unsigned char>(text[i]);
        const int length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        char32_t point = length == 1 ? lead : lead & (0x3F >> (length - 1));
        for (int k = 1; k < length && i + k < text.size(); ++k)
            point = (point << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
        points.push_back(point);
        i += static_cast<size_t>(length);
    }
    return points;
}

// Han characters and the punctuation written between them (CJK and full-width forms).
bool isChinese(char32_t point) {
    return (point >= 0x4E00 && point <= 0x9FFF) || (point >= 0x3400 && point <= 0x4DBF) ||
           (point >= 0x3000 && point <= 0x303F) || (point >= 0xFF00 && point <= 0xFFEF) || point == 0x201C ||
           point == 0x201D;
}

bool hasChinese(const std::string& text) {
    const auto points = codePoints(text);
    return std::any_of(points.begin(), points.end(), isChinese);
}

// A prose line without what is not prose: inline code, link targets, web addresses, and English
// quoted in full-width quotes (a cuda.h quotation kept searchable).
std::string withoutCode(const std::string& line) {
    std::string text = std::regex_replace(line, std::regex("`[^`]*`"), " ");
    text = std::regex_replace(text, std::regex("\\]\\([^)]*\\)"), "]");
    return std::regex_replace(text, std::regex("https?://\\S+"), " ");
}

// English that a Chinese sentence may carry: a quotation in “…” with no Chinese in it (cuda.h, kept
// searchable), a term's English gloss in full-width parentheses (核函数（kernel）), a lesson's folder name
// as a link's text.
std::string withoutQuotedEnglish(const std::string& line) {
    std::string text = std::regex_replace(line, std::regex("\xEF\xBC\x88[A-Za-z0-9 ./_-]+\xEF\xBC\x89"), " ");
    text = std::regex_replace(text, std::regex("\\[[a-z0-9]+(-[a-z0-9]+)+\\]"), " ");
    static const std::regex quoted("\xE2\x80\x9C([^\xE2]*)\xE2\x80\x9D");  // “...” with no other quote inside
    std::string result;
    auto begin = std::sregex_iterator(text.begin(), text.end(), quoted);
    size_t at = 0;
    for (auto it = begin; it != std::sregex_iterator(); ++it) {
        const auto& match = *it;
        if (hasChinese(match[1])) continue;
        result += text.substr(at, static_cast<size_t>(match.position(0)) - at) + " ";
        at = static_cast<size_t>(match.position(0) + match.length(0));
    }
    return result + text.substr(at);
}

struct GlossaryTerm {
    std::string chinese;
    std::vector<std::string> rejected;
    std::vector<std::string> allowedIn;
};

std::vector<std::string> backticked(const std::string& cell) {
    std::vector<std::string> items;
    static const std::regex item("`([^`]+)`");
    for (auto it = std::sregex_iterator(cell.begin(), cell.end(), item); it != std::sregex_iterator(); ++it)
        items.push_back((*it)[1]);
    return items;
}

// docs/glossary.md's table: English | 简体中文 | rejected variants | allowed in.
std::vector<GlossaryTerm> glossary() {
    std::vector<GlossaryTerm> terms;
    for (const auto& row : lines(readText(repoRoot() + "/docs/glossary.md"))) {
        if (!startsWith(row, "| ") || startsWith(row, "| English") || startsWith(row, "| ---")) continue;
        std::vector<std::string> cells;
        size_t at = 1;
        for (size_t bar; (bar = row.find('|', at)) != std::string::npos; at = bar + 1)
            cells.push_back(trim(row.substr(at, bar - at)));
        if (cells.size() < 4) continue;
        terms.push_back({cells[1], backticked(cells[2]), backticked(cells[3])});
    }
    return terms;
}

bool isAscii(const std::string& text) {
    return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// "line N: what" for each place where a Chinese page breaks the page rules; empty when it keeps them.
std::vector<std::string> chineseFaults(const std::string& page, const std::vector<GlossaryTerm>& terms) {
    std::vector<std::string> faults;
    const auto prose = proseLines(page, false);
    for (size_t k = 0; k < prose.size(); ++k) {
        const auto& [number, line] = prose[k];
        const std::string where = "line " + std::to_string(number) + ": ";
        const std::string opening = trim(line).substr(0, 1);
        const bool ownBlock = opening == "#" || opening == "|" || opening == "<";  // a heading, a table row, HTML
        if (!ownBlock && k + 1 < prose.size() && prose[k + 1].number == number + 1) {
            const auto here = codePoints(trim(line)), next = codePoints(trim(prose[k + 1].text));
            if (!here.empty() && !next.empty() && isChinese(here.back()) && isChinese(next.front()))
                faults.push_back(where + "a line break between two Chinese characters (one paragraph per line)");
        }
        const std::string text = withoutCode(line);
        if (!hasChinese(text)) continue;
        if (contains(text, "\"")) faults.push_back(where + "a straight quote in Chinese prose (use “…”)");
        const std::string words = withoutQuotedEnglish(text);
        for (const auto& term : terms)
            for (const auto& variant : term.rejected) {
                std::string searched = words;
                for (const auto& phrase : term.allowedIn)
                    for (size_t at; (at = searched.find(phrase)) != std::string::npos;)
                        searched.replace(at, phrase.size(), " ");
                const bool found =
                    isAscii(variant)
                        ? std::regex_search(searched, std::regex("(^|[^A-Za-z_])" + variant + "($|[^A-Za-z_])",
                                                                 std::regex::icase))
                        : contains(searched, variant);
                if (found) faults.push_back(where + "\"" + variant + "\" (the glossary says " + term.chinese + ")");
            }
    }
    return faults;
}

std::vector<std::string> chinesePages() {
    std::vector<std::string> pages = {"README.zh-CN.md", "COVERAGE.zh-CN.md"};
    for (const auto& folder : lessonFolders()) pages.push_back(folder + "/README.zh-CN.md");
    if (DIR* docs = opendir((repoRoot() + "/docs").c_str())) {
        while (const dirent* entry = readdir(docs)) {
            const std::string name = entry->d_name;
            if (name.size() > 9 && name.substr(name.size() - 9) == ".zh-CN.md") pages.push_back("docs/" + name);
        }
        closedir(docs);
    }
    return pages;
}

// The lines of a "## Heading" section, up to the next "## ".
std::vector<std::string> section(const std::string& page, const std::string& heading) {
    std::vector<std::string> rows;
    bool inside = false;
    for (const auto& row : lines(page)) {
        if (startsWith(row, "## ")) {
            if (inside) break;
            inside = row == heading;
            continue;
        }
        if (inside) rows.push_back(row);
    }
    return rows;
}

// Whether every captured block (expected output, make bench) sits inside a <details> fold.
bool capturedBlocksFolded(const std::string& page) {
    int folded = 0;
    size_t blocks = 0, foldedBlocks = 0;
    for (const auto& row : lines(page)) {
        const std::string line = trim(row);
        if (startsWith(line, "<details")) ++folded;
        if (startsWith(line, "</details>")) --folded;
        if (line == "<!-- expected-output:begin -->" || line == "<!-- bench-output:begin -->") {
            ++blocks;
            if (folded > 0) ++foldedBlocks;
        }
    }
    return blocks > 0 && blocks == foldedBlocks;
}

const size_t kProseLines = 250;  // a lesson read in one sitting

}  // namespace

TEST_CASE("The top READMEs say where to start and show the lesson table on the first screen", "[cpu][docs][pages]") {
    for (const std::string name : {"README.md", "README.zh-CN.md"}) {
        INFO(name);
        const auto rows = lines(readText(repoRoot() + "/" + name));
        size_t tableAt = 0, runAt = 0;
        for (size_t i = 0; i < rows.size(); ++i) {
            if (!tableAt && startsWith(rows[i], "| 01 ")) tableAt = i + 1;
            if (!runAt && contains(rows[i], "make run-01")) runAt = i + 1;
        }
        CHECK(tableAt > 0);
        CHECK(tableAt <= 45);
        CHECK(runAt > 0);
        CHECK(runAt <= 45);
        for (const auto& row : rows)
            if (startsWith(row, "| 09 ") || startsWith(row, "| 10 ")) CHECK(contains(row, "Jetson"));
    }
}

TEST_CASE("Each lesson README reads in one sitting: a short Goal, bounded prose, folded output, no maintainer text",
          "[cpu][docs][pages]") {
    for (const auto& folder : lessonFolders())
        for (const auto& [name, goal] : {std::pair{"README.md", "## Goal"}, std::pair{"README.zh-CN.md", "## 目标"}}) {
            INFO(folder << "/" << name);
            const std::string page = readText(repoRoot() + "/" + folder + "/" + name);
            size_t bullets = 0, paragraphs = 0;
            for (const auto& row : section(page, goal)) {
                if (startsWith(row, "- ")) ++bullets;
                else if (!row.empty() && !startsWith(row, " ")) ++paragraphs;
            }
            CHECK(bullets >= 1);
            CHECK(bullets <= 3);
            CHECK(paragraphs == 0);
            const auto prose = proseLines(page, true);
            INFO("prose lines outside folds, code and source notes: " << prose.size());
            CHECK(prose.size() <= kProseLines);
            CHECK(capturedBlocksFolded(page));
            for (const auto& [number, line] : prose) {
                INFO("line " << number << ": " << line);
                // A header citation belongs in a source note ("[^1]: cuda.h (CUDA 13.0), line 1234 ...").
                CHECK_FALSE(std::regex_search(line, std::regex("cuda\\.h:[0-9]|cuda\\.h,? lines? [0-9]")));
                CHECK_FALSE(std::regex_search(line, std::regex("make mutate|[Mm]utants?\\b|tests/mutants|变异")));
            }
        }
}

TEST_CASE("Every Chinese page keeps one paragraph per line, full-width quotes and the glossary's terms",
          "[cpu][docs][pages]") {
    const auto terms = glossary();
    REQUIRE(terms.size() >= 20);
    for (const auto& page : chinesePages()) {
        const auto faults = chineseFaults(readText(repoRoot() + "/" + page), terms);
        std::string list;
        for (const auto& fault : faults) list += "\n  " + fault;
        INFO(page << ":" << list);
        CHECK(faults.empty());
    }
}

TEST_CASE("The Chinese page rules catch a hard wrap, a straight quote and a rejected term, and nothing else",
          "[cpu][docs][pages]") {
    const auto terms = glossary();
    const auto faults = [&](const std::string& page) { return chineseFaults(page, terms).size(); };
    CHECK(faults("核函数在流上启动。\n然后主机等待。\n") == 1);
    CHECK(faults("核函数在流上启动。\n\n然后主机等待。\n") == 0);
    CHECK(faults("- 第一项\n- 第二项\n") == 0);
    CHECK(faults("## 目标\n使用主上下文。\n") == 0);
    CHECK(faults("- 第一项，\n  续行。\n") == 1);
    CHECK(faults("调用 `cuCtxCreate`，得到“当前上下文”。\n") == 0);
    CHECK(faults("得到 \"当前上下文\"。\n") == 1);
    CHECK(faults("这个内核在显存上运行。\n") == 2);
    CHECK(faults("这会留下粘滞错误。\n") == 1);
    CHECK(faults("这个 kernel 运行在 context 上。\n") == 2);
    CHECK(faults("cuda.h 说：“Creates a new CUDA context”，即创建新的上下文。\n") == 0);
    CHECK(faults("它依赖 Linux 内核的 dma-buf。\n") == 0);
    CHECK(faults("核函数（kernel）在上下文（context）中启动。\n") == 0);
    CHECK(faults("| 04 | [primary-context](04-primary-context/README.zh-CN.md) | 主上下文 |\n") == 0);
    CHECK(faults("这个 context（上下文）\n") == 1);
    CHECK(faults("```text\n内核\n\"x\"\n```\n") == 0);
    CHECK(faults("见[第 04 课](../04-primary-context/README.zh-CN.md)。\n") == 0);
}
