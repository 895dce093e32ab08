#!/usr/bin/env bash
# What parallel.shard_optimizer (ZeRO-1) saves: AdamW's state on rank 0 (the
# log's "AdamW state" line: two fp32 moments per parameter it steps), rank 0's
# peak resident memory while training (the largest peak_mib of its logged
# phases), the peak over the whole run (DONE's peak_resident_mib, which
# includes saving the final checkpoint) of rank 0, which writes it and so
# gathers the whole optimizer state, and the largest of the other ranks', which
# do not (sharded, they never hold more than their slices), and rank 0's mean
# grad_sync time after the first step (all-reduce unsharded, reduce-scatter
# sharded), at 1, 2 and 4 ranks, sharded and not, on a dense model whose optimizer state dominates
# (d 512, 8 layers, d_ff 2048: 27M parameters, 208 MiB of moments unsharded;
# short sequences and a small batch keep activations small). Needs the demo
# corpus (launch/demo.sh).
#
# Usage: bench/optimizer_memory.sh [steps=3]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
steps=${1:-3}
moelab=$(bench_binary moelab)
python=$root/.venv/bin/python
data=$root/data/fortunes
[ -f "$data/train/manifest.json" ] ||
  { echo "optimizer_memory.sh: no $data (launch/demo.sh prepares it)" >&2; exit 2; }
out=$(mktemp -d /var/tmp/optimizer_memory.XXXXXX)
trap 'rm -rf "$out"' EXIT
root_flag=()
[[ $(id -u) == 0 ]] && root_flag=(--allow-run-as-root)

echo "CPU: $(bench_cpu_model); dense d512 x 8 layers, fp32, $steps steps, 1 thread a rank"
printf '%-6s %-10s %16s %18s %16s %16s %14s\n' ranks optimizer "AdamW MiB rank 0" "train peak rank 0" \
  "run peak rank 0" "run peak others" "grad_sync ms"
for ranks in 1 2 4; do
  for shard in false true; do
    run=$out/r$ranks-$shard
    mpirun -np "$ranks" --oversubscribe "${root_flag[@]}" -x OMP_NUM_THREADS=1 \
      "$moelab" train "$root/configs/dense-small.toml" --out "$run" --set data.dir="\"$data\"" \
      --set model.d_model=512 --set model.n_layers=8 --set model.n_heads=8 --set model.d_ff=2048 \
      --set model.seq_len=64 --set train.batch_seqs=8 --set train.precision='"fp32"' \
      --set train.max_steps="$steps" --set optim.warmup_steps=1 --set train.threads=1 --set log.interval=1 \
      --set log.progress='"off"' --set eval.interval=0 --set eval.max_windows=1 \
      --set checkpoint.interval=0 --set log.tensorboard=false \
      --set parallel.shard_optimizer="$shard" >"$run.log" 2>&1 || { cat "$run.log" >&2; exit 1; }
    state=$(sed -n 's/.*AdamW state: \([0-9.]*\) MiB.*/\1/p' "$run.log" | head -n 1)
    read -r train_peak run_peak others_peak sync_ms <<<"$("$python" -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
train = max(v for l in lines for v in l["peak_mib"].values())
run = json.load(open(sys.argv[1] + "/DONE"))["peak_resident_mib"]
others = "%.0f" % max(run[1:]) if len(run) > 1 else "-"
sync = [l["time_ms"]["grad_sync"] for l in lines[1:]]
print("%.0f %.0f %s %.1f" % (train, run[0], others, sum(sync) / len(sync)))' "$run")"
    printf '%-6s %-10s %16s %18s %16s %16s %14s\n' "$ranks" "$([ "$shard" = true ] && echo sharded || echo replicated)" \
      "$state" "$train_peak" "$run_peak" "$others_peak" "$sync_ms"
  done
done
