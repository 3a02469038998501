# Lesson 25 settings (the Makefile's header lists them).

# Nine programs, run in this order by make run-25: the batched copies (a KV-cache gather, 3-D
# batches), the strided and peer copies, copies by array handle and NV12 planes, mipmapped arrays,
# deferred-mapping and sparse arrays, 2-D fills, pointer attributes, and the benchmark.
25-every-way-to-copy_PROGRAMS := batched_gather batched_3d copies_2d_3d_peer array_copies mipmaps \
                                 deferred_and_sparse fills pointers copy_bench

# copy_bench has a --bench mode: make bench runs it.
25-every-way-to-copy_BENCH := copy_bench
# copy_bench times copies with --bench: the tests run it with nothing beside it.
25-every-way-to-copy_RUN_ALONE := copy_bench
