# main.cpp calls the runtime's cudaGetDriverEntryPointByVersion (step 8) but has no
# .cu file, so the runtime is asked for here. standalone/dlopen_driver.cpp links
# neither: the Makefile builds it with -ldl only.
08-entry-points_CUDART := yes
