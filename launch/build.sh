#!/usr/bin/env bash
# Configures and builds moelab into build/ (Release, ccache, Ninja when present).
# Extra arguments go to CMake, e.g. -DCMAKE_PREFIX_PATH=/path/to/libtorch.
# MOELAB_BUILD_TARGETS (space-separated, e.g. "moelab") builds only those
# targets and what they need; unset, everything (tests, benchmarks) is built.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MOELAB_BUILD_DIR:-$root/build}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
elif [ $# -gt 0 ]; then
  cmake "$build" "$@"
fi
targets=()
for target in ${MOELAB_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$build" --parallel "${MOELAB_JOBS:-$(nproc)}" "${targets[@]}"
