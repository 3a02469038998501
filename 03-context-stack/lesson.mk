# Four programs, one idea each, run in this order by make run-03.
03-context-stack_PROGRAMS := push_pop synchronize_scope memory_lifetime thread_stacks
# std::thread: glibc before 2.34 (older Jetson images) needs -pthread to compile and link it.
03-context-stack_CXXFLAGS := -pthread
03-context-stack_LDLIBS := -pthread
