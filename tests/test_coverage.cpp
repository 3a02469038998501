// The Driver API coverage table (COVERAGE.md, COVERAGE.zh-CN.md): common/tools/coverage.py makes it
// from cuda.h, the lessons' sources and common/coverage-notes.txt (`make coverage`). These CPU tests
// run the tool's --check mode (the committed table is what it generates now), prove that the check
// notices a lesson that stops calling a function the table lists, and check the hand-kept notes.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/harness.h"

using namespace harness;

namespace {

const std::string kTool = "common/tools/coverage.py";
// The tool's exit codes: 1 the table is stale, 77 not compared (another CUDA_VERSION).
constexpr int kStale = 1;
constexpr int kNotCompared = 77;

// The cuda.h the tool counts by default, as the Makefile's CUDA_PATH names it.
std::string cudaHeader() {
    const char* cuda = std::getenv("CUDA_PATH");
    return std::string(cuda != nullptr && *cuda != '\0' ? cuda : "/usr/local/cuda") + "/include/cuda.h";
}

RunResult runTool(std::vector<std::string> args) {
    RunOptions options;
    options.args = {repoRoot() + "/" + kTool, "--header", cudaHeader()};
    options.args.insert(options.args.end(), args.begin(), args.end());
    options.timeoutSeconds = 60;
    const RunResult r = run("python3", options);
    attachToReport(r);
    return r;
}

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> fields;
    std::stringstream stream(text);
    std::string field;
    while (std::getline(stream, field, separator)) fields.push_back(trim(field));
    return fields;
}

// Every name cuda.h declares as `CUresult CUDAAPI name(` (on one line or two), folded the tool's
// way: without _ptsz/_ptds and _vN.
std::set<std::string> declaredFunctions(const std::string& header) {
    std::set<std::string> names;
    for (size_t at = header.find("CUDAAPI"); at != std::string::npos; at = header.find("CUDAAPI", at + 7)) {
        size_t begin = at + 7;
        while (begin < header.size() && std::isspace(static_cast<unsigned char>(header[begin]))) ++begin;
        size_t end = begin;
        while (end < header.size() && (std::isalnum(static_cast<unsigned char>(header[end])) || header[end] == '_'))
            ++end;
        std::string name = header.substr(begin, end - begin);
        if (name.rfind("cu", 0) != 0) continue;
        for (const char* perThread : {"_ptsz", "_ptds"})
            if (name.size() > 5 && name.compare(name.size() - 5, 5, perThread) == 0) name.resize(name.size() - 5);
        const size_t version = name.rfind("_v");
        if (version != std::string::npos && version + 2 < name.size() &&
            name.find_first_not_of("0123456789", version + 2) == std::string::npos)
            name.resize(version);
        names.insert(name);
    }
    return names;
}

// The number after the first `marker` in the text ("13000"), or "" when there is none.
std::string cudaVersionIn(const std::string& text, const std::string& marker) {
    const size_t at = text.find(marker);
    if (at == std::string::npos) return "";
    const size_t begin = at + marker.size();
    return text.substr(begin, text.find_first_not_of("0123456789", begin) - begin);
}

// Empty when the installed cuda.h has the CUDA_VERSION that COVERAGE.md was made from (what the
// notes are kept for); otherwise why a test that relies on that cannot run here.
std::string otherCudaVersion() {
    const std::string header = cudaVersionIn(readText(cudaHeader()), "#define CUDA_VERSION ");
    const std::string table = cudaVersionIn(readText(repoRoot() + "/COVERAGE.md"), "CUDA_VERSION ");
    if (header == table) return "";
    return "COVERAGE.md and the notes are kept for CUDA_VERSION " + table + "; " + cudaHeader() + " has " +
           (header.empty() ? std::string("none") : header);
}

