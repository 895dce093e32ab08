#!/usr/bin/env bash
# Configures and builds moelab into build/ (Release, ccache, Ninja when present).
# Extra arguments go to CMake, e.g. -DCMAKE_PREFIX_PATH=/path/to/libtorch.
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
cmake --build "$build" --parallel "${MOELAB_JOBS:-$(nproc)}"
