#!/usr/bin/env bash
# capture-bench.sh BUILD_DIR LESSON — prints what a lesson's benchmark programs print with --bench
# (stdout and stderr together, as a terminal shows them), in the form of the make-bench block of
# the lesson's READMEs: each program that the lesson's lesson.mk names in NN-topic_BENCH
# (build/NN-topic/bench.txt, written by the Makefile) under a "################ LESSON/PROGRAM
# --bench ################" line, as `make bench` shows them, a blank line between them.
# Then, on the last line, "captured-on: <GPU 0 name> | devices: N | make bench" for
# fill-expected-output.py --bench. Exits 1, after printing everything, when a program neither
# passed nor said SKIP (exit code other than 0 and 77). `make bench-list` lists the lessons.
set -uo pipefail
. "$(dirname "$0")/lesson-label.sh"
build=${1:?usage: capture-bench.sh BUILD_DIR LESSON}
lesson=${2:?usage: capture-bench.sh BUILD_DIR LESSON}
list="$build/$lesson/bench.txt"
[ -f "$list" ] || { echo "capture-bench.sh: no $list: build the lesson first (make build-NN)" >&2; exit 2; }
mapfile -t programs < <(grep -v '^$' "$list")
[ ${#programs[@]} -gt 0 ] || { echo "capture-bench.sh: $lesson has no --bench program (NN-topic_BENCH in lesson.mk)" >&2; exit 2; }
status=0
first=1
for program in "${programs[@]}"; do
    [ $first = 1 ] || echo
    first=0
    echo "################ $(lesson_label "$build/$lesson/$program") --bench ################"
    "$build/$lesson/$program" --bench 2>&1
    code=$?
    if [ "$code" != 0 ] && [ "$code" != 77 ]; then
        echo "capture-bench.sh: $lesson/$program --bench exited with $code" >&2
        status=1
    fi
done
machine=$("$build/tools/driver-probe" --machine) || status=1
echo "captured-on: $machine | make bench"
exit $status
