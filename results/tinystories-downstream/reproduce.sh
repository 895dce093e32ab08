#!/usr/bin/env bash
# Re-runs the downstream study (the MoE-variants study's two routers and the
# dense model matched to their active parameters, 3 seeds, the TinyStories
# cloze and BLiMP scored in the loop) from the raw text to the plots and
# refreshes this folder: installs and builds what is missing, prepares
# ../shared/data/tinystories and its tasks, trains the 9 runs (two at a time,
# one thread each; an interrupted study resumes where it stopped), writes the
# report and copies it here.
#   results/tinystories-downstream/reproduce.sh [TINYSTORIES_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/results/tinystories-downstream"
cd "$root"
results/prepare-tinystories.sh "${1:-}"
moelab=${MOELAB_BUILD_DIR:-$root/build}/bin/moelab
study=configs/studies/tinystories-downstream.toml
runs=runs/studies/tinystories-downstream
"$moelab" study run "$study"
"$moelab" report "$runs"

results/publish-study.sh "$runs" "$here" \
  "summary.md summary.json curves.csv curves.png task_curves.csv task_curves.png" "$study"
echo "results refreshed in $here"
