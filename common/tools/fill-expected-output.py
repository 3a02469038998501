#!/usr/bin/env python3
"""fill-expected-output.py LESSON_DIR OUTPUT_FILE

Puts a lesson's real output into the "Expected output" block of both of the
lesson's READMEs, between the expected-output markers. OUTPUT_FILE is what
common/tools/capture-output.sh printed on a GPU: the programs' output (stdout and
stderr together), then a last line "captured-on: <GPU name> | devices: N", which
becomes the "<!-- captured-on: ... -->" marker above the block. On that machine the
docs test compares the block line by line with a real run; on any other machine it
compares only what does not belong to the machine (steps, labels, the result).
Leading and trailing blank lines are dropped.
"""
import pathlib
import re
import sys

BEGIN = "<!-- expected-output:begin -->"
END = "<!-- expected-output:end -->"


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    lesson = pathlib.Path(sys.argv[1])
    lines = pathlib.Path(sys.argv[2]).read_text().rstrip("\n").split("\n")
    if not lines or not lines[-1].startswith("captured-on: "):
        print(f"{sys.argv[2]}: the last line must be 'captured-on: NAME | devices: N' "
              "(common/tools/capture-output.sh writes it)", file=sys.stderr)
        return 1
    machine = lines.pop()[len("captured-on: "):]
    output = "\n".join(lines).strip("\n")
    block = f"<!-- captured-on: {machine} -->\n{BEGIN}\n```text\n{output}\n```\n{END}"
    pattern = re.compile(r"(?:<!-- captured-on: .*? -->\n)?" + re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    for name in ("README.md", "README.zh-CN.md"):
        readme = lesson / name
        text = readme.read_text()
        if not pattern.search(text):
            print(f"{readme}: no expected-output markers", file=sys.stderr)
            return 1
        readme.write_text(pattern.sub(lambda _: block, text, count=1))
        print(f"updated {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
