#!/usr/bin/env python3
"""propose-mutants.py — candidate mutants for the calls no caught mutant proves yet, and their adoption.

  propose-mutants.py propose OUTDIR [--kinds drop,zero,halve,swap] [--per-function N]
      For each function COVERAGE.md can count (a lesson calls it, no note says "shown") but no caught
      mutant proves, write up to N (default 3) candidate patches into OUTDIR/NN-topic/:
        drop   the statement that makes the call is removed
        zero   the call stays and its first out-argument (&x) is reset to {} on the same line
        halve  a size or count argument is halved
        swap   two neighbouring plain arguments trade places
      Each has "Expect-Check: ?discover": no check is known yet. Candidates that do not build are
      simply not caught.
  propose-mutants.py adopt OUTDIR WORK [--into DIR]
      After `BUILD=build DRIVER_PROBE=build/tools/driver-probe common/tools/mutate.sh OUTDIR/*/*.patch`
      on a GPU (WORK: build/mutants), every candidate its program caught — exit 1, "Result = FAIL" and a
      failing "check NAME" — becomes tests/mutants/NN-topic/KIND-FUNCTION.patch naming that check, one per
      (function, lesson), drop preferred, then zero, halve, swap. Run make mutate on them and
      common/tools/record-mutants.py before make coverage counts them.
A candidate that leaves the program passing is a call no check looks at: a place for a check, or a
call the table rightly shows.
"""
import argparse
import contextlib
import io
import os
import pathlib
import re
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import coverage as cov  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
KINDS = ("drop", "zero", "halve", "swap")
WORDS = {"drop": "drops", "zero": "zeroes", "halve": "halves", "swap": "swaps"}


def split_args(text):
    """The top-level arguments of the call whose '(' opens text, or None."""
    depth, args, current = 0, [], ""
    for ch in text[text.index("(") + 1:]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                return args + [current]
            depth -= 1
        if ch == "," and depth == 0:
            args.append(current)
            current = ""
        else:
            current += ch
    return None


def statements(code_lines):
    """(first, last) line indexes of each statement or block opening of the stripped code."""
    spans, start, depth = [], None, 0
    for i, line in enumerate(code_lines):
        text = line.strip()
        if start is None:
            if not text:
                continue
            start = i
        depth += line.count("(") - line.count(")")
        if depth <= 0 and text.endswith((";", "{", "}")):
            spans.append((start, i))
            start, depth = None, 0
    return spans


def program_of(lesson, path):
    """The lesson program whose build includes this source file (its .cpp, or a file it names or includes)."""
    programs = cov.built_code.lesson_programs(ROOT, lesson)
    if programs is None:
        return lesson
    for program, sources in programs.items():
        if path.name == sources[0].name:
            return program
    for program, sources in programs.items():
        included = re.search(rf'#include\s+"{re.escape(path.name)}"', sources[0].read_text())
        if path.name in (source.name for source in sources) or included:
            return program
    return None


def unproven(header):
    """function -> lessons whose call of it counts, for every function no caught mutant proves."""
    notes, _ = cov.read_notes(str(ROOT / "common" / "coverage-notes.txt"))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rows, _, _, _ = cov.build(ROOT, header, notes)
    found = {}
    for row in rows:
        if row.status == "checked" or row.status == "excluded":
            continue
        lessons = [l for l, v in row.lessons.items() if v[2] in (cov.NO_MUTANT, cov.NOT_CAUGHT_YET)]
        if lessons:
            found[row.name] = lessons
    return found


def candidates(function, flat, kinds):
    """The kinds of change a statement allows: ("drop",), ("zero", x), ("halve", arg), ("swap", a, b)."""
    found = []
    if "drop" in kinds and re.fullmatch(r"(CHECK_DRIVER\(|REPORT_DRIVER\()?\s*(cu[A-Z]\w*|course::\w+)\s*\(.*\)\s*\)?;",
                                        flat):
        found.append(("drop",))
    out = re.match(r".*?(?:cu[A-Z]\w*|course::\w+)\s*\(\s*&\s*([A-Za-z_][\w.]*(?:\[[^\]]*\])?)\s*[,)]", flat)
    if "zero" in kinds and out:
        found.append(("zero", out.group(1)))
    call = re.search(r"\b" + re.escape(function) + r"(_v\d+)?\s*\(", flat)
    args = split_args(flat[call.start():]) if call else None
    plain = r"&?[A-Za-z_][\w.]*(\[\w+\])?"
    if args and "halve" in kinds:
        for a in (a.strip() for a in args):
            if re.search(r"(?i)(size|bytes|count|elements|length|\bn\b|width|height)", a) and "&" not in a \
                    and re.fullmatch(r"[\w.:()*+ -]+", a) and not a.startswith("sizeof"):
                found.append(("halve", a))
                break
    if args and "swap" in kinds:
        for a, b in zip(args, args[1:]):
            a, b = a.strip(), b.strip()
            if re.fullmatch(plain, a) and re.fullmatch(plain, b) and a != b and a.startswith("&") == b.startswith("&"):
                found.append(("swap", a, b))
                break
    return found


