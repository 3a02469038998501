#!/usr/bin/env python3
"""fill-expected-output.py LESSON_DIR OUTPUT_FILE

Puts a lesson's real output (a file holding what the program printed, stdout and
stderr together, as a terminal shows it) into the "Expected output" block of both
of the lesson's READMEs, between the expected-output markers. Leading and trailing
blank lines are dropped. Used after running the lessons on a GPU; the docs test
then keeps the block and the program from drifting apart.
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
    output = pathlib.Path(sys.argv[2]).read_text().strip("\n")
    block = f"{BEGIN}\n```text\n{output}\n```\n{END}"
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
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
