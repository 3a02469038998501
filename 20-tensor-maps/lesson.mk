# Lesson 20 settings (the Makefile's header lists them).

# Four programs, run in this order by make run-20: a tensor map argument by argument and the
# descriptors the driver refuses; a kernel that loads, transforms and stores tiles through the
# copy engine; the 128-byte swizzle and a large copy three ways; im2col loads of a convolution's
# input, and one map pointed at another buffer.
20-tensor-maps_PROGRAMS := encode_rules tile_copy swizzle_bench im2col

# swizzle_bench has a --bench mode: make bench runs it.
20-tensor-maps_BENCH := swizzle_bench
# swizzle_bench times shared-memory reads and copies: the tests run it with nothing beside it.
20-tensor-maps_RUN_ALONE := swizzle_bench
