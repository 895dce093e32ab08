#!/usr/bin/env bash
# Multi-head latent attention against grouped-query and full multi-head
# attention of (nearly) the same parameters, whole training steps of
# bench_model's MoE (d 256, 4 layers, 4 heads of 64, 4 experts of width 512
# top-2, vocab 4096, seq 256, batch 16), in fp32 and in the auto precision.
# Each row runs in its own process; its peak memory is the GPU allocator's peak
# on CUDA, the resident set's on a CPU, from just before the model is built.
#   mha: 4 key/value heads;  gqa: 1 key/value head;
#   mla: q_lora_rank 0 (as DeepSeek-V2-Lite), kv_lora_rank 32, no-RoPE and RoPE
#        query/key widths 32 + 32, value width 64.
# Prints tokens/s, the ratio to gqa's in the same precision, and peak memory.
#
# Usage: bench/attention.sh [steps=8] [threads=2] [bench_model options...]
#   e.g. bench/attention.sh 10 1 --device cuda --batch 128
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_args "$@"
bench=$(bench_binary bench_model)

bench_machine_header "${extra[@]}"
# One row: a name and its config overrides.
variants=(
  "gqa|--set model.n_kv_heads=1"
  "mha|--set model.n_kv_heads=4"
  "mla|--set model.attention=mla --set model.kv_lora_rank=32 --set model.qk_nope_head_dim=32 --set model.qk_rope_head_dim=32 --set model.v_head_dim=64"
)
printf '%-5s %-10s %10s %12s %9s %10s\n' attention precision params tok/s 'vs gqa' 'peak MiB'
for precision in fp32 auto; do
  gqa_tps=""
  for row in "${variants[@]}"; do
    IFS='|' read -r name sets <<<"$row"
    read -r -a sets <<<"$sets"
    out=$("$bench" --steps "$steps" --threads "$threads" --experts 4 --top-k 2 --ffn 512 \
      --precision "$precision" "${sets[@]}" "${extra[@]}")
    tps=$(tokens_per_s <<<"$out")
    params=$(sed -n 's/.* \([0-9.]*M\) params.*/\1/p' <<<"$out" | head -n 1)
    peak=$(sed -n 's/.* peak \([0-9]*\) MiB).*/\1/p' <<<"$out" | head -n 1)
    [ -n "$gqa_tps" ] || gqa_tps=$tps
    printf '%-5s %-10s %10s %12s %9s %10s\n' "$name" "$precision" "$params" "$tps" \
      "$(awk -v a="$tps" -v b="$gqa_tps" 'BEGIN { printf "%.2f", a / b }')" "$peak"
  done
done
