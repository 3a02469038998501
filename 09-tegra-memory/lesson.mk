# Lesson 09: a --bench mode (pipeline timings over more passes), and -ldl for the
# dlopen/dlinfo calls (part of libc since glibc 2.34, a separate library before).
09-tegra-memory_BENCH := yes
09-tegra-memory_LDLIBS := -ldl
