# Lesson 05: `make bench` runs this program with --bench (bandwidth sweep up to 256 MiB).
05-memory-alloc_BENCH := yes
