#!/usr/bin/env bash
# sanitize-lessons.sh BINARY... — runs every lesson under compute-sanitizer with
# memcheck (--leak-check full), racecheck, initcheck and synccheck, then prints a
# table lesson x tool with the error count. Exits non-zero on any error.
# A lesson that exits 77 (hardware not here) is reported as SKIP.
# API errors are not counted (--report-api-errors no): lessons provoke some on
# purpose to show them, and an unexpected one already ends a lesson with exit 1.
set -uo pipefail

sanitizer=${COMPUTE_SANITIZER:-compute-sanitizer}
command -v "$sanitizer" >/dev/null 2>&1 || [ -x "$sanitizer" ] || {
    echo "compute-sanitizer not found (set COMPUTE_SANITIZER=/path/to/compute-sanitizer)" >&2
    exit 1
}
tools=(memcheck racecheck initcheck synccheck)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0
rows=()
notes=()

for binary in "$@"; do
    # "NN-topic", or "NN-topic/program" for a lesson of several programs.
    folder=$(basename "$(dirname "$binary")")
    lesson=$folder
    [ "$(basename "$binary")" = "$folder" ] || lesson="$folder/$(basename "$binary")"
    row=$(printf '%-24s' "$lesson")
    for tool in "${tools[@]}"; do
        extra=()
        [ "$tool" = memcheck ] && extra=(--leak-check full)
        # A lesson may add options for one tool in <lesson>/sanitizer-<tool>.args, with
        # the reason in its comments; the table marks such cells with '*'.
        options_file="$folder/sanitizer-$tool.args"
        mark=""
        if [ -f "$options_file" ]; then
            read -r -a from_file <<<"$(grep -v '^#' "$options_file" | tr '\n' ' ')"
            extra+=("${from_file[@]}")
            mark="*"
            notes+=("$lesson $tool: ${from_file[*]} (why: $options_file)")
        fi
        printf '\n################ %s: %s ################\n' "$lesson" "$tool"
        "$sanitizer" --tool "$tool" --report-api-errors no "${extra[@]}" --error-exitcode 99 "$binary" >"$log" 2>&1
        code=$?
        tail -n 5 "$log"
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

printf '\n%-24s' "lesson"; printf ' %-10s' "${tools[@]}"; printf '\n'
printf '%s\n' "--------------------------------------------------------------------"
printf '%s\n' "${rows[@]}"
[ ${#notes[@]} -eq 0 ] || printf '* %s\n' "${notes[@]}"
exit $failed
