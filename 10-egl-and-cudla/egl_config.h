// egl_config.h — whether this build of lesson 10 has EGL, and what its EGL programs
// print when it has not.
//
// EGL is an optional dependency of the course: the headers come from libegl-dev
// (Debian/Ubuntu). The Makefile adds -DCOURSE_NO_EGL (and drops -lEGL) where the
// headers or libEGL.so are missing; __has_include catches the headers by itself
// for a build outside the course. Such a build still compiles every program, and
// each EGL program says why it cannot run — before it makes any driver call.
#pragma once

#if __has_include(<EGL/egl.h>) && !defined(COURSE_NO_EGL)
#define LESSON10_HAVE_EGL 1
#else
#define LESSON10_HAVE_EGL 0
#endif

#include <cstdio>

#include "../common/check_driver.h"
#include "../common/course_util.h"

// The whole program in a build without EGL: check the command line like the real
// program, then exit 77 ("not applicable here") with the reason.
inline int skipWithoutEgl(int argc, char** argv, const char* usage) {
    course::Arguments args;
    if (!course::parseArguments(argc, argv, {}, {"--device"}, usage, args)) return course::kExitUsage;
    std::printf("Result = SKIP (EGL headers were not found at build time: apt-get install libegl-dev)\n");
    return course::kExitNotApplicable;
}
