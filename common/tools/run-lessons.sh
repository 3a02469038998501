#!/usr/bin/env bash
# run-lessons.sh BINARY... — runs lesson programs in order, a header before each,
# then prints a summary table: lesson, PASS / SKIP (exit 77, with the reason) / FAIL, seconds.
# Exits non-zero if any lesson failed.
set -uo pipefail
. "$(dirname "$0")/lesson-label.sh"

rows=()
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

for binary in "$@"; do
    lesson=$(lesson_label "$binary")
    printf '\n################ %s ################\n' "$lesson"
    start=$EPOCHREALTIME
    "$binary" 2>&1 | tee "$log"
    code=${PIPESTATUS[0]}
    seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
    case $code in
        0) status=PASS ;;
        77) # the lesson's own line says why: "Result = SKIP (reason)"
            reason=$(skip_reason "$log")
            status="SKIP ${reason:-(no reason printed)}" ;;
        *) status="FAIL (exit $code)"; failed=1 ;;
    esac
    rows+=("$(printf '%-24s %6.2f  %s' "$lesson" "$seconds" "$status")")
done

printf '\n%-24s %6s  %s\n' "lesson" "sec" "result"
printf '%s\n' "------------------------------------------------------------"
printf '%s\n' "${rows[@]}"
exit $failed
