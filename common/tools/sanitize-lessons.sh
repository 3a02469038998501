#!/usr/bin/env bash
# sanitize-lessons.sh BINARY... — runs every lesson program under compute-sanitizer with
# memcheck (--leak-check full), racecheck, initcheck and synccheck, then prints a
# table program x tool with the error count. Exits non-zero on any error.
# A program that exits 77 (hardware not here) is reported as SKIP.
# API errors are not counted (--report-api-errors no): lessons provoke some on
# purpose to show them, and an unexpected one already ends a lesson with exit 1.
# SANITIZE_JOBS=N runs N sanitizer runs at a time (default 1); each run's log is kept
# apart and the table comes out the same. The errors each tool finds do not depend on it,
# but programs that check that free device memory comes back (lessons 03, 05, 11, 12, 13)
# exit 1 when other runs allocate beside them: take the verdict from a run with 1.
set -uo pipefail
. "$(dirname "$0")/lesson-label.sh"

sanitizer=${COMPUTE_SANITIZER:-compute-sanitizer}
command -v "$sanitizer" >/dev/null 2>&1 || [ -x "$sanitizer" ] || {
    echo "compute-sanitizer not found (set COMPUTE_SANITIZER=/path/to/compute-sanitizer)" >&2
    exit 1
}
jobs=${SANITIZE_JOBS:-1}
tools=(memcheck racecheck initcheck synccheck)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT


# Options a lesson adds for one tool in <lesson>/sanitizer-<tool>.args, reasons in its comments.
extra_options() {  # extra_options BINARY TOOL
    local file
    file="$(basename "$(dirname "$1")")/sanitizer-$2.args"
    [ -f "$file" ] && grep -v '^#' "$file" | tr '\n' ' '
}

sanitize_one() {  # sanitize_one INDEX BINARY TOOL: writes $logs/INDEX.log and $logs/INDEX.code
    local extra=()
    [ "$3" = memcheck ] && extra=(--leak-check full)
    read -r -a from_file <<<"$(extra_options "$2" "$3")"
    extra+=("${from_file[@]}")
    # COURSE_UNDER_SANITIZER: a program whose check is about timing (kernels overlapping) can
    # say it cannot be made here, where the tool runs one kernel at a time.
    COURSE_UNDER_SANITIZER=1 "$sanitizer" --tool "$3" --report-api-errors no "${extra[@]}" --error-exitcode 99 \
        "$2" >"$logs/$1.log" 2>&1
    echo $? >"$logs/$1.code"
}

index=0
for binary in "$@"; do
    for tool in "${tools[@]}"; do
        while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
        sanitize_one "$index" "$binary" "$tool" &
        index=$((index + 1))
    done
done
wait

failed=0
rows=()
notes=()
index=0
for binary in "$@"; do
    lesson=$(lesson_label "$binary")
    row=$(printf '%-40s' "$lesson")
    for tool in "${tools[@]}"; do
        log="$logs/$index.log"
        code=$(cat "$logs/$index.code")
        index=$((index + 1))
        printf '\n################ %s: %s ################\n' "$lesson" "$tool"
        tail -n 5 "$log"
        mark=""
        if [ -n "$(extra_options "$binary" "$tool")" ]; then
            mark="*"
            notes+=("$lesson $tool: $(extra_options "$binary" "$tool")(why: $(basename "$(dirname "$binary")")/sanitizer-$tool.args)")
        fi
        # memcheck, initcheck, synccheck: "ERROR SUMMARY: N errors";
        # racecheck: "RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)".
        errors=$(sed -n -e 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' \
                        -e 's/^========= RACECHECK SUMMARY: .*(\([0-9]*\) error.*/\1/p' "$log" | tail -n 1)
        if [ "$code" = 77 ]; then
            cell=SKIP
        elif [ -z "$errors" ]; then
            cell="?(exit $code)"; failed=1
        else
            cell=$errors
            { [ "$errors" != 0 ] || [ "$code" != 0 ]; } && failed=1
            [ "$code" != 0 ] && [ "$errors" = 0 ] && cell="0(exit $code)"
        fi
        row+=$(printf ' %-10s' "$cell$mark")
    done
    rows+=("$row")
done

printf '\n%-40s' "program"; printf ' %-10s' "${tools[@]}"; printf '\n'
printf '%s\n' "------------------------------------------------------------------------------------"
printf '%s\n' "${rows[@]}"
[ ${#notes[@]} -eq 0 ] || printf '* %s\n' "${notes[@]}"
exit $failed
