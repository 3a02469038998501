# Four programs, one idea each, run in this order by make run-04.
04-primary-context_PROGRAMS := retain_release shared_by_threads context_costs reset
# std::thread: glibc before 2.34 (older Jetson images) needs -pthread to compile and link it.
04-primary-context_CXXFLAGS := -pthread
04-primary-context_LDLIBS := -pthread
# context_costs --bench: more timing runs and "bench:" lines for make bench.
04-primary-context_BENCH := context_costs
