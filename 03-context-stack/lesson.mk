# std::thread: glibc before 2.34 (older Jetson images) needs -pthread to compile and link it.
03-context-stack_CXXFLAGS := -pthread
03-context-stack_LDLIBS := -pthread
