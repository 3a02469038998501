# Lesson 06 settings (the Makefile's header lists them).

# Six programs, run in this order by make run-06. launch_bench links the <<<>>> half of
# its launch-cost comparison (runtime_launch.cu, built by nvcc, with the CUDA runtime).
06-module-and-launch_PROGRAMS := first_kernel embedded_fatbin load_and_launch jit_and_link param_buffer launch_bench
06-module-and-launch_launch_bench_SOURCES := runtime_launch.cu

# launch_bench has a --bench mode: make bench runs it.
06-module-and-launch_BENCH := launch_bench

# The programs compare the GPU with the SM the cubin was built for (the Makefile's CUBIN_ARCH).
# -I: embedded_fatbin includes "vector_ops_fatbin.h", generated in the build folder's kernels/. The
# name has no folder, so a copy that an outside build left in the lesson's kernels/ is never found.
06-module-and-launch_CXXFLAGS := -DLESSON06_CUBIN_ARCH=$(CUBIN_ARCH) -I$(BUILD)/06-module-and-launch/kernels

# embedded_fatbin carries the fatbin in the executable: bin2c writes vector_ops.fatbin as a
# const array of unsigned long long (8-byte aligned: bin2c's own --alignment option writes an
# include of a header the toolkit does not ship), and the program's object depends on it.
lesson06_fatbin_header := $(BUILD)/06-module-and-launch/kernels/vector_ops_fatbin.h
$(lesson06_fatbin_header): $(BUILD)/06-module-and-launch/kernels/vector_ops.fatbin
	@echo "  BIN2C   $@"
	$(Q)$(CUDA_PATH)/bin/bin2c --const --static --type longlong --name kVectorOpsFatbin $< >$@.tmp && mv $@.tmp $@
$(BUILD)/06-module-and-launch/embedded_fatbin.o $(HEADER_CHECK_DIR)/06-module-and-launch/embedded_fatbin.ok: \
    $(lesson06_fatbin_header)

# Only the cuLink pair needs relocatable device code (-rdc=true): link_main calls a function
# that link_helper defines. _KERNEL_FLAGS would apply -rdc=true to every kernel of the lesson,
# and `nvcc -rdc=true -cubin` writes a relocatable ELF (readelf: REL) meant for a linker, not
# the executable cubin (EXEC) that cuModuleLoad* is given everywhere else in the lesson. So the
# flag goes to these two files alone, through a pattern-specific variable.
$(BUILD)/06-module-and-launch/kernels/link_%: NVCCFLAGS += -rdc=true

# launch_bench's plain run prints launch times and checks none of them: it runs beside other
# programs in the tests.
