#!/usr/bin/env bash
# shellcheck disable=SC2317  # functions called through check, until_true and trap
# slurm/train.sbatch on a two-host Slurm cluster (tests/cluster/slurm_hosts.sh),
# with a tiny MoE (300 steps, parallel.ep = 4):
#
#   a. reference: the config trained by mpirun -np 4 on one host;
#   b. sbatch -N 2 --ntasks-per-node 2 --wait slurm/train.sbatch (the experts
#      over both hosts): completes, ranks 2,3 on h2 with local ranks 0,1, every
#      loss and val_loss the reference's to 1e-6 (relative); and with ep = 2
#      (expert groups within each host) against its own 1-host reference;
#   c. preemption: the same job without --wait gets USR1 on its ranks once 10
#      steps are logged, as Slurm's --signal=USR1@T would send it; the ranks
#      checkpoint at the step they are on and exit 3, the script requeues the
#      job, which resumes from that checkpoint (--resume auto) and completes,
#      every loss bitwise that of b;
#   d. the same with a burst of USR1 (every ~20 ms until the job stops running),
#      so that some arrive while the ranks write the checkpoint and exit: the
#      ranks still exit 3, the job still requeues, resumes and matches b;
#   e. the same with SIGTERM to the ranks (scancel --signal=TERM: the job's
#      steps), as a preemption's grace time delivers it. (SIGTERM to srun
#      itself, scancel --full, makes srun SIGKILL its tasks: no program can
#      checkpoint then, which is why slurm/ asks for --signal=USR1@T ahead.)
#
# Slurm holds a requeued job back (Reason=BeginTime) for the credential
# lifetime, 120 s by default; the test moves its start to now with
# `scontrol update JobId=... StartTime=now` rather than wait, 2 s after the
# requeue (a job relaunched within the second of its requeue fails).
#
#   slurm_train_test.sh MOELAB_BINARY
#
# Exits 0 when every check passes, 1 when one fails, 77 (skipped) without
# namespaces, Slurm, munge, Open MPI or python3. The cluster is always stopped
# and the state folder removed (kept, with the cluster stopped, when
# SLURM_TRAIN_TEST_KEEP=1). Every Slurm command runs through
# `slurm_hosts.sh run`, which sets SLURM_CONF.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
me=slurm_train_test
moelab=${1:-}
[[ -n $moelab && -x $moelab ]] || { echo "usage: $0 MOELAB_BINARY (got '$moelab')" >&2; exit 1; }
moelab=$(realpath "$moelab")
for tool in slurmctld slurmd munged sbatch mpirun python3; do
  command -v $tool >/dev/null || { echo "$me: SKIP: no $tool"; exit 77; }
done

t0=$SECONDS
elapsed() { echo "$((SECONDS - t0)) s"; }

