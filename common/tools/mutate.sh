#!/usr/bin/env bash
# mutate.sh PATCH... — mutation tests: each patch breaks one behaviour of one lesson program,
# and the program's own checks must notice.
#
# A mutant is tests/mutants/NN-topic/NAME.patch: a unified diff (paths a/NN-topic/FILE,
# b/NN-topic/FILE, as `git diff` writes them) preceded by a header that patch(1) ignores:
#   Mutant: what the patch breaks, in one sentence
#   Program: the lesson program it breaks (a name from build/NN-topic/programs.txt)
#   Arguments: optional command-line arguments for the run
#   Expect-Check: the name of the check that must then fail ("check NAME: FAIL")
#
# For each patch: copy the lesson (timestamps kept) beside links to everything else, apply the
# patch, build the lesson with the course's Makefile into its own build folder (seeded with the
# course's build, so only the patched files recompile), and — where a GPU is usable — run the
# program. A mutant is CAUGHT when the program exits 1, prints "Result = FAIL" and prints
# "check NAME: FAIL" for the check its header names. Without a GPU every mutant is applied and
# built only. Builds run in parallel (MUTATE_JOBS, default: the number of cores). Runs of
# programs that the lesson's lesson.mk lists in NN-topic_RUN_ALONE (they time something or
# compare free device memory) are one at a time; the others MUTATE_RUNS (default 8) at a time.
# The output of every mutant that was not caught is printed after the runs.
#
# Environment: BUILD (the course's build folder, default build), MAKE, DRIVER_PROBE (a
# driver-probe binary: its exit code says whether a GPU is usable), MUTATE_RUN=0 (build only),
# MUTATE_TIMEOUT (seconds a mutant may run, default 60).
# Each mutant's result is also written, one "NN-topic/NAME<TAB>result<TAB>patch hash" line each, to
# BUILD/mutate-results.txt, headed by the GPU it ran on (common/tools/record-mutants.py keeps it).
# Exit code: 0 when every mutant applied and built and, where run, was caught or could not
# apply here (exit 77: "not applicable"); 1 otherwise.
set -uo pipefail
. "$(dirname "$0")/lesson-label.sh"

root=$(pwd)
build=$(realpath -m "${BUILD:-build}")
build_as_given=${BUILD:-build}  # as the .d files of the course's build spell it
build_as_given=${build_as_given%/}
work="$build/mutants"
jobs=${MUTATE_JOBS:-$(nproc)}
make_cmd=${MAKE:-make}

header() {  # header FIELD PATCH: the field's value from the patch's header (before the diff)
    sed -n "/^--- /q; s/^$1: *//p" "$2" | head -n 1
}

run_gpu=0
if [ "${MUTATE_RUN:-1}" != 0 ] && [ -n "${DRIVER_PROBE:-}" ] && "$DRIVER_PROBE" >/dev/null 2>&1; then
    run_gpu=1
fi

