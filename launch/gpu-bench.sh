#!/usr/bin/env bash
# The GPU figures, after the GPU correctness checks, in one call (about 9 minutes
# on one H200). Everything printed also goes to ${OUT:-.}/gpu-bench.log.
#  1. launch/gpu-check.sh: build, NCCL tests, CPU-vs-CUDA curve, grouped GEMM.
#  2. bench/peers.sh --device cuda at batch 16 and 128: moelab against the PyTorch
#     peer, eager and compiled, on the same GPU and torch (dense ff1024, MoE 4x512
#     top-2, fine-grained 64x64 top-8; fp32 and bf16).
#  3. bench_model --profile: the operators with the most self time in a bf16 MoE step;
#     bench/attention.sh: latent attention against GQA and MHA of about the same
#     parameters (tokens/s, the allocator's peak), bf16 at batch 128.
#  4. The paper shapes (configs/tinystories-paper-base.toml: the MoE 4x640 top-2 and
#     its dense active- and total-matched baselines) trained in bf16 at batch 128 on
#     one GPU: tokens/s and MFU from their metrics.jsonl.
#  5. study.runs_per_gpu = 1, 2, 4, 8: k runs of the paper MoE sharing the GPU (under
#     CUDA MPS when the machine has it): tokens/s summed over the runs.
# The paper shapes train on MOELAB_GPU_DATA (default data/fortunes) with its vocabulary.
# Environment and --build-only: as launch/gpu-check.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log=${OUT:-$root}/gpu-bench.log
exec > >(tee -a "$log") 2>&1
launch/gpu-check.sh "$@"
[ "${1:-}" = --build-only ] && exit 0
export MOELAB_BUILD_DIR=${MOELAB_BUILD_DIR:-$root/build-gpu}
moelab=$MOELAB_BUILD_DIR/bin/moelab
data=$(cd "${MOELAB_GPU_DATA:-data/fortunes}" && pwd)
python=${MOELAB_PYTHON:-$root/.venv/bin/python}
[ -x "$python" ] || python=$(command -v python3)

for batch in 16 128; do
  echo "== moelab against the PyTorch peer on the GPU, batch $batch"
  MOELAB_PYTHON=$python bench/peers.sh --device cuda --batch "$batch" 10 1
done

echo "== operators of a bf16 MoE step (4x512 top-2, batch 128)"
"$MOELAB_BUILD_DIR/bin/bench_model" --device cuda --batch 128 --precision bf16 --experts 4 \
  --top-k 2 --ffn 512 --steps 5 --threads 1 --profile 15

echo "== latent attention against GQA and MHA (MoE 4x512 top-2, batch 128)"
bench/attention.sh 10 1 --device cuda --batch 128

work=$(mktemp -d)
vocab=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$data/prep.json")
# A study of the paper shapes on this GPU: $1 = variants (all | moe), $2 = seeds,
# $3 = runs_per_gpu, $4 = its folder under $work.
paper_study() {
  cat <<TOML
[study]
name = "gpu-bench"
base = "$root/configs/tinystories-paper-base.toml"
seeds = $2
out_root = "$work/$4"
ranks = 1
threads = 4
runs_per_gpu = $3
set = { "data.dir" = "$data", "model.vocab_size" = $vocab, "train.max_steps" = 120, "train.precision" = "bf16", "optim.warmup_steps" = 10, "eval.interval" = 0, "checkpoint.interval" = 0, "log.interval" = 10, "log.progress" = "off", "parallel.backend" = "auto" }

[[variant]]
name = "moe"
set = { "moe.enabled" = true, "moe.num_experts" = 4, "moe.top_k" = 2, "moe.d_expert" = 640, "moe.aux_loss_coef" = 0.01, "moe.z_loss_coef" = 0.001 }
TOML
  if [ "$1" = all ]; then
    printf '\n[[variant]]\nname = "dense_active"\nmatch = { variant = "moe", target = "active", knob = "d_ff" }\n'
    printf '\n[[variant]]\nname = "dense_total"\nmatch = { variant = "moe", target = "total", knob = "d_ff" }\n'
  fi
}
# Mean tokens/s and MFU of each run's logged steps after the first two logs (warm-up).
steady_rates() {
  "$python" - "$@" <<'PY'
import json, sys
for path in sys.argv[1:]:
    rows = [json.loads(l) for l in open(path)][2:]
    tps = sum(r["tokens_per_s"] for r in rows) / len(rows)
    mfu = sum(r["mfu"] for r in rows) / len(rows)
    print(f"{path.split('/')[-3]:14} {tps:12.0f} tok/s  MFU {100 * mfu:5.1f}%")
PY
}

echo "== paper shapes, bf16, batch 128, one GPU"
paper_study all "[0]" 1 paper >"$work/paper.toml"
"$moelab" study run --no-plots "$work/paper.toml" >"$work/paper.log" 2>&1 || { cat "$work/paper.log"; exit 1; }
steady_rates "$work"/paper/*/seed0/metrics.jsonl

echo "== several runs per GPU: the paper MoE, k runs side by side"
printf '%-4s %14s %14s\n' k "sum tok/s" "per run"
for k in 1 2 4 8; do
  seeds="[$(seq -s, 0 $((k - 1)))]"
  paper_study moe "$seeds" "$k" "pack-$k" >"$work/pack-$k.toml"
  "$moelab" study run --no-plots "$work/pack-$k.toml" >"$work/pack-$k.log" 2>&1 || { cat "$work/pack-$k.log"; exit 1; }
  steady_rates "$work/pack-$k"/moe/seed*/metrics.jsonl |
    awk -v k="$k" '{ sum += $2 } END { printf "%-4s %14.0f %14.0f\n", k, sum, sum / k }'
done
echo "gpu-bench: done"
