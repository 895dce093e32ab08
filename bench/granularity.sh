#!/usr/bin/env bash
# Fine-grained experts at equal active FLOPs, in one run, whole training steps,
# in fp32 and in the auto precision, at two shapes:
#   reference: bench_model's (d 256, 4 layers, vocab 4096, seq 256, batch 16),
#              4 experts top-2 of width 512 against 64 top-8 of width 128;
#   small:     configs/moe-small.toml's (d 128, 4 layers, vocab 1024, seq 128,
#              batch 16), 4 x 256 top-2 against 64 x 64 top-8.
# Each pair has the same active hidden units per token. Prints tokens/s and the
# fine-grained / coarse ratio. GRANULARITY_ROUNDS=N (default 1) runs each pair N
# times, coarse first in odd rounds and fine first in even ones, and prints the
# median tokens/s of each and the median of the rounds' ratios with their range:
# a CPU whose runs move by 15 % from one to the next needs several.
#
# Usage: [GRANULARITY_ROUNDS=N] bench/granularity.sh [steps=8] [threads=2] [bench_model options...]
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
rounds=${GRANULARITY_ROUNDS:-1}
# One model's tokens/s: experts, top-k, width, then the shape's options.
tokens() {
  "$bench" --steps "$steps" --threads "$threads" --experts "$1" --top-k "$2" --ffn "$3" \
    --precision "$precision" "${model[@]}" "${extra[@]}" | tokens_per_s
}
printf '%-10s %-10s %14s %14s %7s  %s\n' shape precision coarse fine ratio "range ($rounds rounds)"
for row in "${shapes[@]}"; do
  IFS='|' read -r name model coarse_ffn fine_ffn <<<"$row"
  read -r -a model <<<"$model"
  for precision in fp32 auto; do
    coarse=() fine=() ratios=()
    for ((round = 1; round <= rounds; round++)); do
      if ((round % 2)); then
        c=$(tokens 4 2 "$coarse_ffn") f=$(tokens 64 8 "$fine_ffn")
      else
        f=$(tokens 64 8 "$fine_ffn") c=$(tokens 4 2 "$coarse_ffn")
      fi
      coarse+=("$c") fine+=("$f")
      ratios+=("$(awk -v a="$f" -v b="$c" 'BEGIN { print a / b }')")
    done
    low=$(printf '%s\n' "${ratios[@]}" | sort -g | head -n 1)
    high=$(printf '%s\n' "${ratios[@]}" | sort -g | tail -n 1)
    printf '%-10s %-10s %14s %14s %7s  %s\n' "$name" "$precision" \
      "4x$coarse_ffn $(bench_median "${coarse[@]}")" "64x$fine_ffn $(bench_median "${fine[@]}")" \
      "$(awk -v r="$(bench_median "${ratios[@]}")" 'BEGIN { printf "%.2fx", r }')" \
      "$(awk -v a="$low" -v b="$high" 'BEGIN { printf "%.2f-%.2f", a, b }')"
  done
done
