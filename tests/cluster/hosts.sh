#!/usr/bin/env bash
# A cluster of hosts h1..hN on this one machine, so that multi-node tests
# (mpirun across hosts, Slurm with one slurmd per host) really cross a network
# and really see different hostnames, /tmp and /dev/shm, without real machines.
#
#   hosts.sh up N DIR              # makes hosts h1..hN; their state lives in DIR
#   hosts.sh down DIR              # removes all that `up` made; idempotent
#   HOSTS_DIR=DIR hosts.sh run HOST CMD...   # runs CMD on HOST (cwd and env kept)
#   HOSTS_DIR=DIR hosts.sh mpirun ARGS...    # mpirun on h1, set up to reach the others
#   hosts.sh mpirun-env            # prints the OMPI_MCA_* settings that `mpirun` adds
#   hosts.sh rsh-agent             # prints the path of Open MPI's plm_rsh_agent
#   HOSTS_DIR=DIR hosts.sh netns HOST|switch # the network namespace's name (for ip -n)
#
# Each host is a network namespace holding one interface, cl0, with address
# 10.213.K.i/24 (host hi), cabled to a bridge that lives in a separate "switch"
# namespace: the root namespace gets no interface and no address, and the hosts
# have no default route, so nothing they send can leave the bridge. Each host
# also has its own UTS namespace (`hostname` prints hi) and mount namespace with
# private tmpfs on /tmp and /dev/shm, and DIR/hosts bind-mounted on /etc/hosts
# so that h1..hN resolve; the rest of the file system is shared, so DIR must not
# lie under /tmp. The UTS and mount namespaces are kept alive by one holder
# process per host (`sleep infinity`), whose pid DIR/hI.pid records; `run`
# enters them with nsenter.
#
# K is picked per cluster (the first free one from a hash of DIR), by creating
# the switch namespace mlcK-sw, which fails if it exists: concurrent clusters
# (ctest -j) get different namespaces (mlcK-sw, mlcK-h1, ...) and subnets.
# Interface names are per namespace, so they never clash.
#
# Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN); where namespaces cannot be made,
# `up` exits 77 with the reason, which ctest reports as a skipped test.
set -Eeuo pipefail
# A command that fails under set -e names itself (in functions too: -E) rather
# than ending us silently.
trap 'echo "hosts.sh: line $LINENO: \"$BASH_COMMAND\" failed ($?)" >&2' ERR

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ifname=cl0  # the one interface of every host
# The checkout (scripts, build, .venv) stays visible on every host even when it
# lies under /tmp, which each host has its own of: the top folder under /tmp
# that holds it (HOSTS_KEEP overrides; empty when it is elsewhere).
repo=$(cd "$here/../.." && pwd)
keep=""
[[ $repo == /tmp/* ]] && keep="/tmp/$(cut -d/ -f3 <<<"$repo")"
keep=${HOSTS_KEEP-$keep}
up_done=""

die() { echo "hosts.sh: $*" >&2; exit 1; }
skip() { echo "hosts.sh: cannot make hosts here: $*" >&2; exit 77; }

state_dir() {  # DIR made absolute; refuses /tmp, which each host has its own of
  local d
  d=$(realpath -m "$1")
  [[ $d == /tmp || $d == /tmp/* || $d == /dev/shm/* ]] &&
    die "$d is under /tmp or /dev/shm, which every host has its own of; use e.g. /var/tmp"
  echo "$d"
}

# Can this process make namespaces? Tried for real rather than guessed from uid.
check_namespaces() {
  local tool
  for tool in ip unshare nsenter; do
    command -v "$tool" >/dev/null || skip "'$tool' is not installed"
  done
  local err
  err=$(unshare --net --uts --mount true 2>&1) ||
    skip "unshare --net --uts --mount failed (needs root / CAP_SYS_ADMIN): $err"
}

# No IPv6 in namespace $1: no router solicitations or link-local addresses,
# only the frames we send. (A kernel without IPv6 has nothing to turn off.)
no_ipv6() {
  ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
    net.ipv6.conf.default.disable_ipv6=1 2>/dev/null || true
}

# The holder of one host's UTS and mount namespaces (sh -c "$holder" holder DIR
# HOST KEEP): sets the hostname, /etc/hosts, /tmp and /dev/shm, then sleeps.
# KEEP, when not empty, is a folder under /tmp that every host must still see
# through its own /tmp (a checkout cloned there: its scripts and build); it is
# parked in DIR across the new tmpfs and moved back onto the same path. A fresh
# sysfs makes /sys/class/net show the host's own interfaces (as `ip netns exec`
# does), but would hide the cgroup file systems slurmd needs: they are carried
# over, through the new /tmp, onto the new /sys.
# shellcheck disable=SC2016  # expanded by that sh
holder='
  hostname "$2" &&
  mount --bind "$1/hosts" /etc/hosts &&
  if [ -n "$3" ]; then
    mkdir -p "$1/.keep-$2" && mount --rbind "$3" "$1/.keep-$2"; fi &&
  mount -t tmpfs -o mode=1777 tmpfs /tmp &&
  if [ -n "$3" ]; then
    mkdir -p "$3" && mount --move "$1/.keep-$2" "$3" && rmdir "$1/.keep-$2"; fi &&
  if mountpoint -q /sys/fs/cgroup; then
    mkdir /tmp/.cgroup && mount --rbind /sys/fs/cgroup /tmp/.cgroup; fi &&
  umount -l /sys && mount -t sysfs sysfs /sys &&
  if [ -d /tmp/.cgroup ]; then
    mount --move /tmp/.cgroup /sys/fs/cgroup && rmdir /tmp/.cgroup; fi &&
  mount -t tmpfs -o mode=1777 tmpfs /dev/shm &&
  touch "$1/$2.ready" &&
  exec sleep infinity'

up() {
  local n=$1 dir
  if ! [[ $n =~ ^[1-9][0-9]*$ ]] || ((n > 250)); then die "N must be 1..250, got '$n'"; fi
  dir=$(state_dir "$2")
  check_namespaces
  mkdir -p "$dir"
  [[ -f $dir/id ]] && die "$dir already holds a cluster (run: hosts.sh down $dir)"

  # Claim K: `ip netns add` creates /run/netns/NAME exclusively, so it is a lock.
  local k start err
  start=$(($(cksum <<<"$dir" | cut -d' ' -f1) % 250 + 1))
  for ((i = 0; i < 250; i++)); do
    k=$(((start + i - 1) % 250 + 1))
    if err=$(ip netns add "mlc$k-sw" 2>&1); then break; fi
    [[ $err == *"File exists"* ]] || skip "ip netns add failed: $err"
    k=""
  done
  [[ -n $k ]] || die "every 10.213.K.0/24 (K=1..250) is in use"
  echo "$k" >"$dir/id"
  echo "$n" >"$dir/n"
  # From here on, a failure takes down what was made so far.
  trap '[[ -n $up_done ]] || down "$dir"' EXIT

  local sw="mlc$k-sw" net="10.213.$k"
  no_ipv6 "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up

  {
    echo "127.0.0.1 localhost"
    for ((i = 1; i <= n; i++)); do echo "$net.$i h$i"; done
  } >"$dir/hosts"

  for ((i = 1; i <= n; i++)); do
    local ns="mlc$k-h$i"
    ip netns add "$ns"
    no_ipv6 "$ns"
    # The veth is made in the switch namespace with its peer put straight into
    # the host's: no interface ever appears in the root namespace.
    ip -n "$sw" link add "h$i" type veth peer name "$ifname" netns "$ns"
    ip -n "$sw" link set "h$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$net.$i/24" dev "$ifname"
    ip -n "$ns" link set "$ifname" up
    # setsid and the redirections detach the holder from our terminal and
    # pipes (ctest waits for every holder of a test's output pipe to close it).
    setsid nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private \
      sh -c "$holder" holder "$dir" "h$i" "$keep" </dev/null >"$dir/h$i.log" 2>&1 &
    echo $! >"$dir/h$i.pid"
  done
  # nsenter, unshare and sh all exec, so the recorded pid is the holder.
  for ((i = 1; i <= n; i++)); do
    for _ in $(seq 100); do [[ -f $dir/h$i.ready ]] && break; sleep 0.05; done
    [[ -f $dir/h$i.ready ]] || die "host h$i did not come up: $(cat "$dir/h$i.log")"
  done
  up_done=1
  echo "hosts.sh: h1..h$n up on $net.0/24 (namespaces mlc$k-*), state in $dir"
}

# Is process $1 running? A zombie is not: our holders are reparented to init,
# which may reap them late, and kill -0 succeeds on a zombie.
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }  # the state follows the command name, which may hold spaces
  [[ ${stat%% *} != Z ]]
}

# Is process $1 in network namespace $2? Guards against a recycled pid.
in_netns() {
  [[ $(readlink "/proc/$1/ns/net" 2>/dev/null) == "net:[$(stat -L -c %i "/run/netns/$2" 2>/dev/null)]" ]]
}

down() {
  local dir k n
  dir=$(state_dir "$1")
  [[ -f $dir/id ]] || return 0
  k=$(cat "$dir/id")
  n=$(cat "$dir/n" 2>/dev/null || echo 0)
  local i ns pid pids=""
  for ((i = 1; i <= n; i++)); do
    ns="mlc$k-h$i"
    [[ -e /run/netns/$ns ]] || continue
    # The holder by its recorded pid, and whatever else still runs inside this
    # host (daemons, a stray orted): processes of our own namespace only.
    pid=$(cat "$dir/h$i.pid" 2>/dev/null || true)
    [[ -n $pid ]] && in_netns "$pid" "$ns" && pids+=" $pid"
    pids+=" $(ip netns pids "$ns" | tr '\n' ' ')"
  done
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  for pid in $pids; do
    for _ in $(seq 40); do alive "$pid" || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
  done
  # Deleting a host's namespace deletes its veth pair; the bridge goes with the
  # switch's. A namespace still in use by a process lives on until it exits.
  for ((i = 1; i <= n; i++)); do
    ns="mlc$k-h$i"
    [[ ! -e /run/netns/$ns ]] || ip netns del "$ns"
    rm -f "$dir/h$i.pid" "$dir/h$i.ready" "$dir/h$i.log"
  done
  [[ ! -e /run/netns/mlc$k-sw ]] || ip netns del "mlc$k-sw"
  rm -f "$dir/id" "$dir/n" "$dir/hosts"
}

cluster_dir() {  # $HOSTS_DIR, checked and made absolute
  [[ -n ${HOSTS_DIR:-} ]] || die "set HOSTS_DIR to the DIR of a cluster (hosts.sh up N DIR)"
  local dir
  dir=$(state_dir "$HOSTS_DIR")
  [[ -f $dir/id ]] || die "no cluster is up in $dir"
  echo "$dir"
}

run() {
  local host=$1; shift
  local dir pid
  dir=$(cluster_dir)
  [[ $host =~ ^h[0-9]+$ && -f $dir/$host.pid ]] || die "run: no host '$host' up in $dir"
  pid=$(cat "$dir/$host.pid")
  alive "$pid" || die "run: host '$host' is down (holder $pid is gone)"
  [[ $PWD != /tmp && $PWD != /tmp/* ]] || [[ -n $keep && ($PWD == "$keep" || $PWD == "$keep"/*) ]] ||
    die "run: the current folder $PWD is under /tmp, which $host has its own of"
  export HOSTS_DIR=$dir
  # Entering a mount namespace moves the cwd to /; --wd brings it back.
  exec nsenter -t "$pid" --net --uts --mount --wd="$PWD" -- "$@"
}

# The Open MPI settings one mpirun across hosts needs, as OMPI_MCA_* variables
# rather than --mca options: mpirun rejects an --mca given twice, while a
# command-line --mca overrides a variable, so tests can still change any of them.
# Why each, in order: the agent enters the target host (the one must-have);
# launch with it even inside a Slurm job's environment, and take the hosts from
# --host, not from that job's allocation; ob1 with TCP between hosts and shared
# memory within one (a UCX build would otherwise pick pml ucx, which ignores the
# btl settings; Debian's openmpi-mca-params.conf already excludes ucx); MPI and
# daemon traffic only on the bridge interface (a host has only lo and cl0 now,
# but this keeps it so); TCP keepalive on mpirun's links to its daemons, so a
# cut-off host's daemon is declared lost (and the job ended) within ~8 s
# instead of after minutes of retransmissions; no binding to cores (the hosts
# share this machine's cores, and each would bind its first rank to core 0);
# tests run as root.
mpirun_env() {
  cat <<ENV
OMPI_MCA_plm_rsh_agent=$here/rsh_agent.sh
OMPI_MCA_plm=rsh
OMPI_MCA_ras=^slurm
OMPI_MCA_pml=ob1
OMPI_MCA_btl=self,vader,tcp
OMPI_MCA_btl_tcp_if_include=$ifname
OMPI_MCA_oob_tcp_if_include=$ifname
OMPI_MCA_oob_tcp_keepalive_time=5
OMPI_MCA_oob_tcp_keepalive_intvl=1
OMPI_MCA_oob_tcp_keepalive_probes=3
OMPI_MCA_hwloc_base_binding_policy=none
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ENV
}

netns() {  # the network namespace of host HOST, or of the switch for "switch"
  local dir k
  dir=$(cluster_dir)
  k=$(cat "$dir/id")
  case $1 in switch) echo "mlc$k-sw" ;; h[0-9]*) echo "mlc$k-$1" ;; *) die "netns: no host '$1'" ;; esac
}

case ${1:-} in
  up) [[ $# == 3 ]] || die "usage: $0 up N DIR"; up "$2" "$3" ;;
  down) [[ $# == 2 ]] || die "usage: $0 down DIR"; down "$2" ;;
  run) [[ $# -ge 3 ]] || die "usage: HOSTS_DIR=DIR $0 run HOST CMD..."; shift; run "$@" ;;
  mpirun) shift; while read -r v; do declare -x "$v"; done < <(mpirun_env); run h1 mpirun "$@" ;;
  mpirun-env) mpirun_env ;;
  rsh-agent) echo "$here/rsh_agent.sh" ;;
  netns) [[ $# == 2 ]] || die "usage: HOSTS_DIR=DIR $0 netns HOST|switch"; netns "$2" ;;
  *) die "usage: $0 up N DIR | down DIR | run HOST CMD... | mpirun ARGS... | mpirun-env | rsh-agent | netns HOST|switch" ;;
esac
