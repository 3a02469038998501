# Lesson 11: `make bench` runs the program with --bench (growth timing 2 MiB -> 1 GiB).
11-virtual-memory_BENCH := yes
# It compares free device memory and times the growth: the tests run it with nothing beside it.
11-virtual-memory_RUN_ALONE := 11-virtual-memory
