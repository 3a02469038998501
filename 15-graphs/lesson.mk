# Lesson 15 settings (the Makefile's header lists them).

# Four short programs, run in this order by make run-15: recording a stream into a graph,
# building one node by node and updating it, memory that the graph owns, and the cost
# of launching a chain of kernels one by one or as one graph.
15-graphs_PROGRAMS := capture explicit-update graph-memory launch-cost

# launch-cost has a --bench mode: make bench runs it.
15-graphs_BENCH := launch-cost
