# Lesson 14 settings (the Makefile's header lists them).

# Three programs, run in this order by make run-14: peer access (what it is, its one
# direction, a kernel reading the other GPU's memory), peer copies (checked, and --bench:
# peer against staged through pinned host memory, both directions) and peer queries (the
# refusals one GPU can show, and the link asked three ways on two).
14-multi-gpu_PROGRAMS := peer_access peer_copy peer_queries

# peer_copy has a --bench mode: make bench runs it.
14-multi-gpu_BENCH := peer_copy
