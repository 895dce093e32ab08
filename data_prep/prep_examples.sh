#!/usr/bin/env bash
# The three corpora `moelab prep` is exercised on. Run from the repository root:
#   data_prep/prep_examples.sh OUT_ROOT [RANKS] [MOELAB_BINARY]
# Writes OUT_ROOT/{fortunes,tinystories,jsonl} and prints `prep --inspect` of each.
set -euo pipefail

out=${1:?usage: prep_examples.sh OUT_ROOT [RANKS] [MOELAB_BINARY]}
ranks=${2:-1}
moelab=${3:-build/bin/moelab}
tinystories=${TINYSTORIES_DIR:-../shared/data/tinystories}
run() { mpirun --oversubscribe --allow-run-as-root -np "$ranks" "$moelab" "$@"; }

# Fortunes: the English collection's files; documents end at '%' lines.
english=$(launch/fortunes-files.sh)
mapfile -t english <<<"$english"
run prep --input "${english[@]}" \
  --separator % --val-fraction 0.05 --vocab-size 2048 --out "$out/fortunes" --force

# TinyStories: the v1 valid file is the validation split, the rest is training.
run prep --input "$tinystories/alldata-data00-head.txt" \
  --input "$tinystories/train-v1-TinyStories-train-head.txt" \
  --input "$tinystories/train-v2gpt4-TinyStoriesV2-GPT4-train-head.txt" \
  --input "$tinystories/unknown-split-maxme1-tiny-stories-subset.txt" \
  --val-input "$tinystories/valid-v1-TinyStories-valid-head.txt" \
  --vocab-size 4096 --out "$out/tinystories" --force

# JSON Lines: the fortunes turned into {"text": ...} lines, gzip-compressed.
mkdir -p "$out/jsonl_src"
python3 - "$out/jsonl_src/fortunes.jsonl" "${english[@]}" <<'PY'
import json, sys
with open(sys.argv[1], "w") as out:
    for path in sys.argv[2:]:
        text = open(path, encoding="utf-8", errors="replace").read()
        for doc in text.split("\n%\n"):
            if doc.strip():
                out.write(json.dumps({"text": doc.strip()}) + "\n")
PY
gzip -f "$out/jsonl_src/fortunes.jsonl"
run prep --input "$out/jsonl_src/fortunes.jsonl.gz" --format jsonl --val-count 200 \
  --tokenizer "$out/fortunes/tokenizer.model" --out "$out/jsonl" --force

for dataset in fortunes tinystories jsonl; do "$moelab" prep --inspect "$out/$dataset"; done
