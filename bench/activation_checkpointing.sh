#!/usr/bin/env bash
# What train.activation_checkpointing trades: peak resident memory (DONE's
# peak_resident_mib, the whole process) against tokens/s (median over the
# steps' metrics lines), for "none", "moe" and "full", in one session, on
# configs/moe-small.toml's shape and on a deeper, wider-batch one (16 layers,
# batch 64) where activations dominate. Needs the demo corpus (launch/demo.sh).
#
# Usage: bench/activation_checkpointing.sh [steps=12] [threads=2]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
steps=${1:-12}
threads=${2:-2}
moelab=$(bench_binary moelab)
python=$root/.venv/bin/python
data=$root/data/fortunes
[ -f "$data/train/manifest.json" ] ||
  { echo "activation_checkpointing.sh: no $data (launch/demo.sh prepares it)" >&2; exit 2; }
out=$(mktemp -d /var/tmp/activation_checkpointing.XXXXXX)
trap 'rm -rf "$out"' EXIT

summary() {  # run folder -> "tokens/s peak_MiB"
  "$python" -c '
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")][1:]  # the first step warms up
done = json.load(open(sys.argv[1] + "/DONE"))
tps = statistics.median(l["tokens_per_s"] for l in lines)
print("%.0f %.0f" % (tps, done["peak_resident_mib"][0]))
' "$1"
}

echo "CPU: $(bench_cpu_model), $threads threads, $steps steps"
printf '%-32s %-6s %10s %10s\n' shape mode "tok/s" "peak MiB"
for shape in "moe-small (4 layers, batch 16)|" \
  "deep (16 layers, batch 64)|--set model.n_layers=16 --set train.batch_seqs=64"; do
  name=${shape%%|*}
  read -r -a sets <<<"${shape#*|}"
  for mode in none moe full; do
    run=$out/$mode-$RANDOM
    "$moelab" train "$root/configs/moe-small.toml" --out "$run" --set data.dir="\"$data\"" \
      --set train.max_steps="$steps" --set train.threads="$threads" --set log.interval=1 \
      --set log.progress='"off"' --set eval.interval=0 --set eval.max_windows=1 \
      --set optim.warmup_steps=2 --set log.tensorboard=false --set train.activation_checkpointing="\"$mode\"" \
      "${sets[@]}" >"$run.log" 2>&1 || { cat "$run.log" >&2; exit 1; }
    read -r tps peak <<<"$(summary "$run")"
    printf '%-32s %-6s %10s %10s\n' "$name" "$mode" "$tps" "$peak"
  done
done
