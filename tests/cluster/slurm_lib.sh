# shellcheck shell=bash disable=SC2154  # dir and slurm_me: set by the sourcing script
# What the two private test clusters share, sourced (not run) by
# tests/study/slurm_cluster.sh (every node on this machine, `slurmd -N`) and
# tests/cluster/slurm_hosts.sh (one node per host of tests/cluster/hosts.sh):
# munge, the common part of slurm.conf, starting the daemons, waiting for them,
# and stopping them by the process ids recorded at start, never by name.
#
# The sourcing script sets, before calling any of these:
#   dir          the cluster's folder, absolute and short (it holds munge's socket)
#   slurm_me     its own name, for messages
#   slurm_hosts  hosts.sh, when the nodes are its hosts (a daemon or client for
#                node hI runs through `hosts.sh run hI`, with HOSTS_DIR=$dir);
#                empty when every node is this machine
#
# Every Slurm command must find its slurm.conf: without SLURM_CONF a Slurm
# client asks DNS for the cluster's SRV record, that is, it sends a query to
# this machine's resolver outside. slurm_client refuses to run without it.

slurm_die() { echo "$slurm_me: $*" >&2; exit 2; }

# The command prefix that runs something on node $1 (in the array `prefix`).
slurm_prefix() {
  if [[ -n ${slurm_hosts:-} ]]; then prefix=("$slurm_hosts" run "$1"); else prefix=(); fi
}

# Runs a Slurm client command (scontrol, sinfo, squeue, scancel, sbatch...)
# where the controller can be reached: on h1 in a cluster of hosts.
slurm_client() {
  [[ -n ${SLURM_CONF:-} && -f $SLURM_CONF ]] ||
    slurm_die "refusing to run '$1' without SLURM_CONF naming an existing slurm.conf" \
      "(a Slurm client without one looks the cluster up in DNS)"
  local prefix
  slurm_prefix h1
  "${prefix[@]}" "$@"
}

# Starts a daemon on a node, detached from the caller's terminal and output
# pipes (setsid and the redirections), and records its pid in $dir/NAME.pid:
# setsid and `hosts.sh run` exec, so $! is the daemon itself.
slurm_start_daemon() {  # name, node, then the command
  local name=$1 prefix
  slurm_prefix "$2"
  shift 2
  setsid "${prefix[@]}" "$@" </dev/null >"$dir/$name.out" 2>&1 &
  echo $! >"$dir/$name.pid"
}

# Bounded at 60 s: the daemons are normally up in under a second, but in one CI
# run the slurmds were not idle after the 10 s this once allowed. A failure
# prints the daemons' last log lines, so that the cause shows in CI's output.
slurm_wait_for() {  # description, then a command that succeeds once ready
  local what=$1 log
  shift
  for _ in $(seq 600); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "$slurm_me: $what did not come up within 60 s; logs in $dir:" >&2
  for log in "$dir"/*.log "$dir"/*.out; do
    [[ -f $log ]] && { echo "--- $log (last lines)"; tail -n 15 "$log"; } >&2
  done
  return 1
}

# Makes the folders and munge's key; sets slurm_sock, munge's socket.
slurm_prepare() {
  mkdir -p "$dir"/{munge,state}
  # munged refuses a socket folder whose parents are not world-executable.
  chmod 755 "$dir" "$dir/munge"
  slurm_sock=$dir/munge/sock
  ((${#slurm_sock} < 100)) ||
    slurm_die "$dir is too long for a Unix socket path; use a short folder"
  head -c 1024 /dev/urandom >"$dir/munge.key"
  chmod 400 "$dir/munge.key"
}

# The lines of slurm.conf that both clusters share: munge, root, files in
# $dir, no cgroups, accounting or systemd, nodes that come back by themselves.
slurm_conf_common() {  # cluster name, controller host, controller address
  cat <<CONF
ClusterName=$1
SlurmctldHost=$2($3)
AuthType=auth/munge
AuthInfo=socket=$slurm_sock
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
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
SlurmdParameters=config_overrides
CONF
}

# Starts munged and slurmctld on the first node and a slurmd per node (its
# NodeName given by -N), and waits until every node is idle. $dir/slurm.conf
# must be written already.
slurm_start_daemons() {  # node names
  export SLURM_CONF=$dir/slurm.conf
  slurm_start_daemon munged "$1" munged --foreground --force --socket="$slurm_sock" \
    --key-file="$dir/munge.key" --pid-file="$dir/munge/munged.pidfile" \
    --log-file="$dir/munged.log" --seed-file="$dir/munge/seed"
  slurm_wait_for munged test -S "$slurm_sock"
  slurm_start_daemon slurmctld "$1" slurmctld -D -i -f "$SLURM_CONF"
  slurm_wait_for slurmctld slurm_client scontrol ping
  local node
  for node in "$@"; do
    mkdir -p "$dir/spool-$node"
    slurm_start_daemon "slurmd-$node" "$node" slurmd -D -N "$node" -f "$SLURM_CONF"
  done
  slurm_wait_for "slurmd (every node idle)" slurm_all_idle $#
}

slurm_all_idle() {  # node count
  [[ $(slurm_client sinfo -h -N -t idle -o %N | wc -l) == "$1" ]]
}

# Is process $1 running? A zombie is not (kill -0 succeeds on one).
slurm_alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }  # the state follows the command name, which may hold spaces
  [[ ${stat%% *} != Z ]]
}

# Cancels every job (while the controller can be reached: on hosts, while they
# are up), then stops the daemons.
slurm_stop_daemons() {
  export SLURM_CONF=$dir/slurm.conf
  if [[ -f $dir/slurmctld.pid && -f $SLURM_CONF && (-z ${slurm_hosts:-} || -f $dir/id) ]]; then
    slurm_client scancel --full --user="$(id -un)" >/dev/null 2>&1 || true
    for _ in $(seq 50); do
      [[ -z $(slurm_client squeue -h 2>/dev/null) ]] && break
      sleep 0.1
    done
  fi
  local pidfile pid
  for pidfile in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munged.pid"; do
    [[ -f $pidfile ]] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do slurm_alive "$pid" || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}
