#!/usr/bin/env bash
# Copies a finished study's report into a results folder: the named report files,
# the study file (and any extra files), and every run's resolved config as
# configs/<variant>-seed<n>.toml. Used by the results/*/reproduce.sh scripts.
#   results/publish-study.sh RUNS_DIR RESULTS_DIR "REPORT_FILE..." STUDY_FILE [EXTRA_FILE...]
set -euo pipefail
runs=$1 here=$2 reports=$3
shift 3
for f in $reports; do cp "$runs/$f" "$here/"; done
cp "$@" "$here/"
mkdir -p "$here/configs"
for run in "$runs"/*/seed*/; do
  variant=$(basename "$(dirname "$run")")
  cp "$run/config.resolved.toml" "$here/configs/$variant-$(basename "$run").toml"
done
