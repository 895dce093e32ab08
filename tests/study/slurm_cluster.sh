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
# other Slurm or munge processes on the machine are left alone.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[[ $# == 2 ]] || usage
action=$1
dir=$(realpath -m "$2")

start_daemon() {  # name, then the command; records the pid in DIR/NAME.pid
  local name=$1; shift
  "$@" >"$dir/$name.out" 2>&1 &
  echo $! >"$dir/$name.pid"
}

# Bounded at 60 s: the daemons are normally up in under a second, but in one CI
# run the slurmds were not idle after the 10 s this once allowed. A failure
# prints the daemons' last log lines, so that the cause shows in CI's output.
wait_for() {  # description, then a command that succeeds once ready
  local what=$1; shift
  for _ in $(seq 600); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "slurm_cluster: $what did not come up within 60 s; logs in $dir:" >&2
  local log
  for log in "$dir"/*.log "$dir"/*.out; do
    [[ -f $log ]] && { echo "--- $log (last lines)"; tail -n 15 "$log"; } >&2
  done
  return 1
}

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
  mkdir -p "$dir"/{munge,state}
  # munged refuses a socket folder whose parents are not world-executable.
  chmod 755 "$dir" "$dir/munge"
  local sock="$dir/munge/sock"
  if (( ${#sock} >= 100 )); then
    echo "slurm_cluster: $dir is too long for a Unix socket path; use a short folder" >&2
    exit 2
  fi
  head -c 1024 /dev/urandom >"$dir/munge.key"
  chmod 400 "$dir/munge.key"
  start_daemon munged munged --foreground --force --socket="$sock" --key-file="$dir/munge.key" \
    --pid-file="$dir/munge/munged.pidfile" --log-file="$dir/munged.log" \
    --seed-file="$dir/munge/seed"
  wait_for munged test -S "$sock"

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
  cat >"$dir/slurm.conf" <<CONF
ClusterName=moelabtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pidfile
SlurmdPidFile=$dir/slurmd-%n.pidfile
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmix
SchedulerParameters=batch_sched_delay=0
DependencyParameters=kill_invalid_depend
ReturnToService=2
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 $gres State=UNKNOWN
${more_nodes}PartitionName=debug Nodes=${names// /,} Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF="$dir/slurm.conf"
  start_daemon slurmctld slurmctld -D -i -f "$SLURM_CONF"
  wait_for slurmctld scontrol ping
  local node
  for node in $names; do
    mkdir -p "$dir/spool-$node"
    start_daemon "slurmd-$node" slurmd -D -N "$node" -f "$SLURM_CONF"
  done
  wait_for "slurmd (every node idle)" bash -c "[[ \$(sinfo -h -N -t idle -o %N | wc -l) == $nodes ]]"
  echo "export SLURM_CONF=$SLURM_CONF"
}

stop() {
  export SLURM_CONF="$dir/slurm.conf"
  if [[ -f $dir/slurmctld.pid ]]; then
    scancel --full --user="$(id -un)" >/dev/null 2>&1 || true
    for _ in $(seq 50); do
      [[ -z $(squeue -h 2>/dev/null) ]] && break
      sleep 0.1
    done
  fi
  local pidfile pid
  for pidfile in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munged.pid"; do
    [[ -f $pidfile ]] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

case $action in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
