#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite under ctest
# (unit tests, multi-rank MPI tests, the private Slurm cluster test).
# Extra arguments go to ctest, e.g. launch/test.sh -L model.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/launch/install-deps.sh"
"$root/launch/build.sh"
build=${MOELAB_BUILD_DIR:-$root/build}
cd "$build"
ctest --output-on-failure --timeout 900 -j "${MOELAB_TEST_JOBS:-2}" "$@"
