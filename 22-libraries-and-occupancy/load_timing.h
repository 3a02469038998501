// load_timing.h — the --bench part of lesson 22's contexts program: what loading a library
// costs with eager and with lazy loading, and what the first launch costs against later ones.
//
// "Module loading mode is controlled by CUDA_MODULE_LOADING env variable" (cuda.h:7490), and a
// process has one mode (cuModuleGetLoadingMode names no context or module). To show both modes in
// one run, the program starts itself twice as a child (/proc/self/exe --load-timing), once with
// CUDA_MODULE_LOADING=EAGER and once with LAZY, each set before the child's cuInit, and prints what
// each child printed.
#pragma once

#include "../common/course_util.h"

namespace lesson22 {

// The child's side (--load-timing): times cuLibraryLoadFromFile, cuLibraryGetKernel, the first
// launch and later ones in the primary context, then cuCtxCreate of a second context and the
// first launch there, and prints "loading mode of the MODE run: ...", "bench: ..." lines and how
// many timed launches had finished when their clocks stopped. Returns the exit code.
int loadTimingChild(int ordinal);

// The parent's side: runs the child with EAGER, then with LAZY, prints each child's lines as they
// are, and checks that every child exited 0 in the mode it was given, and that every launch it
// timed had finished when its clock stopped.
void runLoadTimings(course::Verdict& verdict, int ordinal);

}  // namespace lesson22
