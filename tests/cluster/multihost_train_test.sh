#!/usr/bin/env bash
# moelab across hosts, on the cluster of tests/cluster/hosts.sh (2 hosts, 2
# ranks each, Open MPI over TCP between them):
#  - an MoE with its experts over both hosts (ep 4) and within each host (ep 2,
#    data parallel across hosts) trains the single-host curve to 1e-6;
#  - ranks 2 and 3 run on h2 with local ranks 0 and 1 (run.json);
#  - a checkpoint written on 2 hosts resumes on 1 and the other way round;
#  - a peer that stops answering ends the job within parallel.timeout_s + 30 s
#    (h2's link cut, every rank on h2 frozen, a rank on h2 killed), leaving no
#    rank on any host, and `--resume auto` on the healthy host continues the
#    uninterrupted curve bitwise;
#  - SIGTERM as a scheduler's time limit delivers it, to the launcher
#    (launch/train.sh) and to every rank: a checkpoint at the stop step, the
#    launcher's status 3, and a resume at another layout;
#  - a run folder is one job's: a second job into it from h2 exits 2 naming
#    the holder on h1, and takes the folder over once that job is killed;
#  - every resume starts from its checkpoint's step (the log says which, and
#    the metrics lines up to it are the interrupted run's own).
#   multihost_train_test.sh MOELAB_BINARY
# Exits 0 when all pass, 1 when one fails, 77 (skipped) without namespaces.
set -uo pipefail

moelab=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cluster/test_lib.sh
source "$here/test_lib.sh"
hosts=$here/hosts.sh
compare=$here/compare_runs.py
timeout_s=10  # parallel.timeout_s of the fault runs
long=150      # steps of the fault runs

dir=$(shared_temp_dir multihost_train)
trap 'cd /; "$hosts" down "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
export HOSTS_DIR=$dir
cd "$dir" || exit 1
"$hosts" up 2 "$dir"
rc=$?
if ((rc == 77)); then echo "multihost_train_test: SKIP"; exit 77; fi
((rc == 0)) || { echo "multihost_train_test: hosts.sh up failed ($rc)"; exit 1; }


write_tiny_moe_job "$moelab" || exit 1
cat tiny.toml - >run.toml <<TOML
[train]
precision = "fp32"
batch_seqs = 8
threads = 1
max_steps = 16
[optim]
warmup_steps = 2
[eval]
interval = 4
max_windows = 4
[checkpoint]
interval = 4
keep = 100
[parallel]
timeout_s = $timeout_s
TOML

