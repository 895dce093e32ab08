#!/usr/bin/env bash
# A private Slurm cluster on the hosts of tests/cluster/hosts.sh: one slurmd per
# host, each with its own hostname and address (NodeName=hI NodeAddr=10.213.K.I),
# and slurmctld and munged on h1. Unlike tests/study/slurm_cluster.sh, whose
# SLURM_CLUSTER_NODES runs several `slurmd -N` on one host, jobs here really
# span hosts: `srun -N2 --ntasks-per-node=2 hostname` prints h1 h1 h2 h2, and an
# MPI job's ranks talk over TCP across the bridge.
#
#   slurm_hosts.sh start N DIR          # hosts h1..hN and Slurm; prints what to export
#   slurm_hosts.sh run DIR HOST CMD...  # CMD on HOST, with HOSTS_DIR and SLURM_CONF set
#   slurm_hosts.sh stop DIR             # cancels jobs, stops Slurm, takes the hosts down
#
# Slurm's commands work only inside a host (the controller listens on the
# bridge, which the root namespace has no address on), and only with SLURM_CONF
# set: without it a Slurm command looks the cluster up in DNS, a query to the
# resolver outside. `run` sets both, e.g.
#   slurm_hosts.sh run DIR h1 srun -N2 hostname
# and is the way to run Slurm commands here.
#
# Every daemon has its own network namespace, so all use Slurm's default ports
# without clashing with another cluster. munged needs no network: its clients
# reach it through a Unix socket file in DIR, which every host sees (DIR is not
# under /tmp). DIR must be short: socket paths must stay under 108 bytes.
# Runs as root, without systemd or cgroups; what this shares with
# slurm_cluster.sh is in slurm_lib.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
slurm_me=slurm_hosts
slurm_hosts=$here/hosts.sh  # node hI is host hI
# shellcheck source-path=SCRIPTDIR
source "$here/slurm_lib.sh"

start() {
  local n=$1
  "$slurm_hosts" up "$n" "$dir"  # exits 77 where namespaces are unavailable
  export HOSTS_DIR=$dir
  slurm_prepare
  local cpus names=() addr
  cpus=$(nproc --all)  # not plain nproc: it counts OMP_NUM_THREADS, which ctest sets to 1
  for ((i = 1; i <= n; i++)); do names+=("h$i"); done
  {
    slurm_conf_common moelabhosts h1 "$(awk '$2 == "h1" {print $1}' "$dir/hosts")"
    echo "MpiDefault=none"
    for ((i = 1; i <= n; i++)); do
      addr=$(awk -v h="h$i" '$2 == h {print $1}' "$dir/hosts")
      echo "NodeName=h$i NodeAddr=$addr CPUs=$cpus RealMemory=1000 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE State=UP"
  } >"$dir/slurm.conf"
  slurm_start_daemons "${names[@]}"
  echo "export HOSTS_DIR=$dir SLURM_CONF=$SLURM_CONF"
}

stop() {
  export HOSTS_DIR=$dir
  slurm_stop_daemons
  # Kills whatever else still runs on the hosts (job steps) and removes them.
  "$slurm_hosts" down "$dir"
}

run() {  # host, then the command
  [[ -f $dir/slurm.conf ]] || slurm_die "no cluster in $dir (slurm_hosts.sh start N DIR)"
  HOSTS_DIR=$dir SLURM_CONF=$dir/slurm.conf exec "$slurm_hosts" run "$@"
}

case ${1:-} in
  start) [[ $# == 3 ]] || slurm_die "usage: $0 start N DIR"
         dir=$(realpath -m "$3"); mkdir -p "$dir"; start "$2" ;;
  run) [[ $# -ge 4 ]] || slurm_die "usage: $0 run DIR HOST CMD..."
       dir=$(realpath -m "$2"); shift 2; run "$@" ;;
  stop) [[ $# == 2 ]] || slurm_die "usage: $0 stop DIR"
        dir=$(realpath -m "$2"); stop ;;
  *) slurm_die "usage: $0 start N DIR | run DIR HOST CMD... | stop DIR" ;;
esac