// A copy of the course for the tool's --root: every lesson's sources, common/'s headers and notes.
std::string courseCopy() {
    namespace fs = std::filesystem;
    const std::string copy = scratchDir() + "/coverage-fixture";
    fs::remove_all(copy);
    const std::set<std::string> sources = {".cpp", ".h", ".hpp", ".cu", ".cuh", ".mk"};
    for (const auto& lesson : lessonFolders()) {
        for (const auto& entry : fs::recursive_directory_iterator(repoRoot() + "/" + lesson)) {
            if (!entry.is_regular_file() || sources.count(entry.path().extension().string()) == 0) continue;
            const std::string relative = fs::relative(entry.path(), repoRoot()).string();
            fs::create_directories(fs::path(copy + "/" + relative).parent_path());
            REQUIRE(copyFile(entry.path().string(), copy + "/" + relative));
        }
    }
    fs::create_directories(copy + "/common");
    for (const auto& entry : fs::directory_iterator(repoRoot() + "/common"))
        if (entry.is_regular_file())
            REQUIRE(copyFile(entry.path().string(), copy + "/common/" + entry.path().filename().string()));
    // The mutants and the record of their GPU run, which prove the checked rows.
    for (const auto& entry : fs::recursive_directory_iterator(repoRoot() + "/tests/mutants")) {
        if (!entry.is_regular_file()) continue;
        const std::string relative = fs::relative(entry.path(), repoRoot()).string();
        fs::create_directories(fs::path(copy + "/" + relative).parent_path());
        REQUIRE(copyFile(entry.path().string(), copy + "/" + relative));
    }
    for (const char* table : {"/COVERAGE.md", "/COVERAGE.zh-CN.md"})
        REQUIRE(copyFile(repoRoot() + table, copy + table));
    return copy;
}

// The terminal row of a function in the tool's output ("  cuX   checked   03(name) 05(shown)").
std::string terminalRow(const std::string& out, const std::string& function) {
    for (const auto& line : lines(out))
        if (line.rfind("  " + function + " ", 0) == 0) return line;
    return "";
}

// Whether the row credits lesson NN ("28" or "28(...)" among its cells).
bool credits(const std::string& row, const std::string& number) {
    return contains(row, " " + number + "(") || contains(row, " " + number + " ") ||
           (row.size() >= number.size() && row.compare(row.size() - number.size(), number.size(), number) == 0);
}

}  // namespace

TEST_CASE("COVERAGE.md and COVERAGE.zh-CN.md are what make coverage generates now", "[cpu][coverage]") {
    const RunResult r = runTool({"--check", "--quiet"});
    if (r.exitCode == kNotCompared) SKIP("coverage table not compared: " + trim(r.out + r.err));
    INFO(r.out << r.err);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "are up to date"));
}

TEST_CASE("The coverage check names a lesson that stops calling a function the table lists", "[cpu][coverage]") {
    namespace fs = std::filesystem;
    // The notes are kept for the cuda.h the table was made from: with another, they need not apply.
    if (const std::string why = otherCudaVersion(); !why.empty()) SKIP(why);
    const std::string copy = courseCopy();
    // The table of the copy as it is, and the check of the unchanged copy against it.
    REQUIRE(runTool({"--root", copy, "--write", "--quiet"}).exitCode == 0);
    REQUIRE(runTool({"--root", copy, "--check", "--quiet"}).exitCode == 0);
    const std::string lesson = lessonFolders().front();  // 01: cuInit is the first call of the course
    const std::string table = readText(copy + "/COVERAGE.md");
    const auto row = table.find("`cuInit`");
    REQUIRE(row != std::string::npos);
    REQUIRE(table.substr(row, table.find('\n', row) - row).find("](" + lesson + "/)") != std::string::npos);

    // The lesson stops calling cuInit: every `cuInit(` of its sources becomes `notCuInit(`.
    int edited = 0;
    for (const auto& entry : fs::recursive_directory_iterator(copy + "/" + lesson)) {
        if (!entry.is_regular_file()) continue;
        std::string text = readText(entry.path().string());
        size_t changes = 0;
        for (size_t at = text.find("cuInit("); at != std::string::npos; at = text.find("cuInit(", at + 9)) {
            text.replace(at, 6, "notCuInit");
            ++changes;
        }
        if (changes == 0) continue;
        REQUIRE(writeFile(entry.path().string(), text));
        ++edited;
    }
    REQUIRE(edited > 0);
    const RunResult r = runTool({"--root", copy, "--check", "--quiet"});
    CHECK(r.exitCode == kStale);
    CHECK(contains(r.err,
                   "cuInit: COVERAGE.md lists " + lesson + " as calling it, but " + lesson + " no longer calls it"));
    CHECK(contains(r.err, "run make coverage"));
}

