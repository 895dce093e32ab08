#!/usr/bin/env bash
# Re-runs the expert count x granularity sweep on TinyStories at CPU scale from
# the raw text to the plots and refreshes this folder: installs and builds what
# is missing, prepares ../shared/data/tinystories (BPE 4096, V1 validation held
# out), trains the 28 runs (about 1 h 35 min on 2 cores, two at a time; an
# interrupted sweep resumes where it stopped), writes the report and copies it
# here.
#   results/tinystories-granularity/reproduce.sh [TINYSTORIES_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/results/tinystories-granularity"
cd "$root"
results/prepare-tinystories.sh "${1:-}"
moelab=${MOELAB_BUILD_DIR:-$root/build}/bin/moelab
study=configs/studies/tinystories-granularity.toml
runs=runs/studies/tinystories-granularity
"$moelab" study run "$study"
"$moelab" report "$runs" --x moe.num_experts --lines granularity

results/publish-study.sh "$runs" "$here" \
  "summary.md summary.json axis_summary.csv curves.csv curves.png axis.png" "$study"
echo "results refreshed in $here"
