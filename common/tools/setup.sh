#!/usr/bin/env bash
# setup.sh WHAT — makes sure a build dependency is present; installs it on Debian/Ubuntu as root.
#   catch2  Catch2 v3 (>= 3.4): Debian 12 has it only in bookworm-backports (3.7.1); Ubuntu 24.04 has 3.4.0.
#   egl     EGL headers and libEGL.so for lesson 10 (package libegl-dev).
# Prints what to do and fails when it cannot install (not root, no apt-get).
set -euo pipefail
what=${1:?usage: setup.sh catch2|egl}

have_catch2() {
    if pkg-config --exists 'catch2-with-main >= 3.4' 2>/dev/null; then return 0; fi
    [ -n "${CATCH2_PREFIX:-}" ] && [ -f "$CATCH2_PREFIX/include/catch2/catch_test_macros.hpp" ]
}
have_egl() { [ -f /usr/include/EGL/egl.h ] && { [ -e /usr/lib/x86_64-linux-gnu/libEGL.so ] || ldconfig -p | grep -q 'libEGL.so '; }; }

can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

apt_install() {  # apt_install [-t suite] package...
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

case "$what" in
catch2)
    have_catch2 && exit 0
    echo "setup: Catch2 v3 (>= 3.4) not found; installing it"
    if can_apt; then
        . /etc/os-release
        if [ "${VERSION_CODENAME:-}" = bookworm ]; then
            list=/etc/apt/sources.list.d/bookworm-backports.list
            grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/ ||
                echo 'deb http://deb.debian.org/debian bookworm-backports main' >"$list"
            apt_install -t bookworm-backports catch2
        else
            apt_install catch2
        fi
    fi
    have_catch2 && exit 0
    echo "setup: could not install Catch2 v3 >= 3.4. Install it (Debian 12: apt-get install -t bookworm-backports catch2;" >&2
    echo "       Ubuntu 24.04: apt-get install catch2), or build it and run: make test CATCH2_PREFIX=/path/to/prefix" >&2
    exit 1
    ;;
egl)
    have_egl && exit 0
    echo "setup: EGL headers not found; installing libegl-dev"
    can_apt && apt_install libegl-dev
    have_egl && exit 0
    echo "setup: lesson 10 needs the EGL headers and libEGL.so: install libegl-dev (Debian/Ubuntu)" >&2
    exit 1
    ;;
*)
    echo "setup: unknown dependency '$what'" >&2
    exit 2
    ;;
esac
