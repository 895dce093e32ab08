#!/usr/bin/env bash
# A private single-node Slurm cluster for tests: its own munged, slurmctld and
# slurmd, with every file under one short folder (Unix socket paths must stay
# under 108 bytes). Runs as root without systemd or cgroups.
#
#   slurm_cluster.sh start DIR   # prints "export SLURM_CONF=DIR/slurm.conf"
#   slurm_cluster.sh stop DIR    # cancels every job, then stops the daemons
#
# SLURM_CLUSTER_CPUS and SLURM_CLUSTER_GPUS (default: this machine's cores, no
# GPUs) declare a bigger node than the machine has, so that `sbatch --test-only`
# can check scripts written for GPU nodes; jobs that need them never start.
# SLURM_CLUSTER_NODES (default 1) adds further nodes like the first, each with
# its own slurmd on this machine (`slurmd -N`), so multi-node jobs really run.
#
# Daemons are stopped by the process ids recorded at start, never by name, so
# other Slurm or munge processes on the machine are left alone. What this shares
# with tests/cluster/slurm_hosts.sh (one node per network-namespace host) is in
# tests/cluster/slurm_lib.sh.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[[ $# == 2 ]] || usage
action=$1
dir=$(realpath -m "$2")
slurm_me=slurm_cluster
slurm_hosts=""  # every node is this machine
# shellcheck source-path=SCRIPTDIR source=../cluster/slurm_lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../cluster/slurm_lib.sh"

# A TCP port below the kernel's ephemeral range (so no outgoing connection can
# hold it), that no socket uses in any state and that this start has not handed
# out already: a daemon that cannot bind its port never comes up. Sets the
# variable named by $1 (not printed: a $(...) subshell would lose used_ports).
used_ports=" "
free_port() {
  local low high port
  read -r low high </proc/sys/net/ipv4/ip_local_port_range
  # Below the range where it leaves room, else above it, else anywhere.
  if ((low >= 11000)); then high=$low low=10000
  elif ((high <= 64000)); then low=$((high + 1)) high=65535
  else low=20000 high=50000; fi
  while :; do
    port=$((low + RANDOM % (high - low)))
    [[ $used_ports == *" $port "* ]] && continue
    if [[ -z $(ss -Htan "sport = :$port") ]]; then
      used_ports+="$port "
      printf -v "$1" %s "$port"
      return
    fi
  done
}

start() {
  slurm_prepare
  local host cpus=${SLURM_CLUSTER_CPUS:-$(nproc)} gpus=${SLURM_CLUSTER_GPUS:-0} gres=""
  local nodes=${SLURM_CLUSTER_NODES:-1} more_nodes="" names
  host=$(hostname -s)
  names=$host
  local ctld_port slurmd_port node_port
  free_port ctld_port
  free_port slurmd_port
  for ((i = 2; i <= nodes; i++)); do
    free_port node_port
    more_nodes+="NodeName=${host}n$i NodeAddr=127.0.0.1 Port=$node_port CPUs=$cpus RealMemory=1000"
    ((gpus > 0)) && more_nodes+=" Gres=gpu:$gpus"
    more_nodes+=$' State=UNKNOWN\n'
    names+=" ${host}n$i"
  done
  if (( gpus > 0 )); then
    # Slurm wants a character device per GPU: null devices stand in for them.
    gres="Gres=gpu:$gpus"
    for ((i = 0; i < gpus; i++)); do
      [[ -c $dir/gpu$i ]] || mknod "$dir/gpu$i" c 1 3
    done
    echo "NodeName=${names// /,} Name=gpu File=$dir/gpu[0-$((gpus - 1))]" >"$dir/gres.conf"
  fi
  {
    slurm_conf_common moelabtest "$host" 127.0.0.1
    cat <<CONF
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
MpiDefault=pmix
DependencyParameters=kill_invalid_depend
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 $gres State=UNKNOWN
${more_nodes}PartitionName=debug Nodes=${names// /,} Default=YES MaxTime=INFINITE State=UP
CONF
  } >"$dir/slurm.conf"
  # shellcheck disable=SC2086  # names is a list
  slurm_start_daemons $names
  echo "export SLURM_CONF=$SLURM_CONF"
}

case $action in
  start) start ;;
  stop) slurm_stop_daemons ;;
  *) usage ;;
esac
