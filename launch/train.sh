#!/usr/bin/env bash
# mpirun wrapper for `moelab train`: launch/train.sh [-np N] CONFIG [moelab train args...]
# Splits the cores evenly (ranks x threads = cores), binds each rank to its cores,
# and adds Open MPI's root flags when run as root. A single rank runs without mpirun.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
moelab=${MOELAB_BUILD_DIR:-$root/build}/bin/moelab
ranks=1
if [ "${1:-}" = "-np" ]; then ranks=$2; shift 2; fi
cores=$(nproc)
threads=$(( cores / ranks )); [ "$threads" -ge 1 ] || threads=1
export OMP_NUM_THREADS=$threads
if [ "$ranks" -eq 1 ]; then
  exec "$moelab" train "$@" --set train.threads=$threads
fi
flags=(--bind-to core --map-by "ppr:$ranks:node:pe=$threads" -x OMP_NUM_THREADS)
[ "$ranks" -le "$cores" ] || flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS)
[ "$(id -u)" -ne 0 ] || flags+=(--allow-run-as-root)
exec mpirun -np "$ranks" "${flags[@]}" "$moelab" train "$@" --set train.threads=$threads
