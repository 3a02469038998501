# Lesson 19 settings (the Makefile's header lists them).

# Six programs, run in this order by make run-19: pitched memory and CUDA arrays (copies only),
# texture filtering (point, linear, over an array and over pitched memory), address modes and
# read modes, surfaces, a sub-rectangle copy and a stencil two ways each (with --bench, timed), then
# the descriptors the driver gives back, the 1D linear texture limit and an array's memory.
19-arrays-textures-surfaces_PROGRAMS := pitched_and_arrays filtering address_and_read_modes surfaces copy_and_stencil \
                                       descriptors_and_limits

# copy_and_stencil has a --bench mode: make bench runs it.
19-arrays-textures-surfaces_BENCH := copy_and_stencil
# copy_and_stencil --bench times copies and kernels against the DRAM peak, descriptors_and_limits
# compares free device memory: the tests run them with nothing beside them.
19-arrays-textures-surfaces_RUN_ALONE := copy_and_stencil descriptors_and_limits
