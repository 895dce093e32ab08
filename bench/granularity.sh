#!/usr/bin/env bash
# Fine-grained experts at equal active FLOPs, in one run: 4 experts top-2 of
# width 512 against 64 experts top-8 of width 128 (the same 1024 active hidden
# units per token), on bench_model's reference shape (d 256, 4 layers, vocab
# 4096, seq 256, batch 16), whole training steps, in fp32 and in the auto
# precision. Prints tokens/s and the fine-grained / coarse ratio.
#
# Usage: bench/granularity.sh [steps=8] [threads=2] [bench_model options...]
#   e.g. bench/granularity.sh 10 1 --device cuda --batch 128
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-8}
threads=${2:-2}
shift $(( $# < 2 ? $# : 2 ))
extra=("$@")
bench=${MOELAB_BUILD_DIR:-$root/build}/bin/bench_model
[ -x "$bench" ] || { echo "granularity.sh: $bench not found (launch/build.sh builds it)" >&2; exit 2; }

tokens_per_s() { sed -n 's/.* \([0-9][0-9]*\) tok\/s.*/\1/p' | head -n 1; }

if [[ " ${extra[*]} " == *" cuda "* ]]; then
  echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
else
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); bf16 flags: $(grep -o -w -E 'amx_bf16|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
fi
printf '%-10s %14s %14s %7s\n' precision "4x512 top-2" "64x128 top-8" ratio
for precision in fp32 auto; do
  coarse=$("$bench" --steps "$steps" --threads "$threads" --experts 4 --top-k 2 --ffn 512 \
    --precision "$precision" "${extra[@]}" | tokens_per_s)
  fine=$("$bench" --steps "$steps" --threads "$threads" --experts 64 --top-k 8 --ffn 128 \
    --precision "$precision" "${extra[@]}" | tokens_per_s)
  printf '%-10s %14s %14s %7s\n' "$precision" "$coarse" "$fine" \
    "$(awk -v a="$fine" -v b="$coarse" 'BEGIN { printf "%.2fx", a / b }')"
done
