#!/usr/bin/env bash
# Expert-parallel scaling of the reference MoE (issue 5): d 256, 4 layers,
# 4 experts of width 512, top-2, seq 256, batch 16, bf16 (the defaults of
# `moelab config defaults` with moe.enabled = true).
#
# First WARM steps at (1 rank x 2 threads) with the default schedule, so the
# router is past its early collapse (in the first ~50 steps at full learning
# rate, top-2 routing can send nearly every token to the same two experts,
# which with ep = 2 puts all expert work on one rank). Every layout then
# resumes from that checkpoint for STEPS steps:
#   (1 rank x 1 thread), (1 rank x 2 threads), (2 ranks x 1 thread, ep = 2),
#   (2 ranks x 1 thread, ep = 1)
# and, as the machine's own ceiling, two independent 1-thread processes that
# each train half the batch with no communication at all.
# Prints tokens/s (median of the logged steps after the first 5), where rank 0's
# step time goes (median ms: forward+backward, gradient sync, optimizer), peak
# resident memory per rank, the routing balance (median of the worst layer's
# expert load max/mean) and the dispatch share of a step: bench_dispatch's
# forward+backward dispatch+combine time for the same tokens, times the number
# of MoE layers, over the measured step time. WARM = 0 measures from
# initialisation, collapse included.
#   bench/scaling.sh DATA_DIR(vocab 4096) [STEPS=30] [WARM=100]
# Across hosts (the test cluster's network namespaces; bench/scaling_hosts.sh):
#   bench/scaling.sh --hosts DATA_DIR [STEPS=20]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = "--hosts" ]; then
  shift
  exec "$root/bench/scaling_hosts.sh" "$@"
fi
bin=${MOELAB_BUILD_DIR:-$root/build}/bin
data=$(cd "${1:?usage: scaling.sh DATA_DIR [STEPS] [WARM]}" && pwd)
steps=${2:-30}
warm=${3:-100}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '[moe]\nenabled = true\n' >"$work/moe.toml"
root_flag=()
[ "$(id -u)" -ne 0 ] || root_flag=(--allow-run-as-root)
common=(--set data.dir="$data" --set eval.interval=0 --set eval.max_windows=1
  --set log.interval=1 --set log.progress=off)

launch() {  # ranks threads command...: each rank bound to its own `threads` cores
  local ranks=$1 threads=$2
  shift 2
  OMP_NUM_THREADS=$threads mpirun -np "$ranks" --map-by "slot:PE=$threads" --bind-to core \
    --mca btl self,vader "${root_flag[@]}" -x OMP_NUM_THREADS "$@"
}

train() {  # out ranks threads settings...: trains STEPS steps after the warm start
  local out=$1 ranks=$2 threads=$3
  shift 3
  launch "$ranks" "$threads" "$bin/moelab" train "$work/moe.toml" --out "$out" "${common[@]}" \
    --set train.max_steps=$((warm + steps)) --set checkpoint.interval=0 \
    --set train.threads="$threads" "${start[@]}" "$@" >"$out.log" 2>&1 ||
    { cat "$out.log" >&2; exit 1; }
}

summary() {  # metrics.jsonl...: tokens/s (summed over runs), then rank 0's medians
  python3 - "$@" <<'EOF_PY'
import json, statistics, sys
tps, fb, sync, opt, load = 0, [], [], [], []
for path in sys.argv[1:]:
    rows = [json.loads(l) for l in open(path)][5:]
    tps += statistics.median(r["tokens_per_s"] for r in rows)
    fb += [r["time_ms"]["forward_backward"] for r in rows]
    sync += [r["time_ms"]["grad_sync"] for r in rows]
    opt += [r["time_ms"]["optimizer"] for r in rows]
    load += [max(r["moe"]["expert_load_max_over_mean"]) for r in rows]
m = statistics.median
print(f"{tps:.0f} {m(fb):.0f}/{m(sync):.0f}/{m(opt):.0f} {m(load):.2f}")
EOF_PY
}

scaling() { awk -v t="$1" -v b="$base_tps" 'BEGIN { printf "%.2fx", t / b }'; }

step_ms() { awk -v t="$1" 'BEGIN { printf "%.0f", 16 * 256 / t * 1000 }'; }  # from tokens/s

peak() { python3 -c "import json,sys; print(' '.join('%.0f' % m for m in json.load(open(sys.argv[1]))['peak_resident_mib']))" "$1"; }

dispatch_ms() {  # ranks ep threads: forward+backward dispatch+combine per MoE layer
  launch "$1" "$3" "$bin/bench_dispatch" --ep "$2" | awk '/forward\+backward/ { print $(NF-1) }'
}

# How each measured run starts: from the warm checkpoint, or from initialisation
# at the full learning rate (warmup 1, the case where routing collapses).
start=(--set optim.warmup_steps=1)
if [ "$warm" -gt 0 ]; then
  echo "warm start: $warm steps at 1 rank x 2 threads"
  start=(--set checkpoint.resume="$work/warm/checkpoints/step_$(printf '%08d' "$warm")")
  OMP_NUM_THREADS=2 "$bin/moelab" train "$work/moe.toml" --out "$work/warm" "${common[@]}" \
    --set train.max_steps="$warm" --set optim.warmup_steps=$((warm / 2)) \
    --set train.threads=2 >"$work/warm.log" 2>&1 || { cat "$work/warm.log" >&2; exit 1; }
fi

printf '%-34s %9s %7s %8s %16s %18s %9s %9s\n' layout tokens/s "vs 1x1" step_ms \
  "fwd+bwd/sync/opt" "peak MiB per rank" "load max" dispatch
# The 1 rank x 1 thread run comes first: it is what the scaling column divides by.
for layout in "1 1 1" "1 1 2" "2 2 1" "2 1 1"; do
  read -r ranks ep threads <<<"$layout"
  run="$work/r${ranks}ep${ep}t${threads}"
  train "$run" "$ranks" "$threads" --set parallel.ep="$ep"
  read -r tps phases load <<<"$(summary "$run/metrics.jsonl")"
  step=$(step_ms "$tps")
  share=$(awk -v d="$(dispatch_ms "$ranks" "$ep" "$threads")" -v s="$step" \
    'BEGIN { printf "%.1f%%", 100 * 4 * d / s }')
  [ "$layout" != "1 1 1" ] || base_tps=$tps
  printf '%-34s %9.0f %7s %8s %16s %18s %9s %9s\n' "ranks $ranks ep $ep threads $threads" "$tps" \
    "$(scaling "$tps")" "$step" "$phases" "$(peak "$run/DONE")" "$load" "$share"
done

# Ceiling: two processes on their own cores, half the batch each, no communication.
for core in 0 1; do
  OMP_NUM_THREADS=1 taskset -c "$core" "$bin/moelab" train "$work/moe.toml" \
    --out "$work/alone$core" "${common[@]}" --set train.max_steps=$((warm + steps)) \
    --set checkpoint.interval=0 --set train.threads=1 --set train.batch_seqs=8 \
    "${start[@]}" >"$work/alone$core.log" 2>&1 &
done
wait
read -r tps phases load <<<"$(summary "$work/alone0/metrics.jsonl" "$work/alone1/metrics.jsonl")"
printf '%-34s %9.0f %7s %8s %16s %18s %9s %9s\n' "2 independent processes, no comm" "$tps" \
  "$(scaling "$tps")" "$(step_ms "$tps")" "$phases" \
  "$(peak "$work/alone0/DONE") $(peak "$work/alone1/DONE")" "$load" "-"
