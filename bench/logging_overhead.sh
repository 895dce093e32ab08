#!/usr/bin/env bash
# What rank 0's TensorBoard event files cost a training run: configs/moe-small.toml
# on the demo corpus (data/fortunes, prepared by launch/demo.sh) with a metrics
# line at every step (log.interval = 1, the most logging a run can ask for),
# trained alternately with log.tensorboard = true and false, `rounds` times
# each, in one session. A run's speed is its tokens between its first and last
# metrics lines over the wall time between them (`elapsed_s`), so start-up is
# left out and the logging itself is counted (a line's own tokens_per_s times
# its phases only). Prints each pair and the median ratio on/off, then what
# one write costs (bench_logging) as a share of the run's step.
#
# Usage: bench/logging_overhead.sh [steps=60] [rounds=5] [threads=2]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
steps=${1:-60}
rounds=${2:-5}
threads=${3:-2}
moelab=$(bench_binary moelab)
python=$root/.venv/bin/python
data=$root/data/fortunes
[ -f "$data/train/manifest.json" ] ||
  { echo "logging_overhead.sh: no $data (launch/demo.sh prepares it)" >&2; exit 2; }
out=$(mktemp -d /var/tmp/logging_overhead.XXXXXX)
trap 'rm -rf "$out"' EXIT

# Trains into $1 with log.tensorboard = $2; prints its tokens/s.
run_tokens_per_s() {
  "$moelab" train "$root/configs/moe-small.toml" --out "$1" --set data.dir="\"$data\"" \
    --set train.max_steps="$steps" --set train.threads="$threads" --set log.interval=1 \
    --set log.progress='"off"' --set eval.interval=0 --set eval.max_windows=1 \
    --set optim.warmup_steps=2 --set log.tensorboard="$2" >"$1.log" 2>&1 || { cat "$1.log" >&2; exit 1; }
  "$python" -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
first, last = lines[0], lines[-1]
print((last["tokens"] - first["tokens"]) / (last["elapsed_s"] - first["elapsed_s"]))
' "$1/metrics.jsonl"
}

echo "CPU: $(bench_cpu_model), $threads threads, $steps steps, moe-small"
printf '%-6s %14s %14s %8s\n' round "tb on tok/s" "tb off tok/s" "on/off"
ratios=()
for ((r = 1; r <= rounds; r++)); do
  # Which arm goes first alternates, so a drift of the machine favours neither.
  if ((r % 2)); then
    on=$(run_tokens_per_s "$out/on$r" true)
    off=$(run_tokens_per_s "$out/off$r" false)
  else
    off=$(run_tokens_per_s "$out/off$r" false)
    on=$(run_tokens_per_s "$out/on$r" true)
  fi
  ratio=$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.4f", a / b }')
  ratios+=("$ratio")
  printf '%-6s %14.0f %14.0f %8s\n' "$r" "$on" "$off" "$ratio"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { printf "median on/off: %s\n", v[int((NR + 1) / 2)] }'
# Whole runs on a shared machine vary by more than the logging costs; the cost
# of the writes themselves, against the same run's step time:
bench_logging=$(bench_binary bench_logging)
"$bench_logging" "$out/on1"