train=("$moelab" train run.toml)
one_host() {  # RUN [train args]: 4 ranks on h1 (shared memory)
  local run=$1; shift
  timeout 300 "$hosts" run h1 mpirun --oversubscribe --allow-run-as-root --mca btl self,vader \
    -np 4 "${train[@]}" --out "$run" "$@" >>"$run.log" 2>&1
}
two_hosts() {  # RUN [train args]: 2 ranks on h1, 2 on h2 (TCP between them)
  local run=$1; shift
  timeout -s KILL "${limit:-300}" "$hosts" mpirun --oversubscribe --host h1:2,h2:2 -np 4 \
    "${train[@]}" --out "$run" "$@" >>"$run.log" 2>&1
}
same() {  # RUN_A RUN_B RTOL
  "$compare" "$1" "$2" --rtol "$3" || { tail -n 20 "$1.log"; return 1; }
}
newest() {  # RUN: the step of its newest complete checkpoint
  local d
  d=$(ls -d "$1"/checkpoints/step_* 2>/dev/null | grep -v '\.tmp$' | tail -n 1)
  [[ -n $d ]] && echo $((10#${d##*step_})) || echo -1
}
stepping() {  # RUN N JOB: waits (up to 2 minutes) until RUN logged N steps while JOB runs
  local lines=0
  for _ in $(seq 1200); do
    lines=$(cat "$1/metrics.jsonl" 2>/dev/null | wc -l)
    ((lines >= $2)) && return 0
    kill -0 "$3" 2>/dev/null || break
    sleep 0.1
  done
  echo "$1: the run did not start"; cat "$1.log"; return 1
}
keep_metrics() { cp "$1/metrics.jsonl" "$1.before.jsonl"; }  # RUN, before its resume
resumed_from() {  # RUN STEP LOG: the resume in LOG went on from STEP's checkpoint
  local folder
  folder=$(printf 'step_%08d' "$2")
  grep -q "$folder (step $2)" "$3" || { echo "$3: no resume from step $2"; return 1; }
  cmp -s <(head -n "$2" "$1/metrics.jsonl") <(head -n "$2" "$1.before.jsonl") ||
    { echo "$1: metrics lines up to step $2 were rewritten"; return 1; }
}

# --- 2 hosts train the single-host curve, experts across and within hosts
for ep in 4 2; do
  one_host one_ep$ep --set parallel.ep=$ep
  two_hosts two_ep$ep --set parallel.ep=$ep
  check "ep $ep: 2 hosts x 2 ranks train the 1-host curve to 1e-6" same two_ep$ep one_ep$ep 1e-6
done
placed() {
  python3 - two_ep4/run.json <<'PY'
import json, sys
ranks = json.load(open(sys.argv[1]))["ranks"]
places = [(r["host"], r["local_rank"]) for r in ranks]
print("ranks at", places)
sys.exit(places != [("h1", 0), ("h1", 1), ("h2", 0), ("h2", 1)])
PY
}
check "ranks 2 and 3 run on h2 with local ranks 0 and 1" placed

# --- checkpoints move between 1 and 2 hosts
interrupt_copy() {  # FROM TO: the run as a crash after step 8 would leave it
  cp -r "$1" "$2"
  rm -rf "$2"/checkpoints/step_000000{12,16} "$2/DONE"
}
interrupt_copy two_ep4 to_one
keep_metrics to_one
one_host to_one --set parallel.ep=4 --resume auto
check "a 2-host checkpoint resumes on 1 host at its step" resumed_from to_one 8 to_one.log
check "... and continues the curve" same to_one one_ep4 1e-6
interrupt_copy one_ep4 to_two
keep_metrics to_two
two_hosts to_two --set parallel.ep=4 --resume auto
check "a 1-host checkpoint resumes on 2 hosts at its step" resumed_from to_two 8 to_two.log
check "... and continues the curve" same to_two one_ep4 1e-6

# --- a peer that stops answering
moelab_on() {  # HOST: pids of moelab processes in that host
  local pid
  for pid in $(ip netns pids "$("$hosts" netns "$1")"); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == moelab ]] && echo "$pid"
  done
}
one_host reference --set parallel.ep=4 --set train.max_steps=$long
ranks_left() { echo $(moelab_on h1) $(moelab_on h2); }
fault() {  # NAME: runs on 2 hosts, breaks h2 by `break_h2`, then resumes on h1
  local name=$1 job start ranks_s job_s rc=0
  # Killed if it outlives the bound by far: a hang fails the check.
  limit=$((timeout_s + 90)) two_hosts "$name" --set parallel.ep=4 --set train.max_steps=$long &
  job=$!
  stepping "$name" 8 "$job" || return 1
  break_h2
  start=$SECONDS
  # Every rank, on either host, must end within the bound.
  while [[ -n $(ranks_left) ]] && ((SECONDS - start <= timeout_s + 30)); do sleep 0.2; done
  ranks_s=$((SECONDS - start))
  local left=$(ranks_left)
  while kill -0 $job 2>/dev/null && ((SECONDS - start <= timeout_s + 30)); do sleep 0.2; done
  job_s=$((SECONDS - start))
  kill -0 $job 2>/dev/null && job_s="(still running)"
  wait $job || rc=$?
  heal_h2
  echo "$name: every rank ended ${ranks_s} s after the fault, mpirun after ${job_s} s" \
    "(exit $rc; parallel.timeout_s = $timeout_s)"
  grep -m3 "error\|noticed\|lost communication" "$name.log" | cut -c1-300
  [[ -z $left ]] || { echo "$name: ranks still running: $left"; return 1; }
  ((rc != 0)) || return 1
  [[ $job_s != "(still running)" ]] || return 1
  [[ ! -f $name/DONE ]] || return 1
  local step
  step=$(newest "$name")
  keep_metrics "$name"
  one_host "$name" --set parallel.ep=4 --set train.max_steps=$long --resume auto ||
    { echo "$name: the resume failed"; tail -n 20 "$name.log"; return 1; }
  resumed_from "$name" "$step" "$name.log" || return 1
  same "$name" reference 0
}

switch=$("$hosts" netns switch)
break_h2() { ip -n "$switch" link set h2 down; }
heal_h2() { ip -n "$switch" link set h2 up; }

