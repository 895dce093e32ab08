#!/usr/bin/env bash
# Re-runs the CPU-scale TinyStories study from the raw text to the plots and
# refreshes this folder: installs and builds what is missing, prepares
# ../shared/data/tinystories (BPE 4096, V1 validation held out), trains the nine
# runs (about an hour on 2 cores), writes the report and copies it here.
#   results/tinystories-cpu/reproduce.sh [TINYSTORIES_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/results/tinystories-cpu"
cd "$root"
results/prepare-tinystories.sh "${1:-}" --force
moelab=${MOELAB_BUILD_DIR:-$root/build}/bin/moelab
study=configs/studies/tinystories-cpu.toml
runs=runs/studies/tinystories-cpu
"$moelab" study run "$study"
"$moelab" report "$runs"

results/publish-study.sh "$runs" "$here" \
  "summary.md summary.json curves.csv gap_curves.csv curves.png gaps.png" \
  "$study" configs/tinystories-cpu-base.toml
mkdir -p "$here/dataset"
cp data/tinystories/prep.json "$here/dataset/"
for split in train val; do cp "data/tinystories/$split/manifest.json" "$here/dataset/$split-manifest.json"; done
echo "results refreshed in $here"
