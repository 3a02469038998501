# Lesson 16 settings (the Makefile's header lists them).

# Four short programs, run in this order by make run-16: thread-block clusters, a
# cooperative launch, programmatic dependent launch, and the attributes that are hints.
16-launch-attributes_PROGRAMS := clusters cooperative dependent-launch hints

# dependent-launch has a --bench mode: make bench runs it.
16-launch-attributes_BENCH := dependent-launch
# dependent-launch checks when kernels start relative to each other: the tests run it alone.
16-launch-attributes_RUN_ALONE := dependent-launch
