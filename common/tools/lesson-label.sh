# lesson-label.sh — sourced by the runners (run-, bench-, sanitize-lessons.sh): how they name
# a program and how they read why it did not apply.
# lesson_label BINARY: "NN-topic" for a lesson's one program (build/NN-topic/NN-topic),
# "NN-topic/program" for one of several (build/NN-topic/program).
lesson_label() {
    local folder
    folder=$(basename "$(dirname "$1")")
    if [ "$(basename "$1")" = "$folder" ]; then echo "$folder"; else echo "$folder/$(basename "$1")"; fi
}

# skip_reason LOG: the "(reason)" of the last "Result = SKIP (reason)" line a program printed
# when it exited 77 (not applicable here).
skip_reason() { sed -n 's/^Result = SKIP *//p' "$1" | tail -n 1; }
