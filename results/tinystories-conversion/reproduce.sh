#!/usr/bin/env bash
# Dense -> MoE on TinyStories at CPU scale (issue #17), from the raw text to the
# tables in this folder (about 35 min on 2 cores):
#  1. a dense model (configs/tinystories-cpu-base.toml, fp32) trained for 300 steps;
#  2. converted at 50% active FFN units (8 experts of 64, top-4) by random, cluster
#     and dot (100 calibration batches), each evaluated as converted and after a
#     100-step fine-tune (seeds 0 and 1), against the dense model itself trained
#     for the same 100 steps with the same settings;
#  3. upcycled (8 copies, top-2) and continued for 200 steps, against the same MoE
#     trained from scratch for 200 steps (seeds 0 and 1).
# Runs go to runs/conversion/; an interrupted script re-runs only what has no DONE.
#   results/tinystories-conversion/reproduce.sh [TINYSTORIES_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/results/tinystories-conversion"
cd "$root"
results/prepare-tinystories.sh "${1:-}"
moelab=${MOELAB_BIN:-${MOELAB_BUILD_DIR:-$root/build}/bin/moelab}
runs=runs/conversion
common=(--set train.precision=fp32 --set train.threads=1 --set log.progress=off
  --set eval.max_windows=128 --set data.dir="$root/data/tinystories")

# train OUT [moelab train arguments...]: once (a folder with DONE is kept).
train() {
  local out=$1
  shift
  [ -f "$out/DONE" ] || "$moelab" train "$@" "${common[@]}" --out "$out" >"$out.log" 2>&1
}
mkdir -p "$runs"
start=$(date +%s)
train "$runs/dense" configs/tinystories-cpu-base.toml --set train.max_steps=300 \
  --set optim.warmup_steps=30 --set eval.interval=50 --set checkpoint.interval=300
dense_ckpt="$runs/dense/checkpoints/step_00000300"

for method in random cluster dot; do
  [ -f "$runs/$method/config.toml" ] ||
    "$moelab" convert "$dense_ckpt" --method "$method" --experts 8 --top-k 4 \
      --calibration-steps 100 --out "$runs/$method" >"$runs/$method.convert.log" 2>&1
done
[ -f "$runs/upcycle/config.toml" ] ||
  "$moelab" upcycle "$dense_ckpt" --experts 8 --top-k 2 --out "$runs/upcycle" \
    >"$runs/upcycle.log" 2>&1

finetune=(--set train.max_steps=100 --set optim.warmup_steps=10 --set optim.lr=1e-3
  --set eval.interval=25 --set checkpoint.interval=100)
continued=(--set train.max_steps=200 --set optim.warmup_steps=20 --set eval.interval=25
  --set checkpoint.interval=200)
# Two runs at a time, one thread each.
jobs=()
for seed in 0 1; do
  jobs+=("$runs/dense-ft$seed|configs/tinystories-cpu-base.toml|${finetune[*]} --set train.seed=$seed --set train.init_from=$root/$dense_ckpt")
  for method in random cluster dot; do
    jobs+=("$runs/$method-ft$seed|$runs/$method/config.toml|${finetune[*]} --set train.seed=$seed")
  done
  jobs+=("$runs/upcycle-s$seed|$runs/upcycle/config.toml|${continued[*]} --set train.seed=$seed")
  jobs+=("$runs/scratch-s$seed|$runs/upcycle/config.toml|${continued[*]} --set train.seed=$seed --set 'train.init_from=\"\"'")
done
for job in "${jobs[@]}"; do
  IFS='|' read -r out config sets <<<"$job"
  eval "train '$out' '$config' $sets" &
  [ "$(jobs -rp | wc -l)" -lt 2 ] || wait -n
done
wait
echo "wall: $(( $(date +%s) - start )) s" | tee "$runs/wall.txt"

# Validation loss of every start (as converted) and of the dense model.
{
  echo "model,step,val_loss"
  for m in dense random cluster dot upcycle; do
    ckpt=$([ $m = dense ] && echo "$dense_ckpt" || echo "$runs/$m/checkpoints/step_00000000")
    loss=$("$moelab" eval "$ckpt" --max-windows 128 | sed -n 's/.*: loss \([0-9.]*\) over.*/\1/p')
    echo "$m,0,$loss"
  done
} >"$runs/starts.csv"
"${MOELAB_PYTHON:-/usr/bin/python3}" "$here/tabulate.py" "$runs" "$here"  # needs matplotlib
mkdir -p "$here/configs"
cp "$runs/dense/config.resolved.toml" "$here/configs/dense.toml"
for m in random cluster dot upcycle; do
  cp "$runs/$m/config.toml" "$here/configs/$m.toml"
  cp "$runs/$m/checkpoints/step_00000000/meta.json" "$here/configs/$m.meta.json"
done
