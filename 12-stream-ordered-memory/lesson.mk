# Lesson 12: two programs, run in this order by make run-12.
12-stream-ordered-memory_PROGRAMS := pool_basics cross_stream_reuse
# make bench runs pool_basics with --bench (10,000 allocate + free pairs, three ways).
12-stream-ordered-memory_BENCH := pool_basics
# pool_basics compares free device memory (and times pairs with --bench): the tests run it alone.
12-stream-ordered-memory_RUN_ALONE := pool_basics
