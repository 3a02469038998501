#!/usr/bin/env python3
"""record-mutants.py RESULTS [ROOT] — keep what make mutate found on a GPU in tests/mutants/results.txt.

RESULTS is the BUILD/mutate-results.txt that common/tools/mutate.sh wrote on a machine with a GPU (its
first line: "# ran on: GPU | devices: N"). Each of its lines replaces the record's line for that mutant:
"NN-topic/NAME<TAB>result<TAB>hash of the patch<TAB>GPU". Lines of mutants whose patch no longer exists
are dropped. coverage.py counts a lesson's call as checked only through a mutant recorded here as
caught, with the hash of the patch as it is now (a patch changed since it ran proves nothing).
"""
import pathlib
import re
import sys


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    lines = pathlib.Path(sys.argv[1]).read_text().split("\n")
    root = pathlib.Path(sys.argv[2] if len(sys.argv) == 3 else pathlib.Path(__file__).resolve().parents[2])
    ran = re.match(r"# ran on: (.+?) \| devices: \d+", lines[0] if lines else "")
    if not ran:
        print(f"{sys.argv[1]}: its first line is not '# ran on: GPU | devices: N' (make mutate ran without a GPU?)",
              file=sys.stderr)
        return 1
    record_path = root / "tests" / "mutants" / "results.txt"
    record = {}
    if record_path.is_file():
        for line in record_path.read_text().split("\n"):
            if line and not line.startswith("#"):
                record[line.split("\t")[0]] = line
    for line in lines[1:]:
        fields = line.split("\t")
        if len(fields) == 3:
            record[fields[0]] = "\t".join([fields[0], fields[1], fields[2], ran.group(1)])
    record = {name: line for name, line in record.items() if (root / "tests" / "mutants" / f"{name}.patch").is_file()}
    head = ("# What make mutate found on a GPU, one mutant a line: NN-topic/NAME, result, hash of the patch, GPU.\n"
            "# Written by common/tools/record-mutants.py from BUILD/mutate-results.txt; coverage.py reads it.\n")
    record_path.write_text(head + "\n".join(record[name] for name in sorted(record)) + "\n")
    caught = sum(1 for line in record.values() if line.split("\t")[1] == "caught")
    print(f"{record_path}: {len(record)} mutants, {caught} caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
