# Lesson 06 settings (the Makefile's header lists them).

# The program has a --bench mode: make bench runs it.
06-module-and-launch_BENCH := yes

# main.cpp compares the GPU with the SM the cubin was built for (the Makefile's CUBIN_ARCH).
06-module-and-launch_CXXFLAGS := -DLESSON06_CUBIN_ARCH=$(CUBIN_ARCH)

# Only the cuLink pair needs relocatable device code (-rdc=true): link_main calls a function
# that link_helper defines. _KERNEL_FLAGS would apply -rdc=true to every kernel of the lesson,
# and `nvcc -rdc=true -cubin` writes a relocatable ELF (readelf: REL) meant for a linker, not
# the executable cubin (EXEC) that cuModuleLoad* is given everywhere else in the lesson. So the
# flag goes to these two files alone, through a pattern-specific variable.
$(BUILD)/06-module-and-launch/kernels/link_%: NVCCFLAGS += -rdc=true
