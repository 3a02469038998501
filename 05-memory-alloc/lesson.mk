# Five programs, one idea each, run in this order by make run-05.
05-memory-alloc_PROGRAMS := device_memory pinned_memory async_copies streams_and_events bandwidth
# bandwidth --bench: the sweep up to 256 MiB and "bench:" lines for make bench.
05-memory-alloc_BENCH := bandwidth
# device_memory compares free device memory exactly and bandwidth times copies: the tests run them
# with nothing beside them.
05-memory-alloc_RUN_ALONE := device_memory bandwidth
