# Lesson 19 settings (the Makefile's header lists them).

# Five programs, run in this order by make run-19: pitched memory and CUDA arrays (copies only),
# texture filtering (point, linear, over an array and over pitched memory), address modes and
# read modes, surfaces, then a sub-rectangle copy and a stencil two ways each (with --bench, timed).
19-arrays-textures-surfaces_PROGRAMS := pitched_and_arrays filtering address_and_read_modes surfaces copy_and_stencil

# copy_and_stencil has a --bench mode: make bench runs it.
19-arrays-textures-surfaces_BENCH := copy_and_stencil
# With --bench it times copies and kernels against the DRAM peak: the tests run it with nothing beside it.
19-arrays-textures-surfaces_RUN_ALONE := copy_and_stencil
