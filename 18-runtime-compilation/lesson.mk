# Lesson 18 settings (the Makefile's header lists them).

# Three programs, run in this order by make run-18: NVRTC compiles a source for this GPU and
# the driver loads the result (PTX and CUBIN); a templated kernel by name and link-time
# optimisation across two translation units; a compile cache on disk (and --bench).
18-runtime-compilation_PROGRAMS := compile_and_load templates_and_lto compile_cache

# compile_cache has a --bench mode: make bench runs it.
18-runtime-compilation_BENCH := compile_cache
# templates_and_lto times two kernels; compile_cache times compiles and loads and uses one cache
# folder; compile_and_load compares free device memory: the tests run them with nothing beside them.
18-runtime-compilation_RUN_ALONE := compile_and_load templates_and_lto compile_cache

# NVRTC is in every toolkit the course claims. nvJitLink (link-time optimisation at run time)
# is not in every one (CUDA 11.8's toolkit has no nvJitLink.h; NVIDIA's release notes date it to
# 12.0): it is linked, and the code that needs it compiled, only where the toolkit has it, so the
# lesson still builds with an older toolkit and says SKIP there.
18-runtime-compilation_NVJITLINK := $(wildcard $(CUDA_PATH)/lib64/libnvJitLink.so)
# -ldl: compile_cache finds the NVRTC library file with dlsym and dladdr (part of libc since
# glibc 2.34, a separate library before).
18-runtime-compilation_LDLIBS := -lnvrtc $(if $(18-runtime-compilation_NVJITLINK),-lnvJitLink) -ldl
18-runtime-compilation_CXXFLAGS := $(if $(18-runtime-compilation_NVJITLINK),-DLESSON18_HAVE_NVJITLINK=1)

# The programs compile kernels/saxpy.cu at run time, the very file nvcc builds into
# kernels/saxpy.{ptx,cubin,fatbin}: a copy goes next to them, where course::kernelPath finds
# it. Order-only (|), so that the link recipe's $^ does not take it for an object file.
$(BUILD)/18-runtime-compilation/kernels/saxpy.cu: 18-runtime-compilation/kernels/saxpy.cu
	@mkdir -p $(@D)
	$(Q)cp $< $@
$(addprefix $(BUILD)/18-runtime-compilation/,compile_and_load compile_cache): | \
    $(BUILD)/18-runtime-compilation/kernels/saxpy.cu
