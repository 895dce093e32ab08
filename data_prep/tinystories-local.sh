#!/usr/bin/env bash
# Prepares the TinyStories text kept beside the project (../shared/data/tinystories)
# for the CPU-scale study: the V1 validation file is held out as the validation
# split, every other story trains; SentencePiece BPE, 4096 tokens (MOELAB_VOCAB).
# usage: data_prep/tinystories-local.sh [SRC_DIR] [OUT_DIR] [extra moelab prep args]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-$root/../shared/data/tinystories}
out=${2:-$root/data/tinystories}
shift $(( $# < 2 ? $# : 2 ))
moelab=${MOELAB_BUILD_DIR:-$root/build}/bin/moelab
train=()
for f in "$src"/*.txt; do
  case "$(basename "$f")" in valid-*) ;; *) train+=(--input "$f") ;; esac
done
[ ${#train[@]} -gt 0 ] || { echo "no *.txt stories in $src" >&2; exit 2; }
"$moelab" prep "${train[@]}" --val-input "$src"/valid-*.txt --separator '<|endoftext|>' \
  --vocab-size "${MOELAB_VOCAB:-4096}" --out "$out" "$@"
"$moelab" prep --inspect "$out"
