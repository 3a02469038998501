# Lesson 17 settings (the Makefile's header lists them).

# Two programs, run in this order by make run-17: how the driver partitions the SMs
# (requested vs granted sizes, green contexts, which SMs each one's kernels use), then
# the latency of a short kernel beside a long one, with and without green contexts.
17-green-contexts_PROGRAMS := partitions isolation

# isolation has a --bench mode: make bench runs it.
17-green-contexts_BENCH := isolation
# isolation compares kernel latencies: the tests run it with nothing beside it.
17-green-contexts_RUN_ALONE := isolation
