#!/usr/bin/env bash
# The main job on the built-in demo corpus (Debian's fortunes): installs what is
# missing, builds the moelab binary, prepares the corpus, trains a small dense
# model and its MoE twin, and prints their best validation losses side by side.
# Both train on MOELAB_DEMO_RANKS ranks (default 2, one core each): the dense
# model data-parallel, the MoE with its 4 experts split over the ranks
# (parallel.ep = ranks).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
launch/install-deps.sh
# Only the binary the demo runs (launch/test.sh builds everything).
MOELAB_BUILD_TARGETS=moelab launch/build.sh
moelab=${MOELAB_BUILD_DIR:-$root/build}/bin/moelab
data=data/fortunes

if [ ! -f "$data/train/manifest.json" ]; then
  english=$(launch/fortunes-files.sh)
  mapfile -t english <<<"$english"
  "$moelab" prep --input "${english[@]}" \
    --separator '%' --val-fraction 0.05 --vocab-size 1024 --out "$data"
fi
"$moelab" prep --inspect "$data" | head -n 12

ranks=${MOELAB_DEMO_RANKS:-2}
launch/train.sh -np "$ranks" configs/dense-small.toml --resume auto "$@"
launch/train.sh -np "$ranks" configs/moe-small.toml --resume auto --set parallel.ep="$ranks" "$@"

echo
printf '%-12s %15s %12s %12s   %s\n' model "best val loss" "params" "active" "curve, metrics"
count() { "$moelab" params "configs/$1.toml" | awk -v k="$2" '$1 == k { print $2 }'; }
for model in dense-small moe-small; do
  LC_NUMERIC=C printf '%-12s %15.4f %12s %12s   runs/%s/{val.csv,metrics.jsonl}\n' "$model" \
    "$(tail -n 1 "runs/$model/val.csv" | cut -d, -f4)" "$(count "$model" total)" "$(count "$model" active)" "$model"
done
