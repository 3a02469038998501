# CUDA Driver API course — one Makefile for every lesson, the tests and the tools.
#
# Lessons are discovered: every folder named NN-topic is a lesson. Inside one:
#   *.cpp              host code of the lesson's program  -> build/NN-topic/NN-topic
#   *.cu               runtime-API code linked into that program (nvcc -c, links cudart)
#                      (or, with _PROGRAMS in lesson.mk, several programs: see below)
#   kernels/*.cu       device code for the Driver API     -> build/NN-topic/kernels/NAME.{ptx,cubin,fatbin}
#   standalone/*.cpp   extra programs that do NOT link libcuda -> build/NN-topic/NAME
#   sanitizer-TOOL.args optional extra compute-sanitizer options for one tool (make sanitize)
#   lesson.mk          optional settings, each prefixed with the folder name, e.g. 07-runtime-interop_LDLIBS:
#                        _LDLIBS        extra libraries (-lcublas)
#                        _CXXFLAGS      extra host compiler flags
#                        _CUDART := yes link the CUDA runtime even without a *.cu file
#                        _KERNEL_FLAGS  extra nvcc flags for kernels/*.cu (-rdc=true)
#                        _SETUP         optional dependencies common/tools/setup.sh looks for (egl gl
#                                       vulkan): build/setup/DEP.cflags and DEP.libs say what it found
#                        _BENCH := yes  the program has a --bench mode (make bench runs it);
#                                       with _PROGRAMS, the names of the programs that have one
#                        _RUN_ALONE     the programs that time something or compare free device
#                                       memory: the tests run them with nothing beside them
#                                       (build/NN-topic/run-alone.txt); the others run in parallel
#                        _PROGRAMS      several programs, run in this order by make run-NN:
#                                       program P is P.cpp plus the files in _P_SOURCES
#                                       (other .cpp or .cu files of the lesson folder),
#                                       linked with _LDLIBS and its own _P_LDLIBS
#                                       -> build/NN-topic/P
#
# `make help` lists the targets.

