#!/usr/bin/env bash
# bench-lessons.sh BINARY... — runs each lesson's benchmark mode (--bench), then
# prints one table of every "bench: <metric> = <value> <unit>" line they printed.
set -uo pipefail

rows=()
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

for binary in "$@"; do
    # "NN-topic", or "NN-topic/program" for a lesson of several programs.
    folder=$(basename "$(dirname "$binary")")
    lesson=$folder
    [ "$(basename "$binary")" = "$folder" ] || lesson="$folder/$(basename "$binary")"
    printf '\n################ %s --bench ################\n' "$lesson"
    "$binary" --bench 2>&1 | tee "$log"
    code=${PIPESTATUS[0]}
    [ "$code" = 0 ] || { failed=1; rows+=("$(printf '%-24s %-44s %s' "$lesson" "(benchmark failed)" "exit $code")"); }
    while IFS= read -r line; do
        metric=${line%% = *}
        value=${line#* = }
        rows+=("$(printf '%-24s %-44s %s' "$lesson" "$metric" "$value")")
    done < <(sed -n 's/^bench: //p' "$log")
done

printf '\n%-24s %-44s %s\n' "lesson" "metric" "value"
printf '%s\n' "------------------------------------------------------------------------------------------"
printf '%s\n' "${rows[@]}"
exit $failed
