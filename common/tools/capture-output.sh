#!/usr/bin/env bash
# capture-output.sh BUILD_DIR LESSON — prints what a lesson's programs print (stdout and
# stderr together, as a terminal shows them), in the form the README's "Expected output"
# block holds and tests/test_docs.cpp compares: one program's output as it is; for a
# lesson of several programs, each one's output under a "################ LESSON/PROGRAM
# ################" line, a blank line between them, as `make run-NN` shows them.
# Then, on the last line, "captured-on: <GPU 0 name> | devices: N" for fill-expected-output.py.
set -uo pipefail
build=${1:?usage: capture-output.sh BUILD_DIR LESSON}
lesson=${2:?usage: capture-output.sh BUILD_DIR LESSON}
mapfile -t programs < <(cat "$build/$lesson/programs.txt" 2>/dev/null || echo "$lesson")
first=1
for program in "${programs[@]}"; do
    [ -n "$program" ] || continue
    if [ ${#programs[@]} -gt 1 ]; then
        [ $first = 1 ] || echo
        echo "################ $lesson/$program ################"
    fi
    first=0
    "$build/$lesson/$program" 2>&1
done
echo "captured-on: $("$build/tools/driver-probe" --machine)"