# Every core by default: `make` and `make test` build in parallel unless -j is given (-j1 too).
ifeq ($(filter -j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif

CUDA_PATH ?= /usr/local/cuda
BUILD     ?= build
NVCC      ?= $(CUDA_PATH)/bin/nvcc
CXX       ?= g++

# Architectures: SASS for each listed SM plus PTX of the newest for forward
# compatibility. CUDA 13 dropped sm_50..sm_72, so sm_75 is the oldest it accepts;
# SMs the installed nvcc does not know are left out (CUDA 11.4 has no sm_89/sm_90).
#   x86-64:  Turing 75, Ampere 80/86, Ada 89, Hopper 90, plus the GPUs present.
#   aarch64 (Jetson): Xavier 72 (toolkits up to 12.x; CUDA 13 dropped it), Orin 87,
#            Thor 110 (CUDA 13 numbering; 101 in CUDA 12.8-12.9), plus the GPUs present.
# The GPUs present come from nvidia-smi's compute capability ("9.0" -> 90); with no GPU
# visible (a build machine, CI) the list above stays as it is. ARCH=... overrides all of it.
ifeq ($(shell uname -m),aarch64)
DEFAULT_ARCH    := 72 87 101 110
else
DEFAULT_ARCH    := 75 80 86 89 90
endif
NATIVE_ARCH     := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | \
                     tr -d '. ' | grep -E '^[0-9]+$$' | sort -n -u)
ARCH            ?= $(shell printf '%s\n' $(DEFAULT_ARCH) $(NATIVE_ARCH) | sort -n -u)
NVCC_KNOWN_ARCH := $(patsubst compute_%,%,$(shell $(NVCC) --list-gpu-arch 2>/dev/null))
BUILD_ARCH      := $(if $(NVCC_KNOWN_ARCH),$(filter $(NVCC_KNOWN_ARCH),$(ARCH)),$(ARCH))
NEWEST_ARCH     := $(lastword $(BUILD_ARCH))
OLDEST_ARCH     := $(firstword $(BUILD_ARCH))
GENCODE         := $(foreach a,$(BUILD_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
                   -gencode arch=compute_$(NEWEST_ARCH),code=compute_$(NEWEST_ARCH)
# A cubin holds SASS for exactly one SM: the GPU present (the first, if several models),
# else the newest listed.
CUBIN_ARCH      ?= $(or $(firstword $(filter $(BUILD_ARCH),$(NATIVE_ARCH))),$(NEWEST_ARCH))
# PTX modules target the oldest SM so that the driver can JIT them for any newer GPU.
PTX_ARCH        ?= $(OLDEST_ARCH)

WARNINGS := -Wall -Wextra
ifeq ($(WERROR),1)
WARNINGS += -Werror
endif
# Host C++ also gets -Wpedantic (the CUDA headers come in through -isystem); nvcc's
# generated host code is not pedantic-clean, so .cu files keep -Wall -Wextra.
CXX_WARNINGS := $(WARNINGS) -Wpedantic
CPPFLAGS := -I. -isystem $(CUDA_PATH)/include
CXXFLAGS ?= -O2 -g
# -pthread: lessons start threads, and glibc before 2.34 (JetPack 5) needs it to compile and link them.
CXXFLAGS += -std=c++20 $(CXX_WARNINGS) -pthread
NVCCFLAGS ?= -O2
comma := ,
empty :=
space := $(empty) $(empty)
NVCCFLAGS += -std=c++17 -Xcompiler $(subst $(space),$(comma),$(strip $(WARNINGS)))
# -Xcompiler reaches the host compiler only: nvcc's own front end and ptxas report device code
# (an unused variable in a kernel, say) as nvcc warnings, which WERROR=1 makes errors too.
ifeq ($(WERROR),1)
NVCCFLAGS += -Werror all-warnings
endif
# The stub libcuda.so is for linking only: at run time the driver's libcuda.so.1 is used.
LDFLAGS  := -pthread -L$(CUDA_PATH)/lib64/stubs -L$(CUDA_PATH)/lib64 -Wl,-rpath,$(CUDA_PATH)/lib64
CUDART   := -lcudart_static -ldl -lrt -lpthread

# Catch2 v3 (>= 3.4). Found through pkg-config; CATCH2_PREFIX points at another install.
ifdef CATCH2_PREFIX
CATCH2_CFLAGS ?= -isystem $(CATCH2_PREFIX)/include
CATCH2_LIBS   ?= -L$(CATCH2_PREFIX)/lib -lCatch2Main -lCatch2
else
CATCH2_CFLAGS ?= $(shell pkg-config --cflags catch2-with-main 2>/dev/null)
CATCH2_LIBS   ?= $(or $(shell pkg-config --libs catch2-with-main 2>/dev/null),-lCatch2Main -lCatch2)
endif

# make check-headers: every host .cpp compiled (syntax only, warnings as errors) against the
# headers in CUDA_INCLUDE, e.g. another toolkit's (common/tools/fetch-cuda-headers.sh).
CUDA_INCLUDE     ?= $(CUDA_PATH)/include
HEADER_CHECK_DIR := $(BUILD)/check-headers/$(subst /,_,$(CUDA_INCLUDE))

ifeq ($(V),1)
Q :=
else
Q := @
endif

TEST_SOURCES ?= $(wildcard tests/*.cpp)
LESSONS := $(sort $(patsubst %/,%,$(wildcard [0-9][0-9]-*/)))
-include $(wildcard $(addsuffix /lesson.mk,$(LESSONS)))

# ---------------------------------------------------------------------------
# One lesson: its program, its modules, its standalone programs.
define PROGRAM_RULES
# $(1) lesson folder, $(2) program name, $(3) its source files (.cpp and .cu)
$(1)_$(2)_OBJS := $$(patsubst %.cpp,$(BUILD)/%.o,$$(filter %.cpp,$(3))) \
                  $$(patsubst %.cu,$(BUILD)/%.cu.o,$$(filter %.cu,$(3)))
$(BUILD)/$(1)/$(2): $$($(1)_$(2)_OBJS)
	@echo "  LINK    $$@"
	$(Q)$(CXX) -o $$@ $$^ $(LDFLAGS) $$($(1)_LDLIBS) $$($(1)_$(2)_LDLIBS) $$(if $$(or $$(filter %.cu,$(3)),$$($(1)_CUDART)),$(CUDART)) -lcuda
endef

define LESSON_RULES
$(1)_KERNELS   := $$(wildcard $(1)/kernels/*.cu)
$(1)_MODULES   := $$(foreach k,$$($(1)_KERNELS),$$(patsubst %.cu,$(BUILD)/%,$$(k)).ptx \
                    $$(patsubst %.cu,$(BUILD)/%,$$(k)).cubin $$(patsubst %.cu,$(BUILD)/%,$$(k)).fatbin)
$(1)_STANDALONE := $$(patsubst $(1)/standalone/%.cpp,$(BUILD)/$(1)/%,$$(wildcard $(1)/standalone/*.cpp))
# One program named after the lesson from every top-level source, unless lesson.mk lists programs.
$(1)_PROGRAM_NAMES := $$(or $$($(1)_PROGRAMS),$(1))
$(1)_BINS      := $$(addprefix $(BUILD)/$(1)/,$$($(1)_PROGRAM_NAMES))
$(1)_BIN       := $$(firstword $$($(1)_BINS))
$(1)_BENCH_BINS := $$(if $$(filter yes,$$($(1)_BENCH)),$$($(1)_BINS),$$(addprefix $(BUILD)/$(1)/,$$($(1)_BENCH)))
$(1)_PROGRAM_LIST := $(BUILD)/$(1)/programs.txt
$(1)_RUN_ALONE_LIST := $(BUILD)/$(1)/run-alone.txt
$(1)_BENCH_LIST := $(BUILD)/$(1)/bench.txt
$(1)_ALL       := $$($(1)_BINS) $$($(1)_MODULES) $$($(1)_STANDALONE) $$($(1)_PROGRAM_LIST) $$($(1)_RUN_ALONE_LIST) \
                  $$($(1)_BENCH_LIST)
$(1)_SETUP_STAMPS := $$(patsubst %,$(BUILD)/setup/%.ok,$$($(1)_SETUP))
$(1)_HOST_OBJS := $$(patsubst %.cpp,$(BUILD)/%.o,$$(wildcard $(1)/*.cpp))
$(1)_CU_OBJS   := $$(patsubst %.cu,$(BUILD)/%.cu.o,$$(wildcard $(1)/*.cu))

$(1)_HEADER_CHECKS := $$(patsubst %.cpp,$(HEADER_CHECK_DIR)/%.ok,$$(wildcard $(1)/*.cpp $(1)/standalone/*.cpp))
$$($(1)_HEADER_CHECKS): private EXTRA_CXXFLAGS = $$($(1)_CXXFLAGS)
$$($(1)_HEADER_CHECKS): $$($(1)_SETUP_STAMPS)
$$($(1)_HOST_OBJS): private EXTRA_CXXFLAGS = $$($(1)_CXXFLAGS)
$$($(1)_HOST_OBJS) $$($(1)_CU_OBJS): $$($(1)_SETUP_STAMPS)
$$($(1)_MODULES): private EXTRA_NVCCFLAGS := $$($(1)_KERNEL_FLAGS)

$$(if $$($(1)_PROGRAMS),\
  $$(foreach p,$$($(1)_PROGRAMS),$$(eval $$(call PROGRAM_RULES,$(1),$$(p),$(1)/$$(p).cpp $$(addprefix $(1)/,$$($(1)_$$(p)_SOURCES))))),\
  $$(eval $$(call PROGRAM_RULES,$(1),$(1),$$(wildcard $(1)/*.cpp $(1)/*.cu))))

# The programs in run order, for the tests (build/NN-topic/programs.txt, one name a line).
$$($(1)_PROGRAM_LIST): $(wildcard $(1)/lesson.mk) Makefile
	@mkdir -p $$(@D)
	$(Q)printf '%s\n' $$($(1)_PROGRAM_NAMES) >$$@

# The programs that must run alone (time something, compare free memory), for the tests.
$$($(1)_RUN_ALONE_LIST): $(wildcard $(1)/lesson.mk) Makefile
	@mkdir -p $$(@D)
	$(Q)printf '%s\n' $$($(1)_RUN_ALONE) >$$@

# The programs with a --bench mode, for common/tools/capture-bench.sh (build/NN-topic/bench.txt).
$$($(1)_BENCH_LIST): $(wildcard $(1)/lesson.mk) Makefile
	@mkdir -p $$(@D)
	$(Q)printf '%s\n' $$(notdir $$($(1)_BENCH_BINS)) >$$@

$(BUILD)/$(1)/%: $(1)/standalone/%.cpp
	@echo "  CXX     $$@"
	@mkdir -p $$(@D)
	$(Q)$(CXX) $(CPPFLAGS) $(CXXFLAGS) -MMD -MP -o $$@ $$< -ldl

.PHONY: build-$(word 1,$(subst -, ,$(1))) run-$(word 1,$(subst -, ,$(1)))
build-$(word 1,$(subst -, ,$(1))): $$($(1)_ALL)
run-$(word 1,$(subst -, ,$(1))): $$($(1)_ALL) $(BUILD)/tools/driver-probe
	$(Q)$(BUILD)/tools/driver-probe
	$(Q)common/tools/run-lessons.sh $$($(1)_BINS)
endef
$(foreach l,$(LESSONS),$(eval $(call LESSON_RULES,$(l))))

LESSON_BINS := $(foreach l,$(LESSONS),$($(l)_BINS))
HEADER_CHECKS := $(foreach l,$(LESSONS),$($(l)_HEADER_CHECKS)) \
                 $(patsubst %.cpp,$(HEADER_CHECK_DIR)/%.ok,$(wildcard common/tools/*.cpp) $(TEST_SOURCES))
BENCH_BINS  := $(foreach l,$(LESSONS),$($(l)_BENCH_BINS))
LESSON_ALL  := $(foreach l,$(LESSONS),$($(l)_ALL))

# ---------------------------------------------------------------------------
# Pattern rules (out of tree: build/ mirrors the source folders).
$(BUILD)/%.o: %.cpp
	@echo "  CXX     $<"
	@mkdir -p $(@D)
	$(Q)$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(EXTRA_CXXFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.cu.o: %.cu
	@echo "  NVCC    $<"
	@mkdir -p $(@D)
	$(Q)$(NVCC) $(CPPFLAGS) $(NVCCFLAGS) $(GENCODE) -MMD -MP -MF $@.d -c $< -o $@

$(BUILD)/%.ptx: %.cu
	@echo "  PTX     $@"
	@mkdir -p $(@D)
	$(Q)$(NVCC) $(CPPFLAGS) $(NVCCFLAGS) $(EXTRA_NVCCFLAGS) -arch=compute_$(PTX_ARCH) -MMD -MP -MF $@.d -ptx $< -o $@

$(BUILD)/%.cubin: %.cu
	@echo "  CUBIN   $@"
	@mkdir -p $(@D)
	$(Q)$(NVCC) $(CPPFLAGS) $(NVCCFLAGS) $(EXTRA_NVCCFLAGS) -arch=sm_$(CUBIN_ARCH) -MMD -MP -MF $@.d -cubin $< -o $@

$(BUILD)/%.fatbin: %.cu
	@echo "  FATBIN  $@"
	@mkdir -p $(@D)
	$(Q)$(NVCC) $(CPPFLAGS) $(NVCCFLAGS) $(EXTRA_NVCCFLAGS) $(GENCODE) -MMD -MP -MF $@.d -fatbin $< -o $@

$(HEADER_CHECK_DIR)/%.ok: %.cpp
	@echo "  CHECK   $< against $(CUDA_INCLUDE)"
	@mkdir -p $(@D)
	$(Q)$(CXX) -I. -isystem $(CUDA_INCLUDE) -std=c++20 $(CXX_WARNINGS) -Werror $(EXTRA_CXXFLAGS) -fsyntax-only $<
	@touch $@

# ---------------------------------------------------------------------------
# Set-up: installs what a fresh Debian 12 machine lacks (see common/tools/setup.sh).
# Catch2 is needed by the tests alone. EGL, OpenGL and Vulkan are optional: the programs that
# use them (lessons 10, 27) are built without them and say so when run. Each check runs on every
# build (it is quick), and DEP.ok changes only when what was found changes, so those lessons are
# rebuilt exactly then.
$(BUILD)/setup/catch2.ok: common/tools/setup.sh
	$(Q)common/tools/setup.sh catch2
	@mkdir -p $(@D) && touch $@

$(BUILD)/setup/egl.ok $(BUILD)/setup/gl.ok $(BUILD)/setup/vulkan.ok: $(BUILD)/setup/%.ok: common/tools/setup.sh FORCE
	$(Q)common/tools/setup.sh $* $(@D)

.PHONY: FORCE
FORCE:

# Tools and tests.
$(BUILD)/tools/driver-probe: common/tools/driver_probe.cpp
	@echo "  CXX     $@"
	@mkdir -p $(@D)
	$(Q)$(CXX) $(CPPFLAGS) $(CXXFLAGS) -MMD -MP -o $@ $< -ldl

# NVIDIA's stub libcuda.so under the driver's name, for the tests that run a lesson against it.
STUB_DRIVER := $(BUILD)/stub-driver/libcuda.so.1
$(STUB_DRIVER):
	@mkdir -p $(@D)
	$(Q)ln -sf $(CUDA_PATH)/lib64/stubs/libcuda.so $@

TEST_OBJS := $(patsubst %.cpp,$(BUILD)/%.o,$(TEST_SOURCES))
TEST_BIN  := $(BUILD)/tests/course-tests
$(TEST_OBJS) $(patsubst %.cpp,$(HEADER_CHECK_DIR)/%.ok,$(TEST_SOURCES)): private EXTRA_CXXFLAGS := $(CATCH2_CFLAGS)
# The tests are compiled without optimisation: their speed is the programs' they run, and -O0
# compiles Catch2's test files about 2.5 times faster (the suite's clean build is mostly these).
$(TEST_OBJS): private EXTRA_CXXFLAGS += -O0
$(TEST_OBJS): | $(BUILD)/setup/catch2.ok
$(TEST_BIN): $(TEST_OBJS)
	@echo "  LINK    $@"
	$(Q)$(CXX) -o $@ $^ $(CATCH2_LIBS) -ldl -lpthread

# ---------------------------------------------------------------------------
.DEFAULT_GOAL := all
.PHONY: all lessons run test bench sanitize mutate check-headers compdb help clean
all: lessons $(TEST_BIN) $(BUILD)/tools/driver-probe $(STUB_DRIVER) ## Build every lesson, the tests and the tools (default)

lessons: $(LESSON_ALL) ## Build every lesson only

run: $(LESSON_ALL) $(BUILD)/tools/driver-probe ## Build and run every lesson in order, then print a summary table
	$(Q)$(BUILD)/tools/driver-probe
	$(Q)common/tools/run-lessons.sh $(LESSON_BINS)

test: all ## Build and run the Catch2 suite (GPU tests skip, with the reason, when there is no GPU)
	$(Q)common/tools/run-tests.sh $(TEST_BIN) $(TEST_ARGS)

bench: $(LESSON_ALL) $(BUILD)/tools/driver-probe ## Run the lessons' benchmark modes (--bench) and print one table
	$(Q)$(BUILD)/tools/driver-probe
	$(Q)DRIVER_PROBE=$(BUILD)/tools/driver-probe common/tools/bench-lessons.sh $(BENCH_BINS)

.PHONY: bench-list
bench-list: ## Print the lessons that have a --bench mode (for common/tools/capture-bench.sh)
	@echo $(foreach l,$(LESSONS),$(if $($(l)_BENCH_BINS),$(l)))

sanitize: $(LESSON_ALL) $(BUILD)/tools/driver-probe ## Run every lesson under compute-sanitizer (4 tools) and print a table
	$(Q)$(BUILD)/tools/driver-probe
	$(Q)common/tools/sanitize-lessons.sh $(LESSON_BINS)

# Mutation tests (tests/mutants/NN-topic/*.patch, format in common/tools/mutate.sh): every
# mutant applied and built; where a GPU is usable, run, and its named check must fail.
MUTANTS := $(sort $(wildcard tests/mutants/*/*.patch))
mutate: $(LESSON_ALL) $(BUILD)/tools/driver-probe ## Break each lesson on purpose (tests/mutants) and require its checks to notice
	$(Q)env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL BUILD=$(BUILD) DRIVER_PROBE=$(BUILD)/tools/driver-probe \
	  common/tools/mutate.sh $(MUTANTS)

