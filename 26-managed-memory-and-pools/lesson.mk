# Lesson 26 settings (the Makefile's header lists them).

# Four programs, run in this order by make run-26: managed memory (prefetch, advice, range
# attributes, host atomics), the managed-memory batches of 13.0's cuda.h (prefetch, discard,
# both), pools across devices (the current pool of a location, allocation properties, the graph
# allocator's reserve, a pool opened to another GPU), and the first-touch benchmark.
26-managed-memory-and-pools_PROGRAMS := managed_memory managed_batches pools_across_devices first_touch_bench

# first_touch_bench has a --bench mode: make bench runs it.
26-managed-memory-and-pools_BENCH := first_touch_bench
# first_touch_bench times kernels and takes 1 GiB (after checking cuMemGetInfo); pools_across_devices
# compares free device memory before and after its step 3: the tests run both with nothing beside them.
26-managed-memory-and-pools_RUN_ALONE := pools_across_devices first_touch_bench