TEST_CASE("The coverage table gives every exclusion its reason", "[cpu][coverage]") {
    const std::string committed = readText(repoRoot() + "/COVERAGE.md");
    REQUIRE_FALSE(committed.empty());
    // What the tool prints is compared where the installed cuda.h is the table's (an older one may
    // lack the multicast functions); the committed table everywhere.
    const bool sameHeader = otherCudaVersion().empty();
    const RunResult r = runTool({});
    REQUIRE(r.exitCode == 0);
    REQUIRE(contains(r.out, "coverage: "));
    struct Exclusion {
        const char* function;
        const char* because;
    };
    for (const Exclusion& e :
         {Exclusion{"cuMulticastCreate", "shared machine"}, Exclusion{"cuMulticastBindMem", "shared machine"},
          Exclusion{"cuDeviceGetNvSciSyncAttributes", "Tegra NvSci"}, Exclusion{"cuDeviceGetLuid", "Windows"},
          Exclusion{"cuGetExportTable", "undocumented"}}) {
        INFO(e.function);
        bool printed = false;
        for (const auto& line : lines(r.out))
            if (contains(line, std::string(" ") + e.function + " ") && contains(line, "excluded") &&
                contains(line, e.because))
                printed = true;
        if (sameHeader) CHECK(printed);
        bool inTable = false;
        for (const auto& line : lines(committed))
            if (contains(line, std::string("`") + e.function + "`") && contains(line, "| excluded |") &&
                contains(line, e.because))
                inTable = true;
        CHECK(inTable);
    }
}

TEST_CASE("The coverage notes name only functions of cuda.h and lessons that exist", "[cpu][coverage]") {
    const std::string header = readText(cudaHeader());
    if (header.empty()) SKIP("no cuda.h at " + cudaHeader() + " (set CUDA_PATH)");
    // The notes are kept for the cuda.h the table was made from; another toolkit may lack a function.
    if (const std::string why = otherCudaVersion(); !why.empty()) SKIP(why);
    const std::set<std::string> declared = declaredFunctions(header);
    REQUIRE(declared.count("cuInit") == 1);
    REQUIRE(declared.count("cuLinkCreate") == 1);  // declared over two lines
    const auto folders = lessonFolders();
    const std::string notes = readText(repoRoot() + "/common/coverage-notes.txt");
    REQUIRE_FALSE(notes.empty());
    int entries = 0;
    std::set<std::string> excluded;
    for (const auto& line : lines(notes)) {
        if (trim(line).empty() || trim(line)[0] == '#') continue;
        INFO("common/coverage-notes.txt: " << line);
        const auto fields = split(line, '|');
        REQUIRE((fields.size() == 4 || fields.size() == 5));
        const std::string& kind = fields[0];
        const std::string& function = fields[1];
        CHECK((kind == "exclude" || kind == "shown" || kind == "pointer" || kind == "planned"));
        CHECK_FALSE(fields[3].empty());  // every entry says why
        if (!function.empty() && function.back() == '*') {
            const std::string prefix = function.substr(0, function.size() - 1);
            const auto match = declared.lower_bound(prefix);
            CHECK((match != declared.end() && match->rfind(prefix, 0) == 0));
        } else {
            CHECK(declared.count(function) == 1);
        }
        if (kind == "exclude") excluded.insert(function);
        // The lessons of a note: "-", "*" (every lesson that calls it), or numbers NN of lessons that
        // exist. A planned entry may name a lesson still to be written.
        if (kind != "planned") {
            for (const auto& number : split(fields[2], ' ')) {
                if (number.empty() || number == "-" || number == "*") continue;
                INFO("lesson " << number);
                CHECK(std::any_of(folders.begin(), folders.end(),
                                  [&](const std::string& f) { return f.rfind(number + "-", 0) == 0; }));
            }
        }
        ++entries;
    }
    CHECK(entries > 0);
    for (const char* required :
         {"cuMulticast*", "cuDeviceGetNvSciSyncAttributes", "cuDeviceGetLuid", "cuGetExportTable"})
        CHECK(excluded.count(required) == 1);
}

