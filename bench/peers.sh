#!/usr/bin/env bash
# moelab against the plain PyTorch peer (../shared/peers/torch_moe_peer.py), side by
# side in one run: the same torch build (the project's .venv, whose LibTorch moelab
# links), the same threads and the same shapes (d 256, 4 layers, vocab 4096, seq 256,
# batch 16, untied head; dense d_ff 1024, MoE 4 x 512 top-2, fine-grained MoE
# 64 x 64 top-8), in fp32 and in moelab's auto precision (where it resolves to bf16, the
# peer runs under bf16 autocast; else fp32 for both). Both time
# whole training steps: forward, loss, backward, AdamW.
#
# On a GPU (--device cuda) the precisions are fp32 and bf16 (the peer under bf16
# autocast), and --batch sets the sequences per step for both.
#
# Usage: bench/peers.sh [--device cpu|cuda] [--batch N] [steps=8] [threads=2]
#        PEERS_COMPILE=0 skips the compiled peer.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
device=cpu
batch=16
while [[ ${1:-} == --* ]]; do
  case $1 in
    --device) device=$2 ;;
    --batch) batch=$2 ;;
    *) echo "peers.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
bench_args "$@"
bench=$(bench_binary bench_model)
python=${MOELAB_PYTHON:-$root/.venv/bin/python}
peer=${MOELAB_PEER:-$root/../shared/peers/torch_moe_peer.py}
for f in "$python" "$peer"; do
  [ -e "$f" ] || { echo "peers.sh: $f not found (MOELAB_PYTHON and MOELAB_PEER name them)" >&2; exit 2; }
done
export OMP_NUM_THREADS=$threads

peer_tokens_per_s() { sed -n 's/.*tokens\/s=\([0-9][0-9]*\).*/\1/p' | head -n 1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }

common=(--threads "$threads" --device "$device" --batch "$batch")
header=$("$bench" --steps 1 "${common[@]}" --experts 0 --ffn 64 --precision fp32 | head -n 2)
echo "$header"
bench_cpu
[ "$device" = cuda ] && echo "$(bench_gpu); batch $batch"
auto_bf16=0
grep -q "precision auto -> bf16" <<<"$header" && auto_bf16=1
precisions=(fp32 auto)
[ "$device" = cuda ] && precisions=(fp32 bf16)

gemm_path() { sed -n "s/.*experts' GEMMs: \([a-z_0-9]*\).*/\1/p" | head -n 1; }
printf '\n%-22s %-9s %10s %10s %7s %12s %7s  %s\n' shape precision moelab peer ratio peer-compile ratio \
  "experts' GEMMs"
for shape in "dense:0:2:1024" "moe:4:2:512" "fine-grained:64:8:64"; do
  IFS=: read -r name experts topk ffn <<<"$shape"
  for precision in "${precisions[@]}"; do
    peer_flags=(--experts "$experts" --topk "$topk" --ffn "$ffn" --threads "$threads" --steps "$steps"
      --device "$device" --batch "$batch")
    { [ "$precision" = bf16 ] || { [ "$precision" = auto ] && [ "$auto_bf16" = 1 ]; }; } && peer_flags+=(--bf16)
    run=$("$bench" --steps "$steps" "${common[@]}" --experts "$experts" --top-k "$topk" \
      --ffn "$ffn" --precision "$precision")
    ours=$(tokens_per_s <<<"$run")
    path=$(gemm_path <<<"$run")
    eager=$("$python" "$peer" "${peer_flags[@]}" | peer_tokens_per_s)
    compiled=0
    if [ "${PEERS_COMPILE:-1}" = 1 ]; then
      compiled=$("$python" "$peer" "${peer_flags[@]}" --compile 2>/dev/null | peer_tokens_per_s || echo 0)
    fi
    what="$name ${experts}x${ffn} top${topk}"
    [ "$experts" = 0 ] && what="$name ff${ffn}"
    label="$precision"
    [ "$precision" = auto ] && label="auto:$([ "$auto_bf16" = 1 ] && echo bf16 || echo fp32)"
    printf '%-22s %-9s %10s %10s %7s %12s %7s  %s\n' "$what" "$label" \
      "$ours" "$eager" "$(ratio "$ours" "$eager")" "${compiled:-0}" "$(ratio "$ours" "${compiled:-0}")" \
      "${path:--}"
  done
done
[ "$device" = cuda ] && exit 0
echo
kernels=$(bench_binary bench_kernels)
"$kernels" --threads "$threads"