# Shared by the hosts, so not under /tmp; short, for munge's socket path.
dir=$(mktemp -d /var/tmp/slt.XXXXXX)
cluster=$dir/c
work=$dir/w
cleanup() {
  cd /
  "$here/slurm_hosts.sh" stop "$cluster" >/dev/null 2>&1
  [[ ${SLURM_TRAIN_TEST_KEEP:-0} == 1 ]] || rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

"$here/slurm_hosts.sh" start 2 "$cluster"
rc=$?
if ((rc == 77)); then echo "$me: SKIP"; exit 77; fi
((rc == 0)) || { echo "$me: slurm_hosts.sh start failed ($rc)"; exit 1; }
echo "$me: cluster up after $(elapsed)"
mkdir -p "$work"
cd "$work" || exit 1

# Everything runs on the hosts: h1 has only loopback and the bridge.
on_h1() { "$here/slurm_hosts.sh" run "$cluster" h1 "$@"; }
slurm() { timeout 30 "$here/slurm_hosts.sh" run "$cluster" h1 "$@"; }

# shellcheck source=tests/cluster/test_lib.sh
source "$here/test_lib.sh"
finish() {
  echo "$me: total $(elapsed)"
  [[ ${SLURM_TRAIN_TEST_KEEP:-0} == 1 ]] && echo "$me: keeping $dir (the cluster is stopped)"
  echo "$me: $passed passed, $failed failed"
  ((failed == 0)) && exit 0
  exit 1
}
fatal() {  # a step the rest depends on failed: shows the logs and stops
  echo "FAIL: $*"; ((failed++))
  local log
  for log in "$work"/*.out "$work"/*.log; do
    [[ -f $log ]] && { echo "--- $log (last lines)"; tail -n 25 "$log"; }
  done
  finish
}

# until TIMEOUT DESCRIPTION COMMAND...: polls every 0.2 s; fails after TIMEOUT s.
until_true() {
  local limit=$1 what=$2 start=$SECONDS; shift 2
  until "$@"; do
    ((SECONDS - start < limit)) || { echo "$me: timed out after $limit s waiting for $what"; return 1; }
    sleep 0.2
  done
}
lines() { if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi; }
job_field() {  # job id, field: the field's value in scontrol show job
  slurm scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}
job_state() { job_field "$1" JobState; }

# --- data and config --------------------------------------------------------
write_tiny_moe_job "$moelab" on_h1 timeout 60 || fatal "moelab prep (prep.log)"
cat tiny.toml - >config.toml <<CONF
[parallel]
ep = 4
[train]
precision = "fp32"
batch_seqs = 8
threads = 1
max_steps = 300
[optim]
warmup_steps = 1
[eval]
interval = 50
max_windows = 4
[checkpoint]
interval = 25
keep = 100
CONF

# compare RUN REFERENCE RTOL: every loss (metrics.jsonl) and val_loss (val.csv),
# step by step; RTOL 0 is bitwise.
compare() { python3 "$here/compare_runs.py" "$1" "$2" --rtol "$3"; }

# --- a. reference: mpirun on one host ---------------------------------------
t=$SECONDS
on_h1 timeout 150 mpirun --oversubscribe --allow-run-as-root --mca btl self,vader -np 4 \
  "$moelab" train config.toml --out "$work/ref" >ref.log 2>&1 || fatal "reference mpirun run (ref.log)"
echo "$me: a. reference (mpirun -np 4 on h1) took $((SECONDS - t)) s"
check "a. reference run completed" test -f ref/DONE

# --- b. sbatch over two hosts -----------------------------------------------
# The two hosts share this machine's cores, so the 4 ranks are oversubscribed:
# ranks that yield while they wait (as mpirun --oversubscribe makes them) run
# the steps several times faster. Not for real clusters, so not in the script.
submit() {  # run name, then sbatch options: slurm/train.sbatch on 2 hosts x 2 ranks
  local name=$1; shift
  on_h1 timeout 150 env MOELAB="$moelab" OMPI_MCA_mpi_yield_when_idle=1 \
    sbatch -N 2 --ntasks-per-node 2 -o "$name.out" "$@" \
    "$repo/slurm/train.sbatch" "${config:-config.toml}" --out "$work/$name"
}
t=$SECONDS
submit b --wait >b.sbatch 2>&1
rc=$?
echo "$me: b. sbatch -N 2 --ntasks-per-node 2 --wait took $((SECONDS - t)) s (exit $rc)"
((rc == 0)) || fatal "b. sbatch --wait exited $rc: $(cat b.sbatch)"
check "b. the job completed (DONE)" test -f b/DONE
placement=$(python3 -c '
import json, sys
ranks = json.load(open(sys.argv[1]))["ranks"]
print(" ".join("%s:%s:%s" % (r["rank"], r["host"], r["local_rank"]) for r in ranks))' b/run.json)
echo "b. ranks (rank:host:local_rank): $placement"
check "b. run.json: ranks 0,1 on h1 and 2,3 on h2, local ranks 0 and 1" \
  test "$placement" = "0:h1:0 1:h1:1 2:h2:0 3:h2:1"
check "b. losses and val_losses equal the reference to 1e-6" compare b ref 1e-6

# The expert groups within each host (ep 2), data parallel across the hosts.
sed 's/^ep = 4$/ep = 2/' config.toml >config_ep2.toml
on_h1 timeout 150 mpirun --oversubscribe --allow-run-as-root --mca btl self,vader -np 4 \
  "$moelab" train config_ep2.toml --out "$work/ref_ep2" >ref_ep2.log 2>&1 ||
  fatal "ep 2 reference mpirun run (ref_ep2.log)"
config=config_ep2.toml submit b_ep2 --wait >b_ep2.sbatch 2>&1 || fatal "b. ep 2 sbatch: $(cat b_ep2.sbatch)"
check "b. ep 2: 2 hosts equal the 1-host run to 1e-6" compare b_ep2 ref_ep2 1e-6

# --- c and d. preemption: USR1 to the ranks, requeue, resume -----------------
at_least() { (($(lines "$1") >= $2)); }
requeued() {  # job, restart count: pending again after that many restarts
  [[ $(job_field "$1" Restarts) == "$2" && $(job_state "$1") == PENDING ]]
}
requeued_or_ended() {  # job, restart count: requeued, or ended for good
  requeued "$@" || [[ $(job_state "$1") =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)$ ]]
}
job_over() { [[ $(job_state "$1") != RUNNING && $(job_state "$1") != COMPLETING ]]; }
stop_steps() {  # the steps that rank 0 said it stopped and checkpointed at
  sed -n 's/.*stop signal: checkpoint saved at step \([0-9]*\);.*/\1/p' "$1"
}

# preempt NAME once|burst|term: submits the job (run NAME, output NAME.out)
# and, once it has logged 10 steps, sends USR1 to its ranks: one (once), or one
# every ~20 ms for as long as the job runs (burst), so that some arrive while
# the ranks write the checkpoint and while they exit; or SIGTERM to the ranks
# (term). Then expects the job
# requeued, resumed from the checkpoint of the step it stopped at, and
# complete, with every loss bitwise that of b.
preempt() {
  local name=$1 mode=$2 t=$SECONDS job out=$1.out sent stop signal=USR1
  [[ $mode == term ]] && signal=TERM
  job=$(submit "$name" --parsable 2>"$name.sbatch") || fatal "$name. sbatch: $(cat "$name.sbatch")"
  job=${job%%;*}
  until_true 90 "10 steps in $name/metrics.jsonl" at_least "$name/metrics.jsonl" 10 ||
    fatal "$name. the job did not log 10 steps"
  echo "$name. job $job: $(lines "$name/metrics.jsonl") steps logged after $((SECONDS - t)) s;" \
    "scancel --signal=$signal $job ($mode)"
  # Without --full (or --batch), scancel signals the job's steps, that is the
  # ranks, and not the batch script: as --signal=USR1@T does.
  if [[ $mode == once || $mode == term ]]; then
    slurm scancel --signal=$signal "$job" || fatal "$name. scancel --signal=$signal $job"
  else
    # shellcheck disable=SC2016  # expanded by that bash
    sent=$(on_h1 timeout 60 bash -c 'n=0
      while [[ $(squeue -h -j "$1" -o %T) == RUNNING ]]; do
        scancel --signal=USR1 "$1" 2>/dev/null && n=$((n + 1)); sleep 0.02
      done; echo $n' burst "$job")
    echo "$name. sent USR1 ${sent:-?} times, until the job left RUNNING"
  fi
  # The script requeues the job; Slurm holds it back until its BeginTime.
  until_true 60 "job $job to be requeued" requeued_or_ended "$job" 1
  if ! requeued "$job" 1; then
    echo "$name. job $job: $(slurm scontrol show job "$job" | grep -o 'JobState=[^ ]*\|ExitCode=[^ ]*' | tr '\n' ' ')"
    echo "--- $out"; grep -v '\] step [0-9]* loss' "$out" | tail -n 15
    check "$name. the job was requeued" false
    return
  fi
  echo "$name. requeued $((SECONDS - t)) s after submission:" \
    "$(slurm scontrol show job "$job" | grep -o 'JobState=[^ ]*\|Reason=[^ ]*\|EligibleTime=[^ ]*' | tr '\n' ' ')" \
    "(now $(date +%FT%T))"
  # Not in the second of the requeue: the nodes revoked the job's credential
  # then, and refuse ("Job credential revoked", the job FAILED) one issued in
  # that same second, which the hold exists to prevent.
  sleep 2
  slurm scontrol update JobId="$job" StartTime=now || fatal "scontrol update JobId=$job StartTime=now"
  until_true 120 "job $job to complete" test -f "$name/DONE"
  until_true 30 "job $job to leave the running state" job_over "$job"
  echo "$name. job $job: $(job_state "$job") after $((SECONDS - t)) s, restarts $(job_field "$job" Restarts)"
  echo "--- $out (without the step lines)"
  grep -v '\] step [0-9]* loss' "$out"
  echo "---"
  stop=$(stop_steps "$out" | head -n 1)
  echo "$name. the ranks stopped at step ${stop:-?} (checkpoint interval 25)"
  check "$name. first run: rank 0 saved a checkpoint on the signal" test -n "$stop"
  check "$name. first run: moelab exited 'stopped on a signal at step $stop'" \
    grep -q "stopped on a signal at step $stop;" "$out"
  check "$name. the script requeued the job" grep -q "stopped with a checkpoint: requeueing job $job" "$out"
  check "$name. a checkpoint exists at step $stop" test -d "$name/checkpoints/step_$(printf %08d "$stop")"
  check "$name. the job ran again as restart 1 and stopped once only" \
    test "$(grep -c "job $job restart" "$out")" = 2 -a "$(stop_steps "$out" | wc -l)" = 1
  check "$name. restart 1 resumed from step $stop" grep -q "resumed from .*/step_0*$stop (step $stop)" "$out"
  check "$name. the requeued job completed (DONE)" test -f "$name/DONE"
  check "$name. losses and val_losses bitwise those of the uninterrupted run b" compare "$name" b 0
}
preempt c once
preempt d burst
preempt e term
finish
