#!/usr/bin/env bash
# Open MPI's plm_rsh_agent for the hosts of tests/cluster/hosts.sh: it stands in
# for ssh. Open MPI calls it as `rsh_agent.sh [ssh options] HOST orted ARGS...`,
# the ARGS quoted for a remote shell, so like ssh it joins them into one line
# for `sh -c`, run on HOST by entering its namespaces (HOSTS_DIR, exported by
# `hosts.sh run`, names the cluster). A host that is not up makes `hosts.sh
# run` fail at once with a message naming it, and mpirun then stops with "ORTE
# was unable to reliably start one or more daemons" instead of waiting; so
# does an orted that cannot connect back (in ~3 s, "unable to complete a TCP
# connection"). Only an agent that hangs would hang mpirun: Open MPI 4.1 has no
# timeout for daemons to call back (orte_startup_timeout is armed only after
# they have), so tests run mpirun under `timeout`.
set -euo pipefail

# Skip ssh-style options (Open MPI adds none for an agent not named ssh/rsh,
# but a user's plm_rsh_agent may carry some); those with a value skip it too.
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;
    *) shift ;;
  esac
done
if [[ $# -lt 2 ]]; then
  echo "rsh_agent.sh: usage: rsh_agent.sh [options] HOST COMMAND..." >&2
  exit 255
fi
host=${1#*@}  # user@host: the user is ignored, everything runs as us
shift
exec "$(dirname "$0")/hosts.sh" run "$host" /bin/sh -c "$*"