check-headers: $(HEADER_CHECKS) ## Compile every host .cpp against CUDA_INCLUDE=<other toolkit>/include (syntax only, -Werror)
	@echo "check-headers: $(words $(HEADER_CHECKS)) files compile against $(CUDA_INCLUDE) ($$(grep -m1 '^#define CUDA_VERSION' $(CUDA_INCLUDE)/cuda.h))"

.PHONY: coverage
coverage: ## Count the cuda.h functions the lessons call and check: print the table, rewrite COVERAGE.md and .zh-CN
	$(Q)python3 common/tools/coverage.py --header $(CUDA_PATH)/include/cuda.h --write

compdb: ## Write compile_commands.json for editors (needs bear)
	@command -v bear >/dev/null 2>&1 || { echo "compdb needs bear (apt-get install bear)" >&2; exit 1; }
	bear -- $(MAKE) -B all

help: ## List the targets
	@echo "Targets:"
	@grep -hE '^[a-z][a-zA-Z_-]*:.*## ' $(filter-out %.d,$(MAKEFILE_LIST)) | sed -E 's/^([^:]+):.*## (.*)/  \1|\2/' | \
	  awk -F'|' '{ printf "%-12s %s\n", $$1, $$2 }'
	@echo "  run-NN       Build and run one lesson: $(foreach l,$(LESSONS),run-$(word 1,$(subst -, ,$(l))))"
	@echo "  build-NN     Build one lesson"
	@echo "Variables: CUDA_PATH=$(CUDA_PATH) ARCH='$(ARCH)' (building for: $(BUILD_ARCH); cubin: sm_$(CUBIN_ARCH))"
	@echo "           CATCH2_PREFIX=<dir> V=1 WERROR=1 TEST_ARGS=<catch2 args> TEST_SHARDS=<test processes> CUDA_INCLUDE=<dir> (check-headers)"

clean: ## Remove build/
	rm -rf $(BUILD)

# Dependency files of this build only: the mutants' builds under $(BUILD)/mutants keep their own.
-include $(shell find $(BUILD) -path $(BUILD)/mutants -prune -o -name '*.d' -type f -print 2>/dev/null)
