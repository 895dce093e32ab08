#!/usr/bin/env bash
# The set-up every results/*/reproduce.sh shares: installs and builds what is
# missing (skipped with MOELAB_SKIP_SETUP=1), then prepares the TinyStories text
# into data/tinystories (BPE 4096, V1 validation held out) unless it is there
# already; --force prepares it again. Then the downstream tasks the TinyStories
# base config scores in the loop (the TinyStories cloze and BLiMP, tokenized by
# that data's tokenizer) into data/tinystories-tasks.
#   results/prepare-tinystories.sh [TINYSTORIES_DIR] [--force]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
force=${2:-}
[ -n "${MOELAB_SKIP_SETUP:-}" ] || { launch/install-deps.sh; launch/build.sh; }
if [ "$force" = --force ] || [ ! -f data/tinystories/prep.json ]; then
  data_prep/tinystories-local.sh "${1:-}" data/tinystories ${force:+"$force"}  # "": its default
fi
if [ "$force" = --force ] || [ ! -f data/tinystories-tasks/tasks.json ]; then
  shared=$(cd "${1:-$root/../shared/data/tinystories}/.." && pwd)
  "${MOELAB_BUILD_DIR:-$root/build}/bin/moelab" tasks prep --tokenizer data/tinystories \
    --tasks tinystories_cloze,blimp --out data/tinystories-tasks --shared-data "$shared"
fi
