#!/usr/bin/env bash
# Single-thread MB/s of moelab's tokenizer.json and tiktoken encoders against
# `tokenizers` (encode_batch) and tiktoken (encode_ordinary), same documents,
# same 8k byte-level BPE trained in the run; ids are checked identical first.
# Then published tokenizer.json files (MOELAB_SHARED_DATA, default
# ../shared/data) against `tokenizers`: Llama 3.1, Qwen3 (NFC) and OLMoE (NFC),
# or the folders of its tokenizers/ that PUBLISHED names ("all": every one).
#   bench/tokenizer_speed.sh TEXT_FILE [REPEATS] [BENCH_BINARY]
# e.g. bench/tokenizer_speed.sh ../shared/data/tinystories/valid-v1-TinyStories-valid-head.txt
set -euo pipefail

text=${1:?usage: tokenizer_speed.sh TEXT_FILE [REPEATS] [BENCH_BINARY]}
repeats=${2:-5}
binary=${3:-build/bin/bench_tokenizer}
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${MOELAB_SHARED_DATA:-$root/../shared/data}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

published=()
names=${PUBLISHED:-llama3.1-8b-instruct qwen3 olmo-gpt-neox-dolma-v1_5}
[[ $names == all ]] && names=$(cd "$shared/tokenizers" && ls -d */ | tr -d /)
for name in $names; do
  mkdir -p "$work/$name"
  zstd -q -d "$shared/tokenizers/$name/tokenizer.json.zst" -o "$work/$name/tokenizer.json"
  published+=("$work/$name/tokenizer.json")
done

lscpu | grep -m1 'Model name' || true
# One thread for every contender.
export RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
"$root/.venv/bin/python" "$root/bench/tokenizer_speed.py" "$text" "$binary" "$work" "$repeats" \
  "${published[@]}"
