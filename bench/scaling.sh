#!/usr/bin/env bash
# Expert-parallel scaling of the reference MoE (issue 5): d 256, 4 layers,
# 4 experts of width 512, top-2, seq 256, batch 16, bf16 (the defaults of
# `moelab config defaults` with moe.enabled = true), trained for STEPS steps at
#   (1 rank x 2 threads), (2 ranks x 1 thread, ep = 2), (2 ranks x 1 thread, ep = 1)
# and, for scaling at equal threads per rank, (1 rank x 1 thread).
# Prints tokens/s (median of the logged steps after the first 5), peak resident
# memory per rank, and the dispatch share of a step: bench_dispatch's
# forward+backward dispatch+combine time for the same tokens, times the number
# of MoE layers, over the measured step time.
#   bench/scaling.sh DATA_DIR(vocab 4096) [STEPS=30]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${MOELAB_BUILD_DIR:-$root/build}/bin
data=$(cd "${1:?usage: scaling.sh DATA_DIR [STEPS]}" && pwd)
steps=${2:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '[moe]\nenabled = true\n' > "$work/moe.toml"
root_flag=()
[ "$(id -u)" -ne 0 ] || root_flag=(--allow-run-as-root)

median_tokens_per_s() {  # metrics.jsonl
  python3 - "$1" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(statistics.median(r["tokens_per_s"] for r in rows[5:]))
EOF
}

launch() {  # ranks threads command...: each rank bound to its own `threads` cores
  local ranks=$1 threads=$2
  shift 2
  OMP_NUM_THREADS=$threads mpirun -np "$ranks" --map-by "slot:PE=$threads" --bind-to core \
    --mca btl self,vader "${root_flag[@]}" -x OMP_NUM_THREADS "$@"
}

dispatch_ms() {  # ranks ep threads: forward+backward dispatch+combine per MoE layer
  launch "$1" "$3" "$bin/bench_dispatch" --ep "$2" \
    --iterations 20 | awk '/forward\+backward/ { print $(NF-1) }'
}

printf '%-26s %10s %10s %22s %10s\n' layout tokens/s step_ms "peak MiB per rank" dispatch
for layout in "1 1 2" "1 1 1" "2 2 1" "2 1 1"; do
  read -r ranks ep threads <<<"$layout"
  run="$work/r${ranks}ep${ep}t${threads}"
  launch "$ranks" "$threads" "$bin/moelab" train \
    "$work/moe.toml" --out "$run" --set data.dir="$data" --set train.max_steps="$steps" \
    --set optim.warmup_steps=1 --set eval.interval=0 --set eval.max_windows=1 \
    --set checkpoint.interval=0 --set log.interval=1 --set log.progress=off \
    --set parallel.ep="$ep" --set train.threads="$threads" >"$run.log" 2>&1 ||
    { cat "$run.log" >&2; exit 1; }
  tps=$(median_tokens_per_s "$run/metrics.jsonl")
  step_ms=$(awk -v t="$tps" 'BEGIN { printf "%.0f", 16 * 256 / t * 1000 }')
  peak=$(python3 -c "import json,sys; print(' '.join('%.0f' % m for m in json.load(open(sys.argv[1]))['peak_resident_mib']))" "$run/DONE")
  share=$(awk -v d="$(dispatch_ms "$ranks" "$ep" "$threads")" -v s="$step_ms" \
    'BEGIN { printf "%.1f%%", 100 * 4 * d / s }')
  printf '%-26s %10.0f %10s %22s %10s\n' "ranks $ranks ep $ep threads $threads" "$tps" \
    "$step_ms" "$peak" "$share"
done
