#!/usr/bin/env bash
# Fine-grained experts at equal active FLOPs, in one run, whole training steps,
# in fp32 and in the auto precision, at two shapes:
#   reference: bench_model's (d 256, 4 layers, vocab 4096, seq 256, batch 16),
#              4 experts top-2 of width 512 against 64 top-8 of width 128;
#   small:     configs/moe-small.toml's (d 128, 4 layers, vocab 1024, seq 128,
#              batch 16), 4 x 256 top-2 against 64 x 64 top-8.
# Each pair has the same active hidden units per token. Both models of a pair
# are built in one process and take their timed steps in turn (bench_model
# --in-turn-with), so that a CPU whose runs move by 15 % from one to the next
# slows both alike. Prints each one's tokens/s and the fine-grained / coarse
# ratio: the median of the rounds' ratios (a round: one step of each), their
# range, and the ratio of the total times.
#
# Usage: bench/granularity.sh [steps=24] [threads=2] [bench_model options...]
#   e.g. bench/granularity.sh 10 1 --device cuda --batch 128
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_args "${1:-24}" "${@:2}"
bench=$(bench_binary bench_model)
bench_machine_header "${extra[@]}"
# One row: a shape's name, its bench_model model options, coarse width, fine width.
shapes=(
  "reference||512|128"
  "small|--d-model 128 --vocab 1024 --seq 128|256|64"
)
# One bench_model run: the pair's steps in turn, in one precision; prints its
# two rows' tokens/s and the "in turn" line.
in_turn() {  # precision
  "$bench" --steps "$steps" --threads "$threads" --experts 4 --top-k 2 --ffn "$coarse_ffn" \
    --in-turn-with "64:8:$fine_ffn" --precision "$1" "${model[@]}" "${extra[@]}"
}
printf '%-10s %-10s %14s %14s %7s  %s\n' shape precision coarse fine ratio "range ($steps rounds), totals"
for row in "${shapes[@]}"; do
  IFS='|' read -r name model coarse_ffn fine_ffn <<<"$row"
  read -r -a model <<<"$model"
  for precision in fp32 auto; do
    out=$(in_turn "$precision")
    mapfile -t rates < <(each_tokens_per_s <<<"$out")
    turn=$(grep '^in turn:' <<<"$out")
    ratio=$(sed -n 's/.* tok\/s \([0-9.]*\) (median.*/\1/p' <<<"$turn")
    range=$(sed -n 's/.*range \([0-9.-]*\); totals \([0-9.]*\)).*/\1, \2/p' <<<"$turn")
    printf '%-10s %-10s %14s %14s %7s  %s\n' "$name" "$precision" "4x$coarse_ffn ${rates[0]}" \
      "64x$fine_ffn ${rates[1]}" "${ratio}x" "$range"
  done
done
