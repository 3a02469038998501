#!/usr/bin/env bash
# run-tests.sh TEST_BINARY [Catch2 arguments] — the Catch2 suite as several processes at once
# (what `make test` runs).
#
# Each process runs one shard of the tests: Catch2's --shard-count/--shard-index split the list,
# in declaration order, into that many runs of neighbouring tests. The harness (tests/harness.h)
# makes the processes share what they must:
#   - the plain run of every lesson program is made once, by whichever process needs it first,
#     and read from COURSE_TEST_SHARED_RUNS by the others;
#   - every program run takes a lock on the machine: the programs that time something or compare
#     free device memory (lesson.mk's RUN_ALONE) run with nothing beside them, in any process;
#   - the lessons built outside the course are built by one process, then found built by the others.
# Each process's report is printed in shard order once all have ended, then one closing line for
# the whole suite: "N passed, N failed, N skipped" (test cases, summed over the processes).
#
# TEST_SHARDS=N sets the number of processes; the default is 4 where there are 8 cores or more,
# else 2. TEST_SHARDS=1 runs one process, as the test binary does by itself. Arguments that list
# or describe instead of running tests (-l, --list-*, -h, --help) go to one process.
# Exit code: 0 when every process passed, 1 otherwise.
set -uo pipefail
bin=${1:?usage: run-tests.sh TEST_BINARY [Catch2 arguments]}
shift

for arg in "$@"; do
    case "$arg" in
    -l | --list-* | -h | -\? | --help) exec "$bin" "$@" ;;
    esac
done

cores=$(nproc 2>/dev/null || echo 2)
shards=${TEST_SHARDS:-$([ "$cores" -ge 8 ] && echo 4 || echo 2)}
if ! [[ $shards =~ ^[1-9][0-9]*$ ]]; then
    echo "run-tests: TEST_SHARDS must be a positive number (got '$shards')" >&2
    exit 2
fi
if [ "$shards" = 1 ]; then
    exec "$bin" "$@"
fi

work=$(dirname "$bin")/shards
rm -rf "$work" && mkdir -p "$work" || exit 1
export COURSE_TEST_SHARED_RUNS=$work/shared-runs
echo "run-tests: $shards test processes (TEST_SHARDS=$shards); their reports follow when all have ended"
start=$(date +%s)
pids=()
for ((i = 0; i < shards; i++)); do
    COURSE_TEST_SHARD=$i "$bin" --shard-count "$shards" --shard-index "$i" --allow-running-no-tests "$@" \
        >"$work/$i.log" 2>&1 &
    pids+=($!)
done

status=0
passed=0 failed=0 skipped=0
for ((i = 0; i < shards; i++)); do
    wait "${pids[$i]}" || status=1
    log=$work/$i.log
    # The process's own closing line (tests/summary_listener.cpp) is its last line.
    summary=$(tail -n 1 "$log")
    echo "================ test process $((i + 1)) of $shards ================"
    if [[ $summary =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
        sed '$d' "$log"
        echo "process $((i + 1)): $summary"
        passed=$((passed + BASH_REMATCH[1]))
        failed=$((failed + BASH_REMATCH[2]))
        skipped=$((skipped + BASH_REMATCH[3]))
    else
        cat "$log"
        echo "process $((i + 1)): ended without its closing line (exit code above); counted as one failure"
        failed=$((failed + 1))
        status=1
    fi
done
echo "run-tests: $shards processes, $(($(date +%s) - start)) s"
echo "$passed passed, $failed failed, $skipped skipped"
exit $status
