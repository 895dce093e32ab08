#!/usr/bin/env bash
# Re-runs the MoE-variants study (softmax vs sigmoid routing, QK-norm, a dense
# first layer) on TinyStories at CPU scale from the raw text to the plots and
# refreshes this folder: installs and builds what is missing, prepares
# ../shared/data/tinystories (BPE 4096, V1 validation held out), trains the 12
# runs (two at a time, one thread each; an interrupted study resumes where it
# stopped), writes the report and copies it here.
#   results/tinystories-moe-variants/reproduce.sh [TINYSTORIES_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/results/tinystories-moe-variants"
cd "$root"
results/prepare-tinystories.sh "${1:-}"
moelab=${MOELAB_BUILD_DIR:-$root/build}/bin/moelab
study=configs/studies/tinystories-moe-variants.toml
runs=runs/studies/tinystories-moe-variants
"$moelab" study run "$study"
"$moelab" report "$runs"

results/publish-study.sh "$runs" "$here" "summary.md summary.json curves.csv curves.png task_curves.csv task_curves.png" "$study"
echo "results refreshed in $here"
