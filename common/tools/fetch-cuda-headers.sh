#!/usr/bin/env bash
# fetch-cuda-headers.sh VERSION DEST — puts another CUDA toolkit's headers under DEST/usr/include,
# for `make check-headers CUDA_INCLUDE=DEST/usr/include`. They come from Debian's non-free
# nvidia-cuda-dev package, downloaded through a private apt configuration (this machine's own
# sources and package database are left as they are) and unpacked, never installed:
#   11.8  Debian 12 (bookworm) non-free   nvidia-cuda-dev 11.8.89
#   12.4  Debian 13 (trixie) non-free     nvidia-cuda-dev 12.4.127, with libcu++-dev 2.3.2 from
#         trixie main (12.x's cuda_fp16.h includes <nv/target>, which Debian packages apart)
# The archive is the one this machine's apt sources already use on Debian (apt-mirror.sh: a local
# mirror or proxy keeps serving it), with the suite the version needs, whatever the machine's own
# release. Ubuntu's archive does not carry Debian's packages: on Ubuntu, or where no source is
# found, it says so and uses the official Debian archive.
# DEBIAN_MIRROR=URI uses that Debian archive (a mirror or proxy of it) instead, without looking.
# COURSE_SETUP_ROOT (tests only) reads /etc/os-release and the apt sources under another root.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=apt-mirror.sh
. "$(dirname "$0")/apt-mirror.sh"
version=${1:?usage: fetch-cuda-headers.sh 11.8|12.4 DEST}
dest=${2:?usage: fetch-cuda-headers.sh 11.8|12.4 DEST}
case "$version" in
11.8) suite=bookworm; packages=(nvidia-cuda-dev=11.8.89~11.8.0-5~deb12u1) ;;
12.4) suite=trixie; packages=(nvidia-cuda-dev=12.4.127~12.4.1-2 libcu++-dev=2.3.2-2) ;;
*) echo "fetch-cuda-headers: no source known for CUDA $version (11.8 or 12.4)" >&2; exit 2 ;;
esac
[ -f "$dest/usr/include/cuda.h" ] && exit 0

# The machine's distribution and release, in a subshell: os-release's variables stay there.
read -r machine codename < <(
    # shellcheck source=/dev/null
    [ -r "${COURSE_SETUP_ROOT:-}/etc/os-release" ] && . "${COURSE_SETUP_ROOT:-}/etc/os-release"
    echo "${ID:-unknown} ${VERSION_CODENAME:-unknown}"
)
if [ -n "${DEBIAN_MIRROR:-}" ]; then
    mirror=${DEBIAN_MIRROR%/}
elif [ "$machine" = debian ]; then
    mirror=$(apt_mirror "$codename" fetch-cuda-headers)
else
    mirror=$apt_mirror_official
    echo "fetch-cuda-headers: this machine is $machine, not Debian, and its archive does not carry Debian's" \
        "nvidia-cuda-dev, so the official Debian archive $mirror is used (DEBIAN_MIRROR=URI names a Debian" \
        "mirror or proxy instead)." >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main non-free" \
    >"$work/sources.list"
apt_options=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o APT::Sandbox::User=root)
failed() {
    cat "$work/apt.log" >&2
    echo "fetch-cuda-headers: apt-get could not fetch $suite from $mirror; run it again with DEBIAN_MIRROR=URI," \
        "a Debian archive (mirror or proxy) this machine can reach." >&2
    exit 1
}
apt-get "${apt_options[@]}" update -qq >"$work/apt.log" 2>&1 || failed
(cd "$work" && apt-get "${apt_options[@]}" download "${packages[@]}" >>"$work/apt.log" 2>&1) || failed
mkdir -p "$dest"
# Only the headers: the package's libraries are not needed to check that code compiles.
for package in "$work"/*.deb; do
    dpkg-deb --fsys-tarfile "$package" | tar -x -C "$dest" --wildcards './usr/include/*'
done
grep -m1 '#define CUDA_VERSION' "$dest/usr/include/cuda.h"
