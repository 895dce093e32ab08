#!/usr/bin/env bash
# Run here (Debian 12), before a GPU check on a machine that has CUDA, NCCL,
# cmake, a compiler and a CUDA PyTorch but none of moelab's other dependencies:
# downloads their Debian packages and unpacks them with dpkg -x into
# .gpu-deps/ (git-ignored), for launch/gpu-check.sh with MOELAB_DEPS_PREFIX=.gpu-deps.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/.gpu-deps}
# The packages themselves, not their whole dependency trees (which would pull
# compilers, Fortran and LLVM: gigabytes, where a carried folder holds 64 MiB).
# The dataset is carried prepared (data/), so SentencePiece's tools are not needed.
deps=(
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200
  libpsm2-2 libpsm-infinipath1 libnuma1 libmunge2 libevent-2.1-7 libxnvctrl0
  libhdf5-dev libhdf5-103-1 libsz2 libaec0 libhdf5-hl-100
  libtomlplusplus-dev libtomlplusplus3 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libcli11-dev nlohmann-json3-dev libxxhash-dev libxxhash0 libgtest-dev ninja-build zlib1g-dev zlib1g
  libzstd-dev libzstd1
)
work=$(mktemp -d)
(cd "$work" && apt-get download "${deps[@]}" >/dev/null 2>&1)
mkdir -p "$out"
for deb in "$work"/*.deb; do dpkg -x "$deb" "$out"; done
# Links such as usr/lib/.../libz.so -> /lib/.../libz.so.1.2.13 name the target's
# path on a Debian root; make them point inside this folder instead.
find "$out" -type l -lname '/*' | while read -r link; do
  target="$out$(readlink "$link")"
  if [ -e "$target" ]; then
    ln -sfn "$(realpath -s --relative-to="$(dirname "$link")" "$target")" "$link"
  fi
done
# Documentation and the static libraries other than GoogleTest's are not needed.
rm -rf "$out/usr/share/doc" "$out/usr/share/man" "$out/usr/share/lintian"
find "$out" -name '*.a' ! -name 'libgtest*' ! -name 'libgmock*' -delete
echo "gpu-deps: $(ls "$work" | wc -l) packages unpacked into $out ($(du -sh "$out" | cut -f1))"
rm -rf "$work"