TEST_CASE("Every checked row of COVERAGE.md names a mutant that breaks the call and was caught on a GPU",
          "[cpu][coverage]") {
    if (const std::string why = otherCudaVersion(); !why.empty()) SKIP(why);
    const RunResult r = runTool({"--verify"});
    INFO(r.out << r.err);
    CHECK(r.exitCode == 0);
    CHECK(contains(r.out, "was caught on a GPU"));
}

TEST_CASE("The proof check refuses a checked row whose mutant is missing, breaks another call or was not caught",
          "[cpu][coverage]") {
    if (const std::string why = otherCudaVersion(); !why.empty()) SKIP(why);
    const std::string copy = courseCopy();
    REQUIRE(runTool({"--root", copy, "--verify"}).exitCode == 0);
    const std::string table = readText(copy + "/COVERAGE.md");
    // The first checked row, and the first lesson its row proves with a mutant: "[NN](NN-topic/) `name`".
    std::string row, function, lesson, proof;
    for (const auto& line : lines(table)) {
        std::smatch match;
        static const std::regex proven("^\\| \\[`(cu\\w+)`\\][^|]*\\| checked \\|.*?\\]\\(([0-9][0-9]-[a-z0-9-]+)/\\) `([^`]+)`");
        if (std::regex_search(line, match, proven)) {
            row = line, function = match[1], lesson = match[2], proof = match[3];
            break;
        }
    }
    REQUIRE_FALSE(proof.empty());
    const auto withRow = [&](const std::string& replacement) {
        std::string edited = table;
        edited.replace(edited.find(row), row.size(), replacement);
        REQUIRE(writeFile(copy + "/COVERAGE.md", edited));
        const RunResult r = runTool({"--root", copy, "--verify"});
        INFO(r.out << r.err);
        CHECK(r.exitCode == kStale);
        return r.err;
    };
    std::string changed = row;
    changed.replace(changed.find("`" + proof + "`"), proof.size() + 2, "`no-such-mutant`");
    CHECK(contains(withRow(changed), function + " in " + lesson + ": mutant no-such-mutant does not exist"));
    // A caught mutant of the same lesson whose patch never names the function proves nothing for it.
    std::string other;
    for (const auto& entry : std::filesystem::directory_iterator(copy + "/tests/mutants/" + lesson)) {
        const std::string text = readText(entry.path().string());
        if (!contains(text, function) && contains(readText(copy + "/tests/mutants/results.txt"),
                                                   lesson + "/" + entry.path().stem().string() + "\tcaught"))
            other = entry.path().stem().string();
    }
    REQUIRE_FALSE(other.empty());
    changed = row;
    changed.replace(changed.find("`" + proof + "`"), proof.size() + 2, "`" + other + "`");
    CHECK(contains(withRow(changed), "mutant " + other + " changes no statement of " + lesson + " that calls " + function));
    // A checked row that names no mutant at all.
    changed = std::regex_replace(row, std::regex(" `[^`|]+`"), "");
    CHECK(contains(withRow(changed), function + ": checked, but no lesson in its row names a mutant"));
    // The record says the mutant was not caught, or holds another version of its patch.
    REQUIRE(writeFile(copy + "/COVERAGE.md", table));
    const std::string record = readText(copy + "/tests/mutants/results.txt");
    const std::string line = lesson + "/" + proof + "\tcaught\t";
    REQUIRE(contains(record, line));
    std::string notCaught = record;
    notCaught.replace(notCaught.find(line), line.size(), lesson + "/" + proof + "\tNOT CAUGHT\t");
    REQUIRE(writeFile(copy + "/tests/mutants/results.txt", notCaught));
    CHECK(contains(withRow(row), "mutant " + proof + " is not recorded caught on a GPU"));
    std::string otherHash = record;
    otherHash.replace(otherHash.find(line) + line.size(), 12, "000000000000");
    REQUIRE(writeFile(copy + "/tests/mutants/results.txt", otherHash));
    CHECK(contains(withRow(row), "mutant " + proof + " is not recorded caught on a GPU"));
}

