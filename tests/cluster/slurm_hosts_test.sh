#!/usr/bin/env bash
# Checks tests/cluster/slurm_hosts.sh: a Slurm cluster of two hosts runs a job
# step across both (srun -N2 --ntasks-per-node=2 hostname: h1 h1 h2 h2), an MPI
# step under PMIx (ranks 2,3 on h2), and mpirun inside an sbatch job. Exits 0
# when all pass, 1 when one fails, 77 (skipped) without namespaces, Slurm,
# munge or Open MPI. Slurm and the hosts are always stopped (trap).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
for tool in mpicc slurmctld slurmd munged srun; do
  command -v $tool >/dev/null || { echo "slurm_hosts_test: SKIP: no $tool"; exit 77; }
done

# Shared by the hosts, so not under /tmp; short, for munge's socket path.
dir=$(mktemp -d /var/tmp/slh.XXXXXX)
trap 'cd /; "$here/slurm_hosts.sh" stop "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
"$here/slurm_hosts.sh" start 2 "$dir"
rc=$?
if ((rc == 77)); then echo "slurm_hosts_test: SKIP"; exit 77; fi
((rc == 0)) || { echo "slurm_hosts_test: slurm_hosts.sh start failed ($rc)"; exit 1; }
cd "$dir" || exit 1
# Sets HOSTS_DIR and SLURM_CONF (a Slurm command without it asks DNS).
on_h1() { timeout 60 "$here/slurm_hosts.sh" run "$dir" h1 "$@"; }

# shellcheck source=tests/cluster/test_lib.sh
source "$here/test_lib.sh"

out=$(on_h1 srun -N2 --ntasks-per-node=2 hostname 2>&1 | sort | tr '\n' ' ')
echo "srun hostname: $out"
check "srun -N2 --ntasks-per-node=2 hostname prints h1 h1 h2 h2" test "$out" = "h1 h1 h2 h2 "

mpicc -O1 -o where "$here/where.c" || { echo "slurm_hosts_test: mpicc failed"; exit 1; }
expected="rank 0 size 4 host h1 local_rank 0 sum 10
rank 1 size 4 host h1 local_rank 1 sum 10
rank 2 size 4 host h2 local_rank 0 sum 10
rank 3 size 4 host h2 local_rank 1 sum 10"
out=$(on_h1 srun -N2 --ntasks-per-node=2 --mpi=pmix ./where 2>&1)
echo "$out"
check "srun --mpi=pmix runs ranks 2,3 on h2" test "$(grep '^rank ' <<<"$out" | sort -n -k2)" = "$expected"

# mpirun in a batch job: Open MPI takes the nodes from Slurm and starts its
# daemons with srun.
on_h1 sbatch -N2 --ntasks-per-node=2 -o job.out --wait \
  --wrap "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun ./where" >/dev/null
cat job.out
check "mpirun inside sbatch -N2 runs ranks 2,3 on h2" \
  test "$(grep '^rank ' job.out | sort -n -k2)" = "$expected"

echo "slurm_hosts_test: $passed passed, $failed failed"
((failed == 0))
