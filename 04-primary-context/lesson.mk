# std::thread: glibc before 2.34 (older Jetson images) needs -pthread to compile and link it.
04-primary-context_CXXFLAGS := -pthread
04-primary-context_LDLIBS := -pthread
# --bench: more timing runs and "bench:" lines for make bench.
04-primary-context_BENCH := yes
