# Lesson 21 settings (the Makefile's header lists them).

# Five programs, run in this order by make run-21. Each one that provokes an error the driver
# cannot take back (a sticky error, a device assert, a coredump) or checkpoints a process does
# it in a child: the same program started again with --child ROLE (children.cpp).
21-when-things-go-wrong_PROGRAMS := sticky_errors late_errors driver_logs coredump checkpoint
21-when-things-go-wrong_sticky_errors_SOURCES := children.cpp
21-when-things-go-wrong_late_errors_SOURCES := children.cpp
21-when-things-go-wrong_coredump_SOURCES := children.cpp
21-when-things-go-wrong_checkpoint_SOURCES := children.cpp checkpoint_bench.cpp

# checkpoint has a --bench mode (checkpoint and restore of 256 MiB, 1 GiB, 4 GiB): make bench runs it.
21-when-things-go-wrong_BENCH := checkpoint

# checkpoint compares free device memory before, during and after a checkpoint; coredump times
# the dump (and a dump stops the faulting context's work while it is written): the tests run
# both with nothing beside them.
21-when-things-go-wrong_RUN_ALONE := coredump checkpoint