if [ $# -eq 0 ]; then
    echo "mutate: no mutants given (tests/mutants/NN-topic/*.patch)" >&2
    exit 1
fi

# Prepares and builds one mutant; writes its state to DIR/state: "built", "did not apply: ...",
# "header: ..." or "build failed". Runs as a background job.
prepare() {
    local patch=$1 dir=$2
    local lesson program check
    lesson=$(basename "$(dirname "$patch")")
    program=$(header Program "$patch")
    check=$(header Expect-Check "$patch")
    rm -rf "$dir" && mkdir -p "$dir/src" "$dir/build"
    if [ ! -d "$root/$lesson" ] || [ -z "$program" ] || [ -z "$check" ] || [ -z "$(header Mutant "$patch")" ]; then
        echo "header: needs Mutant, Program and Expect-Check, in tests/mutants/<lesson folder>/" >"$dir/state"
        return
    fi
    # The source tree: the lesson copied, everything else linked.
    local entry
    for entry in "$root"/*; do
        [ "$(basename "$entry")" = "$(basename "$build")" ] && continue
        [ "$(basename "$entry")" = "$lesson" ] && continue
        ln -s "$entry" "$dir/src/$(basename "$entry")"
    done
    cp -a "$root/$lesson" "$dir/src/$lesson"
    if ! patch -s -p1 -d "$dir/src" --no-backup-if-mismatch -r - <"$patch" >"$dir/patch.log" 2>&1; then
        echo "did not apply: $(head -n 1 "$dir/patch.log")" >"$dir/state"
        return
    fi
    # Seed the build with the course's own (timestamps kept) so that only what the patch
    # touched is rebuilt.
    [ -d "$build/$lesson" ] && cp -a "$build/$lesson" "$dir/build/"
    [ -d "$build/setup" ] && cp -a "$build/setup" "$dir/build/"
    # The dependency files name the course's build folder: point them at this one, so that make
    # rebuilds exactly what the patched file feeds (a patched header included by three programs
    # rebuilds those three) and nothing else.
    local dep
    while IFS= read -r -d '' dep; do
        sed -i -E "s#(^|[[:space:]])($build_as_given|$build)/#\1$dir/build/#g" "$dep"
    done < <(find "$dir/build/$lesson" -name '*.d' -print0 2>/dev/null)
    if (cd "$dir/src" && $make_cmd --no-print-directory BUILD="$dir/build" "build-${lesson%%-*}") >"$dir/build.log" 2>&1 &&
        [ -x "$dir/build/$lesson/$program" ]; then
        echo "built" >"$dir/state"
    else
        echo "build failed" >"$dir/state"
    fi
}

# Build every mutant, at most $jobs at a time.
patches=("$@")
for patch in "${patches[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    name=$(basename "$(dirname "$patch")")/$(basename "$patch" .patch)
    prepare "$patch" "$work/$name" &
done
wait

# Runs one built mutant and writes its verdict to DIR/status (and its output to DIR/run.log).
run_mutant() {
    local patch=$1 dir=$2 lesson=$3 program=$4 check=$5 code reasons
    local -a arguments
    read -r -a arguments <<<"$(header Arguments "$patch")"
    (cd "$dir" && timeout "${MUTATE_TIMEOUT:-60}" "$dir/build/$lesson/$program" "${arguments[@]}") >"$dir/run.log" 2>&1
    code=$?
    if [ $code -eq 77 ]; then
        echo "not applicable here: $(skip_reason "$dir/run.log")" >"$dir/status"
    elif [ $code -eq 1 ] && grep -qx 'Result = FAIL' "$dir/run.log" && grep -qxF "check $check: FAIL" "$dir/run.log"; then
        echo "caught" >"$dir/status"
    else
        reasons=()
        [ $code -ne 1 ] && reasons+=("exit $code")
        grep -qx 'Result = FAIL' "$dir/run.log" || reasons+=("no 'Result = FAIL'")
        grep -qxF "check $check: FAIL" "$dir/run.log" || reasons+=("no 'check $check: FAIL'")
        echo "NOT CAUGHT ($(IFS=';'; echo "${reasons[*]}" | sed 's/;/; /g'))" >"$dir/status"
    fi
    # One line as each mutant ends, so that a run cut short by a time limit still says what ran.
    printf 'ran %s/%s: %s\n' "$lesson" "$(basename "$patch" .patch)" "$(cat "$dir/status")"
}

# Run them on the GPU: mutants of programs that may run beside others (the lesson's
# run-alone.txt, from NN-topic_RUN_ALONE, does not name them) a few at a time, then the others
# one at a time, with nothing beside them.
if [ $run_gpu = 1 ]; then
    for phase in together alone; do
        for patch in "${patches[@]}"; do
            name=$(basename "$(dirname "$patch")")/$(basename "$patch" .patch)
            dir="$work/$name"
            lesson=$(basename "$(dirname "$patch")")
            program=$(header Program "$patch")
            [ "$(cat "$dir/state" 2>/dev/null)" = built ] || continue
            if grep -qxF "$program" "$build/$lesson/run-alone.txt" 2>/dev/null; then
                [ $phase = alone ] || continue
                run_mutant "$patch" "$dir" "$lesson" "$program" "$(header Expect-Check "$patch")"
            else
                [ $phase = together ] || continue
                while [ "$(jobs -rp | wc -l)" -ge "${MUTATE_RUNS:-8}" ]; do wait -n; done
                run_mutant "$patch" "$dir" "$lesson" "$program" "$(header Expect-Check "$patch")" &
            fi
        done
        wait
    done
fi

rows=()
results=()
bad=0
caught=0
for patch in "${patches[@]}"; do
    name=$(basename "$(dirname "$patch")")/$(basename "$patch" .patch)
    dir="$work/$name"
    check=$(header Expect-Check "$patch")
    state=$(cat "$dir/state" 2>/dev/null || echo "not prepared")
    if [ "$state" != built ]; then
        status="$state"
        bad=1
        [ -f "$dir/build.log" ] && [ "$state" = "build failed" ] && tail -n 20 "$dir/build.log" | sed "s|^|  $name: |" >&2
    elif [ $run_gpu = 0 ]; then
        status="built (not run: no GPU)"
    else
        status=$(cat "$dir/status" 2>/dev/null || echo "NOT CAUGHT (did not run)")
        case $status in
            caught) caught=$((caught + 1)) ;;
            "not applicable here"*) ;;
            *) bad=1
               # What the program printed, for the mutants that were not caught.
               printf '\n---- %s (%s): %s ----\n' "$name" "$(header Mutant "$patch")" "$status"
               tail -n 40 "$dir/run.log" ;;
        esac
    fi
    rows+=("$(printf '%-46s %-58s %s' "$name" "$check" "$status")")
    results+=("$(printf '%s\t%s\t%s' "$name" "$status" "$(sha1sum <"$patch" | cut -c1-12)")")
done

{
    if [ $run_gpu = 1 ]; then
        echo "# ran on: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1) | devices: $(nvidia-smi -L 2>/dev/null | wc -l)"
    else
        echo "# built only: no usable GPU"
    fi
    printf '%s\n' "${results[@]}"
} >"$build/mutate-results.txt"

printf '\n%-46s %-58s %s\n' "mutant" "expected check" "result"
printf '%s\n' "$(printf '%.0s-' {1..130})"
printf '%s\n' "${rows[@]}"
if [ $run_gpu = 1 ]; then
    echo "mutants: ${#patches[@]}, caught: $caught"
else
    echo "mutants: ${#patches[@]} applied and built; none run (no usable GPU: the driver probe says why)"
fi
exit $bad
