#!/usr/bin/env bash
# Downloads the full TinyStories corpus (roneneldan/TinyStories on Hugging Face,
# CDLA-Sharing-1.0) and prepares it for the paper-scale study. Needs a network;
# the preparation step is the same as data_prep/tinystories-local.sh.
# usage: data_prep/tinystories-download.sh [DOWNLOAD_DIR] [OUT_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
raw=${1:-$root/data/tinystories-raw}
out=${2:-$root/data/tinystories-full}
base=https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main
mkdir -p "$raw"
for f in TinyStoriesV2-GPT4-train.txt TinyStoriesV2-GPT4-valid.txt; do
  if [ ! -s "$raw/$f" ]; then
    curl -fL --retry 3 -o "$raw/$f.part" "$base/$f"
    mv "$raw/$f.part" "$raw/$f"
  fi
done
# The local script treats files named valid-* as the validation split.
ln -sf TinyStoriesV2-GPT4-valid.txt "$raw/valid-TinyStoriesV2-GPT4.txt"
mkdir -p "$raw/split"
ln -sf ../TinyStoriesV2-GPT4-train.txt "$raw/split/train-TinyStoriesV2-GPT4.txt"
ln -sf ../TinyStoriesV2-GPT4-valid.txt "$raw/split/valid-TinyStoriesV2-GPT4.txt"
MOELAB_VOCAB=8192 exec "$root/data_prep/tinystories-local.sh" "$raw/split" "$out"
