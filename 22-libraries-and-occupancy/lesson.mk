# Lesson 22 settings (the Makefile's header lists them).

# Four programs, run in this order by make run-22: a library and everything it tells; one
# CUkernel in several contexts and lazy loading; what a module lists; occupancy predicted by the
# driver against blocks counted on the GPU. contexts --bench starts itself again twice
# (load_timing.cpp), once per loading mode.
22-libraries-and-occupancy_PROGRAMS := libraries contexts modules occupancy
22-libraries-and-occupancy_contexts_SOURCES := load_timing.cpp

# contexts has a --bench mode: make bench runs it.
22-libraries-and-occupancy_BENCH := contexts
# occupancy counts the blocks resident on each SM: another program's kernels on the same GPU
# would change the count. The tests run it with nothing beside it.
22-libraries-and-occupancy_RUN_ALONE := occupancy
