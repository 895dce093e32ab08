#!/usr/bin/env bash
# What a checkpoint costs, synchronous against checkpoint.async, at 1, 2 and 4
# ranks, on a dense model whose state passes 250 MB (d 512, 8 layers, d_ff 2048:
# 27M parameters, 324 MB of fp32 weights and AdamW moments), ZeRO-1 and not:
#  - pause: how long training stopped at the step-3 checkpoint: the gap between
#    steps 3 and 4 less the median gap of the other steps (metrics.jsonl's
#    elapsed_s), so it reads the same for any build;
#  - written: from the checkpoint's start until it was sealed (the log's
#    "checkpoint saved: step 3 (X s after it began)"; "-" for a build that does
#    not say);
#  - peak MiB: each rank's peak resident memory over the run (DONE), which
#    includes both checkpoints (steps 3 and 6): where one rank gathered the
#    state to write it, that rank's stands out.
# With BASELINE (another build's moelab, e.g. main's), its synchronous runs are
# measured the same way first, as "before".
#
# Usage: bench/checkpoint.sh [BASELINE]
#   RANKS="1 2 4" SHARDS="true false" DIMS="512 8 2048" STEPS=6 DATA=data/fortunes (environment)
# Needs the demo corpus (launch/demo.sh). Checkpoints go to /var/tmp (a disk).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
moelab=$(bench_binary moelab)
baseline=${1:-}
python=$root/.venv/bin/python
data=${DATA:-$root/data/fortunes}
read -r d_model layers d_ff <<<"${DIMS:-512 8 2048}"
steps=${STEPS:-6}
[ -z "$baseline" ] || [ -x "$baseline" ] || { echo "checkpoint.sh: $baseline is not executable" >&2; exit 2; }
[ -f "$data/train/manifest.json" ] ||
  { echo "checkpoint.sh: no $data (launch/demo.sh prepares it)" >&2; exit 2; }
out=$(mktemp -d /var/tmp/checkpoint_bench.XXXXXX)
trap 'rm -rf "$out"' EXIT
root_flag=()
[[ $(id -u) == 0 ]] && root_flag=(--allow-run-as-root)

measure() {  # RUN LOG: pause s, written s, peak MiB per rank
  "$python" - "$1" "$2" <<'PY'
import json, re, statistics, sys
run, log = sys.argv[1], open(sys.argv[2]).read()
t = [json.loads(l)["elapsed_s"] for l in open(run + "/metrics.jsonl")]
gaps = [b - a for a, b in zip(t, t[1:])]
usual = statistics.median(gaps[:2] + gaps[3:]) if len(gaps) > 3 else gaps[0]
written = re.search(r"checkpoint saved: step 3 \(([0-9.]+) s after it began\)", log)
peaks = json.load(open(run + "/DONE"))["peak_resident_mib"]
print("%.2f %s %s" % (gaps[2] - usual, written.group(1) if written else "-",
                      "/".join("%.0f" % p for p in peaks)))
PY
}

run() {  # BINARY NAME RANKS SHARD ASYNC
  local binary=$1 name=$2 ranks=$3 shard=$4 async=$5 async_set=()
  [[ $async == - ]] || async_set=(--set checkpoint.async="$async")
  mpirun -np "$ranks" --oversubscribe "${root_flag[@]}" -x OMP_NUM_THREADS=1 \
    "$binary" train "$root/configs/dense-small.toml" --out "$out/$name" --set data.dir="\"$data\"" \
    --set model.d_model="$d_model" --set model.n_layers="$layers" --set model.n_heads=8 \
    --set model.d_ff="$d_ff" --set model.seq_len=64 --set train.batch_seqs=8 \
    --set train.precision='"fp32"' --set train.max_steps="$steps" --set optim.warmup_steps=1 \
    --set train.threads=1 --set log.interval=1 --set log.progress='"off"' --set eval.interval=0 \
    --set eval.max_windows=1 --set log.tensorboard=false --set checkpoint.interval=3 \
    --set checkpoint.keep=2 --set parallel.shard_optimizer="$shard" "${async_set[@]}" \
    >"$out/$name.log" 2>&1 || { cat "$out/$name.log" >&2; exit 1; }
  printf '%-8s %-6s %-10s %-6s %9s %10s  %s\n' "$([ "$binary" = "$moelab" ] && echo after || echo before)" \
    "$ranks" "$([ "$shard" = true ] && echo zero1 || echo replicated)" \
    "$([ "$async" = true ] && echo async || echo sync)" $(measure "$out/$name" "$out/$name.log")
  rm -rf "${out:?}/$name"
}

echo "CPU: $(bench_cpu_model); dense d$d_model x $layers layers, d_ff $d_ff," \
  "fp32, $steps steps, checkpoints at steps 3 and $steps, 1 thread a rank, to /var/tmp"
printf '%-8s %-6s %-10s %-6s %9s %10s  %s\n' build ranks optimizer mode "pause s" "written s" \
  "peak MiB per rank"
for ranks in ${RANKS:-1 2 4}; do
  for shard in ${SHARDS:-true false}; do
    [ -z "$baseline" ] || run "$baseline" "before-$ranks-$shard" "$ranks" "$shard" -
    for async in false true; do run "$moelab" "after-$ranks-$shard-$async" "$ranks" "$shard" "$async"; done
  done
done
