# Lesson 23 settings (the Makefile's header lists them).

# Five short programs, run in this order by make run-23: conditional nodes (IF and WHILE), every
# node kind through cuGraphAddNode and what an exec lets you change, reading and rewiring a graph
# (with its clone and a user object), more from stream capture (with a DOT picture), and a graph
# that a kernel launches.
23-graphs-that-decide_PROGRAMS := conditionals general_nodes introspect capture_more device_launch typed_nodes graph_or_exec

# No _KERNEL_FLAGS: kernels/*.cu call device-runtime functions (cudaGraphSetConditional, the
# device-side cudaGraphLaunch) yet are built without -rdc and without libcudadevrt. That this
# works is observed (an NVIDIA H200, nvcc 13.0), not documented: the CUDA Programming Guide's one
# build line for device-runtime code is nvcc -rdc=true ... -lcudadevrt (section 4.18.4.1). The
# README says which checks decide it.

# conditionals has a --bench mode (the WHILE loop as one graph vs one launch per sweep): make bench
# runs it. Its plain run times nothing, so no program needs to run alone.
23-graphs-that-decide_BENCH := conditionals