TEST_CASE("The coverage scan counts only code the course builds and its programs reach", "[cpu][coverage]") {
    namespace fs = std::filesystem;
    if (const std::string why = otherCudaVersion(); !why.empty()) SKIP(why);
    const std::string copy = courseCopy();
    // A throw-away lesson whose calls hide, one trick each, where no build or run reaches them, beside
    // three that a run does reach.
    const std::string lesson = copy + "/98-throwaway";
    fs::create_directories(lesson + "/extra");
    REQUIRE(writeFile(lesson + "/main.cpp", R"(#include <cuda.h>
#include <cudaTypedefs.h>
#ifdef _WIN32
static void windowsOnly() { cuGraphAddHostNode(nullptr, nullptr, nullptr, 0, nullptr); }
#endif
#if defined(NEVER_DEFINED_ANYWHERE)
static void undefinedBranch() { cuGraphHostNodeSetParams(nullptr, nullptr); }
#endif
#if CUDA_VERSION >= 12000
static void taken() {}
#elif CUDA_VERSION >= 11000
static void taken() { cuGraphAddChildGraphNode(nullptr, nullptr, nullptr, 0, nullptr); }
#endif
#if __has_include(<cudla.h>)
static void jetsonOnly() { cuGraphAddBatchMemOpNode(nullptr, nullptr, nullptr, 0, nullptr); }
#endif
static void neverCalled() { cuGraphAddEventWaitNode(nullptr, nullptr, nullptr, 0, nullptr); }
#define NEVER_EXPANDED() cuGraphDestroyNode(nullptr)
#define EXPANDED() cuGraphEventWaitNodeSetEvent(nullptr, nullptr)
using Unused = PFN_cuCtxSetFlags_v12010;
static void reached() { cuGraphExecEventWaitNodeSetEvent(nullptr, nullptr, nullptr); }
int main() {
    if (false) {
        cuGraphAddEventRecordNode(nullptr, nullptr, nullptr, 0, nullptr);
    }
    const char* named = "cuGraphExecEventRecordNodeSetEvent";
    (void)named;
    PFN_cuGraphEventRecordNodeSetEvent_v11010 setEvent = nullptr;
    setEvent(nullptr, nullptr);
    EXPANDED();
    reached();
    taken();
    return 0;
}
)"));
    REQUIRE(writeFile(lesson + "/extra/never_built.cpp", "#include <cuda.h>\nint f() { return cuCtxGetId(nullptr, nullptr); }\n"));
    const RunResult r = runTool({"--root", copy});
    INFO(r.out << r.err);
    REQUIRE(r.exitCode == 0);
    for (const char* hidden : {"cuGraphAddHostNode", "cuGraphHostNodeSetParams", "cuGraphAddChildGraphNode",
                               "cuGraphAddBatchMemOpNode", "cuGraphAddEventWaitNode", "cuGraphDestroyNode",
                               "cuCtxSetFlags", "cuGraphAddEventRecordNode", "cuGraphExecEventRecordNodeSetEvent",
                               "cuCtxGetId"}) {
        INFO(hidden << ": " << terminalRow(r.out, hidden));
        CHECK_FALSE(credits(terminalRow(r.out, hidden), "98"));
    }
    for (const char* reached : {"cuGraphExecEventWaitNodeSetEvent", "cuGraphEventWaitNodeSetEvent",
                                "cuGraphEventRecordNodeSetEvent"}) {
        INFO(reached << ": " << terminalRow(r.out, reached));
        CHECK(credits(terminalRow(r.out, reached), "98"));
    }
    CHECK(contains(r.out, "98-throwaway: a branch that needs <cudla.h>, absent on x86-64, is not counted"));
    // A "pointer" note that names a function the code names only in a string is refused.
    REQUIRE(writeFile(copy + "/notes.txt",
                      readText(copy + "/common/coverage-notes.txt") +
                          "\npointer | cuGraphExecEventRecordNodeSetEvent | 98 | called through a pointer | 经指针调用\n"));
    const RunResult noted = runTool({"--root", copy, "--notes", copy + "/notes.txt", "--quiet"});
    CHECK(noted.exitCode == 2);
    CHECK(contains(noted.err, "98-throwaway no longer names cuGraphExecEventRecordNodeSetEvent"));
}

TEST_CASE("The mutant proposer writes candidates that apply, and adopts only those a named check caught",
          "[cpu][coverage]") {
    if (const std::string why = otherCudaVersion(); !why.empty()) SKIP(why);
    const std::string out = scratchDir() + "/proposed";
    std::filesystem::remove_all(out);
    RunOptions propose;
    propose.args = {repoRoot() + "/common/tools/propose-mutants.py", "propose", out, "--kinds", "drop",
                    "--per-function", "1"};
    propose.timeoutSeconds = 120;
    const RunResult r = run("python3", propose);
    INFO(r.out << r.err);
    REQUIRE(r.exitCode == 0);
    std::vector<std::string> patches;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(out))
        if (entry.path().extension() == ".patch") patches.push_back(entry.path().string());
    REQUIRE_FALSE(patches.empty());
    const std::string table = readText(repoRoot() + "/COVERAGE.md");
    for (const auto& patch : patches) {
        INFO(patch);
        const std::string text = readText(patch);
        CHECK(contains(text, "Expect-Check: ?discover\n"));
        // Only functions no caught mutant proves yet: the table does not call them checked.
        const size_t at = text.find("Function: ");
        REQUIRE(at != std::string::npos);
        const std::string function = text.substr(at + 10, text.find('\n', at) - at - 10);
        const size_t row = table.find("[`" + function + "`]");
        REQUIRE(row != std::string::npos);
        CHECK_FALSE(contains(table.substr(row, table.find('\n', row) - row), "| checked |"));
        RunOptions dryRun;
        dryRun.args = {"-p1", "--dry-run", "-s", "-d", repoRoot(), "-i", patch};
        CHECK(run("patch", dryRun).exitCode == 0);
    }
    // Adoption: a candidate whose run failed a named check is kept with that check; one whose
    // program still passed, or ended without a check line, is not.
    const std::string first = patches.front();
    const std::string lesson = std::filesystem::path(first).parent_path().filename().string();
    const std::string stem = std::filesystem::path(first).stem().string();
    const std::string work = scratchDir() + "/proposed-work";
    std::filesystem::remove_all(work);
    std::filesystem::create_directories(work + "/" + lesson + "/" + stem);
    REQUIRE(writeFile(work + "/" + lesson + "/" + stem + "/status", "NOT CAUGHT (no 'check ?discover: FAIL')\n"));
    REQUIRE(writeFile(work + "/" + lesson + "/" + stem + "/run.log", "check the data arrived: FAIL\nResult = FAIL\n"));
    for (size_t i = 1; i < patches.size() && i < 3; ++i) {
        const std::string other = std::filesystem::path(patches[i]).stem().string();
        const std::string otherLesson = std::filesystem::path(patches[i]).parent_path().filename().string();
        std::filesystem::create_directories(work + "/" + otherLesson + "/" + other);
        REQUIRE(writeFile(work + "/" + otherLesson + "/" + other + "/status",
                          i == 1 ? "NOT CAUGHT (exit 0; no 'Result = FAIL')\n" : "NOT CAUGHT (no 'Result = FAIL')\n"));
        REQUIRE(writeFile(work + "/" + otherLesson + "/" + other + "/run.log", "Result = PASS\n"));
    }
    const std::string into = scratchDir() + "/adopted";
    std::filesystem::remove_all(into);
    RunOptions adopt;
    adopt.args = {repoRoot() + "/common/tools/propose-mutants.py", "adopt", out, work, "--into", into};
    const RunResult adopted = run("python3", adopt);
    INFO(adopted.out << adopted.err);
    REQUIRE(adopted.exitCode == 0);
    CHECK(contains(adopted.out, "1 candidates adopted"));
    size_t kept = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(into))
        if (entry.path().extension() == ".patch") {
            ++kept;
            CHECK(contains(readText(entry.path().string()), "Expect-Check: the data arrived\n"));
            CHECK(entry.path().parent_path().filename().string() == lesson);
        }
    CHECK(kept == 1);
}
