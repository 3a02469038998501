# Lesson 11: `make bench` runs the program with --bench (growth timing 2 MiB -> 1 GiB).
11-virtual-memory_BENCH := yes
