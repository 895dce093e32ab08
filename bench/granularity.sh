#!/usr/bin/env bash
# Fine-grained experts at equal active FLOPs, in one run, whole training steps,
# in fp32 and in the auto precision, at two shapes:
#   reference: bench_model's (d 256, 4 layers, vocab 4096, seq 256, batch 16),
#              4 experts top-2 of width 512 against 64 top-8 of width 128;
#   small:     configs/moe-small.toml's (d 128, 4 layers, vocab 1024, seq 128,
#              batch 16), 4 x 256 top-2 against 64 x 64 top-8.
# Each pair has the same active hidden units per token. Prints tokens/s and the
# fine-grained / coarse ratio.
#
# Usage: bench/granularity.sh [steps=8] [threads=2] [bench_model options...]
#   e.g. bench/granularity.sh 10 1 --device cuda --batch 128
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_args "$@"
bench=$(bench_binary bench_model)
bench_machine_header "${extra[@]}"
# One row: a shape's name, its bench_model model options, coarse width, fine width.
shapes=(
  "reference||512|128"
  "small|--d-model 128 --vocab 1024 --seq 128|256|64"
)
printf '%-10s %-10s %14s %14s %7s\n' shape precision coarse fine ratio
for row in "${shapes[@]}"; do
  IFS='|' read -r name model coarse_ffn fine_ffn <<<"$row"
  read -r -a model <<<"$model"
  for precision in fp32 auto; do
    coarse=$("$bench" --steps "$steps" --threads "$threads" --experts 4 --top-k 2 --ffn "$coarse_ffn" \
      --precision "$precision" "${model[@]}" "${extra[@]}" | tokens_per_s)
    fine=$("$bench" --steps "$steps" --threads "$threads" --experts 64 --top-k 8 --ffn "$fine_ffn" \
      --precision "$precision" "${model[@]}" "${extra[@]}" | tokens_per_s)
    printf '%-10s %-10s %14s %14s %7s\n' "$name" "$precision" "4x$coarse_ffn $coarse" \
      "64x$fine_ffn $fine" "$(awk -v a="$fine" -v b="$coarse" 'BEGIN { printf "%.2fx", a / b }')"
  done
done
