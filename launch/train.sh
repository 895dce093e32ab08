#!/usr/bin/env bash
# mpirun wrapper for `moelab train`:
#   launch/train.sh [-np N] [--hostfile FILE] CONFIG [moelab train args...]
# Splits each node's cores evenly (ranks per node x threads = cores), binds each
# rank to its cores, and adds Open MPI's root flags when run as root. A single
# rank runs without mpirun. Across nodes, FILE lists one host per line (Open
# MPI's hostfile: "node1 slots=2"); ranks fill the nodes in order, N / nodes
# each, all nodes like this one. Under Slurm use slurm/train.sbatch (srun)
# instead. Multi-node runs: docs/multinode.md.
#
# Stopping: a SIGTERM (a scheduler's time limit), SIGUSR1 or Ctrl-C to this
# script reaches every rank as SIGUSR1 through mpirun, which forwards USR1 and
# then exits with the ranks' status: 3 once they stopped with a checkpoint, so
# this script exits 3 too. (mpirun itself aborts the job on SIGTERM or SIGINT:
# it kills the ranks a second later and exits 1.) mpirun runs in a session of
# its own, so a terminal's Ctrl-C reaches only this script; a second stop
# signal ends the job at once.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
moelab=${MOELAB_BUILD_DIR:-$root/build}/bin/moelab
ranks=1 hostfile=""
while [ $# -gt 0 ]; do
  case "$1" in
    -np) ranks=$2; shift 2 ;;
    --hostfile) hostfile=$2; shift 2 ;;
    *) break ;;
  esac
done
nodes=1
if [ -n "$hostfile" ]; then
  nodes=$(grep -cv '^[[:space:]]*\(#\|$\)' "$hostfile") || true
  [ "$nodes" -ge 1 ] || { echo "launch/train.sh: no hosts in $hostfile" >&2; exit 2; }
fi
per_node=$(( (ranks + nodes - 1) / nodes ))
cores=$(nproc)
threads=$(( cores / per_node )); [ "$threads" -ge 1 ] || threads=1
export OMP_NUM_THREADS=$threads
if [ "$ranks" -eq 1 ]; then
  exec "$moelab" train "$@" --set train.threads=$threads
fi
flags=(--bind-to core --map-by "ppr:$per_node:node:pe=$threads" -x OMP_NUM_THREADS)
[ "$per_node" -le "$cores" ] || flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS)
# Across nodes, TCP keepalive on mpirun's links to its daemons: a node cut off
# from the network is declared lost, and the job ended, within ~30 s rather
# than after minutes of TCP retransmissions (docs/multinode.md).
[ -z "$hostfile" ] || flags+=(--hostfile "$hostfile" --mca oob_tcp_keepalive_time 10
  --mca oob_tcp_keepalive_intvl 5 --mca oob_tcp_keepalive_probes 4)
[ "$(id -u)" -ne 0 ] || flags+=(--allow-run-as-root)
setsid mpirun -np "$ranks" "${flags[@]}" "$moelab" train "$@" --set train.threads=$threads &
job=$!
stops=0
relay() {
  stops=$((stops + 1))
  if [ "$stops" -eq 1 ]; then kill -USR1 "$job"; else kill -TERM "$job"; fi 2>/dev/null || true
}
trap relay TERM INT USR1
# A trapped signal ends `wait` early; the job's own status comes with the last one.
while kill -0 "$job" 2>/dev/null; do wait "$job" || true; done
wait "$job"
