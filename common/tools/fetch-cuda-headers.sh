#!/usr/bin/env bash
# fetch-cuda-headers.sh VERSION DEST — puts another CUDA toolkit's headers under DEST/usr/include,
# for `make check-headers CUDA_INCLUDE=DEST/usr/include`. They come from Debian's non-free
# nvidia-cuda-dev package, downloaded through a private apt configuration (this machine's own
# sources and package database are left as they are) and unpacked, never installed:
#   11.8  Debian 12 (bookworm) non-free   nvidia-cuda-dev 11.8.89
#   12.4  Debian 13 (trixie) non-free     nvidia-cuda-dev 12.4.127, with libcu++-dev 2.3.2 from
#         trixie main (12.x's cuda_fp16.h includes <nv/target>, which Debian packages apart)
set -euo pipefail
version=${1:?usage: fetch-cuda-headers.sh 11.8|12.4 DEST}
dest=${2:?usage: fetch-cuda-headers.sh 11.8|12.4 DEST}
case "$version" in
11.8) suite=bookworm; packages=(nvidia-cuda-dev=11.8.89~11.8.0-5~deb12u1) ;;
12.4) suite=trixie; packages=(nvidia-cuda-dev=12.4.127~12.4.1-2 libcu++-dev=2.3.2-2) ;;
*) echo "fetch-cuda-headers: no source known for CUDA $version (11.8 or 12.4)" >&2; exit 2 ;;
esac
[ -f "$dest/usr/include/cuda.h" ] && exit 0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main non-free" \
    >"$work/sources.list"
apt_options=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o APT::Sandbox::User=root)
apt-get "${apt_options[@]}" update -qq >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
(cd "$work" && apt-get "${apt_options[@]}" download "${packages[@]}" >>"$work/apt.log" 2>&1) ||
    { cat "$work/apt.log" >&2; exit 1; }
mkdir -p "$dest"
# Only the headers: the package's libraries are not needed to check that code compiles.
for package in "$work"/*.deb; do
    dpkg-deb --fsys-tarfile "$package" | tar -x -C "$dest" --wildcards './usr/include/*'
done
grep -m1 '#define CUDA_VERSION' "$dest/usr/include/cuda.h"
