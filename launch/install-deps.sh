#!/usr/bin/env bash
# Installs moelab's build and run dependencies from Debian packages. Idempotent:
# only packages that are missing are installed. Runs as root, or through sudo.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libopenblas0-openmp
  libopenmpi-dev openmpi-bin
  libhdf5-dev libtomlplusplus-dev libgtest-dev
  libsentencepiece-dev sentencepiece
  libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev libxxhash-dev zlib1g-dev
  python3-matplotlib python3-torch python3-numpy python3-h5py
  fortunes
  slurmctld slurmd slurm-client munge libpmix-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: not root and no sudo; install: ${missing[*]}" >&2; exit 2; }
  sudo="sudo"
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
# The OpenMP OpenBLAS must win over the reference BLAS (~25x faster fp32 matmul).
libblas=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | grep openmp | head -1 || true)
if [ -n "$libblas" ]; then
  $sudo update-alternatives --set libblas.so.3-x86_64-linux-gnu "$libblas" >/dev/null
fi
liblapack=$(update-alternatives --list liblapack.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | grep openmp | head -1 || true)
if [ -n "$liblapack" ]; then
  $sudo update-alternatives --set liblapack.so.3-x86_64-linux-gnu "$liblapack" >/dev/null
fi
echo "install-deps: done"