check "h2's link cut: the job ends in time, no rank left, resume bitwise" fault cut
# mpirun's keepalive (hosts.sh mpirun-env) or the ranks' watchdog, whichever
# comes first, ends the job; either names what was lost.
check "... the log names the lost host or the stalled collective" grep -qE \
  "Remote daemon: .* on node h2|in step [0-9]* has waited [0-9]* s for its peers" cut.log

break_h2() { kill -STOP $(moelab_on h2); }
heal_h2() { true; }

check "every rank on h2 frozen: the job ends in time, no rank left, resume bitwise" fault frozen
check "... rank 0 names the frozen ranks" grep -q "rank [23] (h2): no heartbeat" frozen.log

break_h2() { kill -KILL $(moelab_on h2 | head -n 1); }
check "a rank on h2 killed: the job ends in time, no rank left, resume bitwise" fault killed
check "... the launcher names the killed rank" grep -q "process rank [23] .* on node h2" killed.log

# --- SIGTERM as a scheduler delivers it at a time limit: to the launcher and to
# every rank at once. launch/train.sh relays it to mpirun as USR1 (SIGTERM would
# make mpirun abort the job), so the launcher's own status is the ranks' 3.
printf 'h1 slots=2\nh2 slots=2\n' >hostfile
launched() {  # RUN [train args]: launch/train.sh with 2 ranks on each host, in the background
  local run=$1; shift
  "$hosts" run h1 env $("$hosts" mpirun-env) MOELAB_BUILD_DIR="$(dirname "$(dirname "$moelab")")" \
    "$here/../../launch/train.sh" -np 4 --hostfile hostfile run.toml --out "$run" "$@" \
    >>"$run.log" 2>&1
}
sigterm() {
  local job launcher rc=0 step
  launched sigterm --set parallel.ep=4 --set train.max_steps=$long &
  job=$!
  stepping sigterm 8 "$job" || return 1
  # hosts.sh run, nsenter and env exec one another: the child is train.sh.
  launcher=$(pgrep -P "$job")
  kill -TERM "$launcher" $(moelab_on h1) $(moelab_on h2)
  wait "$job" || rc=$?
  echo "sigterm: the launcher exited $rc"
  ((rc == 3)) || { tail -n 30 sigterm.log; return 1; }
  [[ ! -f sigterm/DONE ]] || return 1
  step=$(tail -n 1 sigterm/metrics.jsonl | python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])')
  [[ $(newest sigterm) == "$step" ]] || { echo "sigterm: no checkpoint at the stop step $step"; return 1; }
  grep -q "checkpoint saved at step $step" sigterm.log || return 1
  # Resumed at another layout: 4 ranks on one host, experts over pairs of them.
  keep_metrics sigterm
  one_host sigterm --set parallel.ep=2 --set train.max_steps=$long --resume auto || return 1
  resumed_from sigterm "$step" sigterm.log || return 1
  same sigterm reference 1e-6
}
check "SIGTERM to the launcher and every rank: checkpoint, launcher exit 3, resume at ep 2" sigterm

# --- a run folder is one job's, whichever hosts they run on
single_on() {  # HOST RUN [train args]: one rank on HOST, in the foreground
  local host=$1 run=$2; shift 2
  timeout 300 "$hosts" run "$host" "$moelab" train run.toml --out "$run" --set parallel.ep=1 \
    --set parallel.timeout_s=5 "$@"
}
locked() {
  local job holder rc=0 step
  single_on h1 shared --set train.max_steps=100000 >>shared.log 2>&1 &
  job=$!
  stepping shared 6 "$job" || return 1
  holder=$(moelab_on h1)
  single_on h2 shared --set train.max_steps=4 >second.log 2>&1 || rc=$?
  grep -m1 "in use" second.log
  ((rc == 2)) || { echo "locked: the second job exited $rc"; cat second.log; return 1; }
  grep -q "in use by another job (host h1, pid $holder)" second.log || return 1
  kill -KILL "$holder"
  wait "$job" 2>/dev/null
  step=$(newest shared)
  keep_metrics shared
  single_on h2 shared --set train.max_steps=$((step + 2)) --resume auto >requeued.log 2>&1 ||
    { cat requeued.log; return 1; }
  grep -m1 "taking over" requeued.log
  grep -q "taking over the lock of a job that is gone (host h1, pid $holder" requeued.log || return 1
  resumed_from shared "$step" requeued.log
}
check "a second job into a held folder exits 2 naming h1; a killed job's lock is taken over" locked

echo "multihost_train_test: $passed passed, $failed failed"
((failed == 0))
