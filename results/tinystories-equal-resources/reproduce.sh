#!/usr/bin/env bash
# Re-runs the strictly-equal-resources activation-rate sweep on TinyStories at
# CPU scale from the raw text to the plots and refreshes this folder: installs
# and builds what is missing, prepares ../shared/data/tinystories (BPE 4096, V1
# validation held out), trains the 14 runs (about 55 min on 2 cores, two at a
# time; an interrupted sweep resumes where it stopped), writes the report and
# copies it here.
#   results/tinystories-equal-resources/reproduce.sh [TINYSTORIES_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/results/tinystories-equal-resources"
cd "$root"
results/prepare-tinystories.sh "${1:-}"
moelab=${MOELAB_BUILD_DIR:-$root/build}/bin/moelab
study=configs/studies/equal-resources-tinystories.toml
runs=runs/studies/equal-resources-tinystories
"$moelab" study run "$study"
"$moelab" report "$runs"

results/publish-study.sh "$runs" "$here" \
  "summary.md summary.json rate_summary.csv curves.csv curves.png activation_rate.png" "$study"
echo "results refreshed in $here"
