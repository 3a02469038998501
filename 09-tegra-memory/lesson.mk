# Lesson 09: six short programs, run in this order by make run-09. image_pipeline has a
# --bench mode (pipeline timings over more passes). -ldl for the dlopen/dlinfo calls
# (part of libc since glibc 2.34, a separate library before).
09-tegra-memory_PROGRAMS := memory_attributes image_pipeline matrix_attach allocatable_memory upgrade_check tegra_features
09-tegra-memory_BENCH := image_pipeline
09-tegra-memory_LDLIBS := -ldl
# image_pipeline times three pipelines but no check depends on the times (the favoured way is a
# printed observation, compared by its label only): it runs beside other programs in the tests.
