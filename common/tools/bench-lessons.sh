#!/usr/bin/env bash
# bench-lessons.sh BINARY... — runs each lesson's benchmark mode (--bench), then
# prints one table of every "bench: <metric> = <value> <unit>" line they printed, headed
# by the GPU it ran on. Each ratio a lesson prints compares numbers measured in that same
# run (or derived from the device's own attributes). When NVIDIA's nvbandwidth is on the
# PATH it runs too, and its copy-engine figures are printed beside the lessons' own.
set -uo pipefail
. "$(dirname "$0")/lesson-label.sh"

rows=()
failed=0
add_row() { rows+=("$(printf '%-24s %-44s %s' "$1" "$2" "$3")"); }  # add_row LESSON METRIC VALUE
log=$(mktemp)
trap 'rm -f "$log"' EXIT

for binary in "$@"; do
    lesson=$(lesson_label "$binary")
    printf '\n################ %s --bench ################\n' "$lesson"
    "$binary" --bench 2>&1 | tee "$log"
    code=${PIPESTATUS[0]}
    if [ "$code" = 77 ]; then  # not applicable here: the lesson's own line says why
        reason=$(skip_reason "$log")
        add_row "$lesson" "SKIP ${reason:-(no reason printed)}" "-"
        continue
    fi
    [ "$code" = 0 ] || { failed=1; add_row "$lesson" "(benchmark failed)" "exit $code"; }
    while IFS= read -r line; do
        metric=${line%% = *}
        value=${line#* = }
        add_row "$lesson" "$metric" "$value"
    done < <(sed -n 's/^bench: //p' "$log")
done

if command -v nvbandwidth >/dev/null 2>&1; then
    printf '\n################ nvbandwidth ################\n'
    nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce device_to_device_memcpy_read_ce 2>&1 | tee "$log"
    while read -r _ testcase value; do
        add_row nvbandwidth "$testcase (SUM)" "$value GB/s"
    done < <(grep '^SUM ' "$log")
else
    add_row nvbandwidth "(not on the PATH: not run)" "-"
fi

machine=$("${DRIVER_PROBE:-build/tools/driver-probe}" --machine 2>/dev/null || echo "unknown GPU")
printf '\nGPU: %s\n' "$machine"
printf '%-24s %-44s %s\n' "lesson" "metric" "value"
printf '%s\n' "------------------------------------------------------------------------------------------"
printf '%s\n' "${rows[@]}"
exit $failed
