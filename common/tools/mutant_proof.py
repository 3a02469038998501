"""mutant_proof.py — which mutant proves that a lesson's call of a function is checked.

A lesson's call counts as checked only when a mutant of that lesson (tests/mutants/NN-topic/*.patch)
changes a statement that makes the call — directly, through a course:: helper whose body makes it, or
through a pointer of its cudaTypedefs.h type — and `make mutate` on a GPU caught it: the record
tests/mutants/results.txt (written by common/tools/record-mutants.py from what make mutate wrote)
lists it as caught, with the hash of the patch as it is now.
"""
import hashlib
import pathlib
import re

RESULTS = "tests/mutants/results.txt"


class Mutant:
    def __init__(self, lesson, path, text):
        self.lesson, self.path = lesson, path
        self.name = f"{lesson}/{path.stem}"
        self.sha = hashlib.sha1(text.encode()).hexdigest()[:12]
        program = re.search(r"^Program:\s*(.*)$", text, re.M)
        self.program = program.group(1).strip() if program else ""
        # Each hunk: (file, the line it says it starts at, the original's lines, which of them it removes).
        self.hunks = []
        current = None
        for line in text.split("\n"):
            if line.startswith("--- "):
                current = re.sub(r"^a/", "", line[4:].split("\t")[0].strip())
                continue
            if line.startswith("+++ ") or current is None:
                continue
            hunk = re.match(r"@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@", line)
            if hunk:
                self.hunks.append((current, int(hunk.group(1)), [], []))
                continue
            if not self.hunks or not line or line[0] not in " -":
                continue
            _, _, original, removed = self.hunks[-1]
            if line[0] == "-":
                removed.append(len(original))
            original.append(line[1:])
        self.touched = {}

    def locate(self, root):
        """file -> line numbers (1-based) of today's source that the patch removes or changes. A hunk is
        found where patch(1) would apply it: its original lines as they stand, nearest the line it names."""
        self.touched = {}
        for file, start, original, removed in self.hunks:
            path = pathlib.Path(root) / file
            if not path.is_file() or not original:
                continue
            source = path.read_text(errors="replace").split("\n")
            width = len(original)
            places = [i for i in range(len(source) - width + 1) if source[i:i + width] == original]
            if places:
                at = min(places, key=lambda i: abs(i + 1 - start))
                numbers = [at + 1 + k for k in removed]
            else:  # fuzz: each removed line where it stands, nearest the hunk
                numbers = []
                for k in removed:
                    hits = [i for i, text in enumerate(source) if text == original[k]]
                    if hits:
                        numbers.append(min(hits, key=lambda i: abs(i + 1 - (start + k))) + 1)
            self.touched.setdefault(file, []).extend(numbers)
        return self.touched


def read_mutants(root):
    """lesson -> [Mutant], sorted by name."""
    mutants = {}
    for path in sorted((pathlib.Path(root) / "tests" / "mutants").glob("*/*.patch")):
        lesson = path.parent.name
        mutant = Mutant(lesson, path, path.read_text(errors="replace"))
        mutant.locate(root)
        mutants.setdefault(lesson, []).append(mutant)
    return mutants


def read_results(root):
    """NN-topic/NAME -> (result, patch hash, GPU) from the committed record of make mutate on a GPU."""
    path = pathlib.Path(root) / RESULTS
    results = {}
    if path.is_file():
        for line in path.read_text().split("\n"):
            fields = line.split("\t")
            if len(fields) >= 4 and not line.startswith("#"):
                results[fields[0]] = (fields[1], fields[2], fields[3])
    return results


def statement_at(code, number):
    """The statement of `code` that contains line `number` (1-based): from the end of the previous
    statement or brace to the next ';' or brace."""
    lines = code.split("\n")
    if not 1 <= number <= len(lines):
        return ""
    start = sum(len(line) + 1 for line in lines[:number - 1])
    end_of_line = start + len(lines[number - 1])
    before = max(code.rfind(";", 0, start), code.rfind("{", 0, start), code.rfind("}", 0, start)) + 1
    after = [i for i in (code.find(";", start), code.find("{", start), code.find("}", start)) if i >= 0]
    finish = max(min(after), end_of_line) if after else len(code)
    return code[before:finish + 1]


def functions_touched(mutant, code_of, calls_in):
    """The functions called by the statements of the built code that the mutant changes.
    code_of: "NN-topic/file" -> built code; calls_in(text) -> the functions a piece of code calls."""
    found = set()
    for file, numbers in mutant.touched.items():
        code = code_of.get(file)
        if code is not None:
            for number in numbers:
                found |= calls_in(statement_at(code, number))
    return found


def touches(mutant, function, code_of, calls_in):
    """Whether the mutant changes a statement of the built code that calls `function`."""
    return function in functions_touched(mutant, code_of, calls_in)


def caught(mutant, results):
    """Whether the record says make mutate caught this very patch on a GPU."""
    result = results.get(mutant.name)
    return result is not None and result[0] == "caught" and result[1] == mutant.sha