def mutate(raw_lines, first, last, change, function, file_name):
    """The source lines with the change made, and what it does; None when it cannot be made."""
    lines, kind = list(raw_lines), change[0]
    where = f"{file_name}:{first + 1}"
    if kind == "drop":
        lines[first:last + 1] = [re.match(r"\s*", raw_lines[first]).group(0) + "// (call removed)"]
        return lines, f"drops the {function} call at {where}"
    if kind == "zero":
        lines[last] = raw_lines[last] + f" {change[1]} = {{}};"
        return lines, f"keeps the {function} call at {where} but resets what it wrote to {change[1]}"
    segment = "\n".join(raw_lines[first:last + 1])
    if kind == "halve":
        if segment.count(change[1]) != 1:
            return None
        segment = segment.replace(change[1], f"({change[1]}) / 2")
        what = f"passes half of {change[1]} to the {function} call at {where}"
    else:
        pattern = re.escape(change[1]) + r"(\s*,\s*)" + re.escape(change[2])
        if not re.search(pattern, segment):
            return None
        segment = re.sub(pattern, lambda m: change[2] + m.group(1) + change[1], segment, count=1)
        what = f"swaps {change[1]} and {change[2]} in the {function} call at {where}"
    lines[first:last + 1] = segment.split("\n")
    return lines, what


def propose(outdir, kinds, per_function):
    header = cov.Header(os.path.join(os.environ.get("CUDA_PATH") or "/usr/local/cuda", "include", "cuda.h"))
    called_in = cov.calls_in(header, cov.common_helpers(ROOT, header), {})
    built = {}  # lesson -> its built code, made once
    made = 0
    for function, lessons in sorted(unproven(header).items()):
        count = 0
        for lesson in lessons:
            if lesson not in built:
                built[lesson] = cov.built_code.built_code(ROOT, lesson, cov.strip_code, header.version)[0]
            for path, code in sorted(built[lesson].items()):
                program = program_of(lesson, path)
                if program is None:
                    continue
                raw_lines, code_lines = path.read_text().split("\n"), code.split("\n")
                for first, last in statements(code_lines):
                    text = "\n".join(code_lines[first:last + 1])
                    if function not in called_in(text) or not text.strip().endswith(";"):
                        continue
                    for change in candidates(function, " ".join(text.split()), kinds):
                        result = mutate(raw_lines, first, last, change, function, path.name)
                        if result is None or count >= per_function:
                            continue
                        lines, what = result
                        relative = f"{lesson}/{path.relative_to(ROOT / lesson)}"
                        scratch = pathlib.Path(outdir) / ".scratch"
                        scratch.parent.mkdir(parents=True, exist_ok=True)
                        scratch.write_text("\n".join(lines))
                        diff = subprocess.run(["diff", "-u", "--label", f"a/{relative}", "--label", f"b/{relative}",
                                               str(path), str(scratch)], capture_output=True, text=True).stdout
                        target = pathlib.Path(outdir) / lesson / f"{change[0]}-{function}-{path.stem}-{first + 1}.patch"
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_text(f"Mutant: {what}\nProgram: {program}\nExpect-Check: ?discover\n"
                                          f"Function: {function}\n\n{diff}")
                        count += 1
                        made += 1
        (pathlib.Path(outdir) / ".scratch").unlink(missing_ok=True)
    print(f"{made} candidates in {outdir}")
    return 0


def adopt(outdir, work, into):
    rank = {kind: i for i, kind in enumerate(KINDS)}
    best = {}
    for patch in sorted(pathlib.Path(outdir).glob("*/*.patch")):
        lesson, stem = patch.parent.name, patch.stem
        folder = pathlib.Path(work) / lesson / stem
        status = (folder / "status").read_text() if (folder / "status").is_file() else ""
        log = (folder / "run.log").read_text(errors="replace") if (folder / "run.log").is_file() else ""
        failed = re.findall(r"^check (.+): FAIL$", log, re.M)
        if not failed or "exit" in status or "no 'Result = FAIL'" in status or not status:
            continue
        text = patch.read_text()
        function = re.search(r"^Function: (\S+)", text, re.M).group(1)
        kind = stem.split("-", 1)[0]
        key = (function, lesson)
        if key not in best or rank[kind] < rank[best[key][0]]:
            best[key] = (kind, text, failed[0])
    for (function, lesson), (kind, text, check) in sorted(best.items()):
        program = re.search(r"^Program: (.*)$", text, re.M).group(1)
        what = re.search(r"^Mutant: (.*)$", text, re.M).group(1)
        diff = text[text.index("\n--- ") + 1:]
        target = pathlib.Path(into) / lesson / f"{WORDS[kind]}-{function}.patch"
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target = target.with_name(f"{WORDS[kind]}-{function}-in-{program}.patch")
        target.write_text(f"Mutant: {what} (generated: a call no other mutant breaks)\nProgram: {program}\n"
                          f"Expect-Check: {check}\n\n{diff}")
        print(f"adopted {target}: check {check}")
    print(f"{len(best)} candidates adopted")
    return 0


def main():
    parser = argparse.ArgumentParser(usage=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("propose")
    p.add_argument("outdir")
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--per-function", type=int, default=3)
    a = sub.add_parser("adopt")
    a.add_argument("outdir")
    a.add_argument("work")
    a.add_argument("--into", default=str(ROOT / "tests" / "mutants"), help="where the mutants go (tests/mutants)")
    args = parser.parse_args()
    if args.command == "propose":
        kinds = set(args.kinds.split(","))
        if not kinds <= set(KINDS):
            parser.error(f"--kinds: choose from {','.join(KINDS)}")
        return propose(args.outdir, kinds, args.per_function)
    return adopt(args.outdir, args.work, args.into)


if __name__ == "__main__":
    sys.exit(main())
