#!/usr/bin/env python3
"""fill-expected-output.py [--bench] LESSON_DIR OUTPUT_FILE

Puts a lesson's real output into the "Expected output" block of both of the
lesson's READMEs, between the expected-output markers. OUTPUT_FILE is what
common/tools/capture-output.sh printed on a GPU: the programs' output (stdout and
stderr together), then a last line "captured-on: <GPU name> | devices: N", which
becomes the "<!-- captured-on: ... -->" marker above the block. On that machine the
docs test compares the block line by line with a real run; on any other machine it
compares only what does not belong to the machine (steps, labels, the result).
Leading and trailing blank lines are dropped.

With --bench, OUTPUT_FILE is what common/tools/capture-bench.sh printed on a GPU (the
lesson's --bench programs, then "captured-on: <GPU name> | devices: N | make bench"), and
it becomes the lesson's make-bench block, between "<!-- bench-output:begin -->" and
"<!-- bench-output:end -->": the captured-on marker, one line saying where it ran, and the
output. The block replaces the README's make-bench block (or an older hand-made
"<!-- bench:begin -->" section); a README with neither gets it, inside a <details> fold, at
the end of its "Expected output" section. Prose that names a GPU may quote only figures of a captured
block of that GPU on the same page (tests/test_docs.cpp).
"""
import pathlib
import re
import sys

BEGIN = "<!-- expected-output:begin -->"
END = "<!-- expected-output:end -->"
BENCH_BEGIN = "<!-- bench-output:begin -->"
BENCH_END = "<!-- bench-output:end -->"
OLD_BENCH = re.compile(r"<!-- bench:begin -->.*?<!-- bench:end -->", re.S)
SECTIONS = {"README.md": "## Expected output", "README.zh-CN.md": "## 预期输出"}


def read_capture(path: str, bench: bool):
    """The output and the machine of a capture file, or None with the reason printed."""
    lines = pathlib.Path(path).read_text().rstrip("\n").split("\n")
    form = r"captured-on: .+ \| devices: [0-9]+" + (r" \| make bench" if bench else "")
    if not lines or not re.fullmatch(form, lines[-1]):
        tool = "capture-bench.sh" if bench else "capture-output.sh"
        print(f"{path}: the last line must be '{form}' (common/tools/{tool} writes it)", file=sys.stderr)
        return None
    machine = lines.pop()[len("captured-on: "):]
    return "\n".join(lines).strip("\n"), machine


def bench_block(name: str, machine: str, output: str) -> str:
    gpu, devices = re.match(r"(.+) \| devices: ([0-9]+)", machine).groups()
    if name == "README.md":
        said = f"What this lesson's `--bench` programs printed under `make bench` on {gpu} ({devices} " \
               f"device{'s' if devices != '1' else ''}):"
    else:
        said = f"本课的 `--bench` 程序在 `make bench` 下于 {gpu}（{devices} 块 GPU）上打印的内容："
    return f"{BENCH_BEGIN}\n<!-- captured-on: {machine} -->\n{said}\n```text\n{output}\n```\n{BENCH_END}"


def folded(block: str, name: str) -> str:
    """A new make-bench block inside a <details> fold: captured output is there to open, not to scroll past."""
    gpu = re.search(r"<!-- captured-on: (.+?) \|", block).group(1)
    summary = f"What <code>make bench</code> printed on {gpu}" if name == "README.md" else \
        f"<code>make bench</code> 在 {gpu} 上的输出"
    return f"<details>\n<summary>{summary}</summary>\n\n{block}\n\n</details>"


def with_bench(text: str, block: str, section: str, name: str):
    """The README with its make-bench block replaced or added; None when it has no place for it."""
    current = re.compile(re.escape(BENCH_BEGIN) + r".*?" + re.escape(BENCH_END), re.S)
    if current.search(text):
        return current.sub(lambda _: block, text, count=1)
    old = OLD_BENCH.search(text)
    if old:
        # An older block a page already folds keeps its fold; one that stands in the open gets one.
        before = text[:old.start()]
        inside = before.rfind("<details>") > before.rfind("</details>")
        return text[:old.start()] + (block if inside else folded(block, name)) + text[old.end():]
    block = folded(block, name)
    start = text.find("\n" + section + "\n")
    if start < 0:
        return None
    end = text.find("\n## ", start + 1)
    end = len(text) if end < 0 else end + 1
    body = text[:end].rstrip("\n")
    return body + "\n\n" + block + "\n" + ("\n" + text[end:] if end < len(text) else "")


def main() -> int:
    args = sys.argv[1:]
    bench = bool(args) and args[0] == "--bench"
    if bench:
        args = args[1:]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    lesson = pathlib.Path(args[0])
    capture = read_capture(args[1], bench)
    if capture is None:
        return 1
    output, machine = capture
    block = f"<!-- captured-on: {machine} -->\n{BEGIN}\n```text\n{output}\n```\n{END}"
    pattern = re.compile(r"(?:<!-- captured-on: .*? -->\n)?" + re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    for name, section in SECTIONS.items():
        readme = lesson / name
        text = readme.read_text()
        if bench:
            updated = with_bench(text, bench_block(name, machine, output), section, name)
            if updated is None:
                print(f"{readme}: no '{section}' section", file=sys.stderr)
                return 1
        elif pattern.search(text):
            updated = pattern.sub(lambda _: block, text, count=1)
        else:
            print(f"{readme}: no expected-output markers", file=sys.stderr)
            return 1
        readme.write_text(updated)
        print(f"updated {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
