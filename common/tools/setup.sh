#!/usr/bin/env bash
# setup.sh catch2        — makes sure Catch2 v3 (>= 3.4) is there for `make test`; installs it
#                          on Debian/Ubuntu as root. Fails with what to install otherwise.
# setup.sh DEP OUT_DIR   — DEP is one of the optional dependencies of some lessons' programs:
#                            egl     EGL headers and libEGL.so  (libegl-dev; lessons 10 and 27)
#                            gl      OpenGL headers and libOpenGL.so (libgl-dev libopengl-dev; lesson 27)
#                            vulkan  Vulkan headers and libvulkan.so (libvulkan-dev; lesson 27)
#                          It looks for them, tries once to install them as root, and writes what
#                          the build should use into OUT_DIR:
#                            DEP.cflags  empty, or -DCOURSE_NO_EGL / _GL / _VULKAN (the programs
#                                        that need it then print Result = SKIP and exit 77)
#                            DEP.libs    -lEGL / -lOpenGL / -lvulkan, or empty
#                            DEP.ok      touched only when that changes (make rebuilds those programs)
#                          It never fails the build.
# Installing never leaves the package manager's own output as the last word: it goes to a log,
# and a short paragraph says what happened and what to do.
# The bookworm-backports source it may add names the archive of the machine's own apt sources
# (apt-mirror.sh), so that a local mirror or proxy keeps serving it.
# COURSE_SETUP_ROOT (tests only) puts the file checks, /etc/os-release and the apt sources under
# another root, to play a machine that lacks a package or has other sources.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=apt-mirror.sh
. "$(dirname "$0")/apt-mirror.sh"
what=${1:?usage: setup.sh catch2 | setup.sh egl|gl|vulkan OUT_DIR}
root=${COURSE_SETUP_ROOT:-}
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)

have_catch2() {
    if [ -z "$root" ] && pkg-config --exists 'catch2-with-main >= 3.4' 2>/dev/null; then return 0; fi
    [ -n "${CATCH2_PREFIX:-}" ] && [ -f "$CATCH2_PREFIX/include/catch2/catch_test_macros.hpp" ]
}
# have_optional HEADER LIBRARY: the header under /usr/include and the link-time library (.so).
have_optional() {
    [ -f "$root/usr/include/$1" ] || return 1
    [ -e "$root/usr/lib/$multiarch/$2" ] || [ -e "$root/usr/lib/$2" ]
}

can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT
apt_install() {  # apt_install [-t suite] package... ; output goes to $log
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >>"$log" 2>&1 && apt-get install -y -qq --no-install-recommends "$@" >>"$log" 2>&1
}
# Why an install could not happen, in one sentence.
why_not() {
    if [ "$(id -u)" != 0 ]; then echo "this user is not root";
    elif ! command -v apt-get >/dev/null 2>&1; then echo "there is no apt-get on this system";
    else echo "apt-get failed ($( (grep -m1 '^E:' "$log" || grep -m1 -E '^(Err|W):' "$log") | cut -c1-100))"; fi
}

case "$what" in
catch2)
    have_catch2 && exit 0
    echo "setup: Catch2 v3 (>= 3.4) not found; trying to install it (needed by make test only)"
    if can_apt; then
        # shellcheck source=/dev/null
        [ -r "$root/etc/os-release" ] && . "$root/etc/os-release"
        if [ "${VERSION_CODENAME:-}" = bookworm ]; then
            list=$root/etc/apt/sources.list.d/bookworm-backports.list
            grep -rqs 'bookworm-backports' "$root/etc/apt/sources.list" "$root/etc/apt/sources.list.d/" ||
                echo "deb $(apt_mirror bookworm setup) bookworm-backports main" >"$list"
            apt_install -t bookworm-backports catch2
        else
            apt_install catch2
        fi
    fi
    have_catch2 && exit 0
    cat >&2 <<MSG

setup: make test needs Catch2 v3 (>= 3.4), and it could not be installed: $(why_not).
       Install it as root (Debian 12: apt-get install -t bookworm-backports catch2; Ubuntu 24.04:
       apt-get install catch2), or build Catch2 yourself and run: make test CATCH2_PREFIX=/its/prefix
       The lessons do not need it: make run works without it.
MSG
    exit 1
    ;;
egl | gl | vulkan)
    out=${2:?usage: setup.sh $what OUT_DIR}
    case "$what" in  # header, library, packages, flag, library to link, who needs it
    egl) set -- EGL/egl.h libEGL.so "libegl-dev" COURSE_NO_EGL -lEGL "lessons 10 and 27" EGL ;;
    gl) set -- GL/gl.h libOpenGL.so "libgl-dev libopengl-dev" COURSE_NO_GL -lOpenGL "lesson 27" OpenGL ;;
    vulkan) set -- vulkan/vulkan.h libvulkan.so "libvulkan-dev" COURSE_NO_VULKAN -lvulkan "lesson 27" Vulkan ;;
    esac
    header=$1 library=$2 packages=$3 flag=$4 link=$5 who=$6 name=$7
    mkdir -p "$out"
    if ! have_optional "$header" "$library" && [ ! -e "$out/$what.tried" ]; then
        touch "$out/$what.tried"  # one try per build folder: an offline machine is not asked again
        echo "setup: $name headers not found ($who); trying to install $packages"
        # shellcheck disable=SC2086 # the package list is meant to split
        can_apt && apt_install $packages
        have_optional "$header" "$library" || cat >&2 <<MSG

setup: the $name programs of $who are built without $name: $(why_not). The other lessons
       are not affected; those programs will print Result = SKIP. To run them, install the
       $name headers as root (Debian/Ubuntu: apt-get install $packages), then run make again.
MSG
    fi
    if have_optional "$header" "$library"; then cflags=""; libs=$link; else cflags="-D$flag"; libs=""; fi
    if [ "$(cat "$out/$what.cflags" 2>/dev/null)" != "$cflags" ] || [ "$(cat "$out/$what.libs" 2>/dev/null)" != "$libs" ] ||
        [ ! -e "$out/$what.ok" ]; then
        printf '%s\n' "$cflags" >"$out/$what.cflags"
        printf '%s\n' "$libs" >"$out/$what.libs"
        touch "$out/$what.ok"
    fi
    exit 0
    ;;
*)
    echo "setup: unknown dependency '$what'" >&2
    exit 2
    ;;
esac
