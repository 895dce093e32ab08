#!/usr/bin/env bash
# Prep throughput of `moelab prep` at 1 and 2 ranks against SentencePiece's own
# spm_encode, on the same text file and tokenizer model.
#   bench/prep_vs_spm.sh TEXT_FILE TOKENIZER_MODEL [MOELAB_BINARY]
set -euo pipefail

text=${1:?usage: prep_vs_spm.sh TEXT_FILE TOKENIZER_MODEL [MOELAB_BINARY]}
model=${2:?usage: prep_vs_spm.sh TEXT_FILE TOKENIZER_MODEL [MOELAB_BINARY]}
moelab=${3:-build/bin/moelab}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

megabytes=$(awk -v b="$(stat -c %s "$text")" 'BEGIN { printf "%.3f", b / 1e6 }')
now() { date +%s.%N; }
report() {  # name start end
  awk -v n="$1" -v s="$2" -v e="$3" -v mb="$megabytes" \
    'BEGIN { printf "%-28s %8.3f s %8.2f MB/s\n", n, e - s, mb / (e - s) }'
}

echo "file: $text ($megabytes MB), model: $model"
for ranks in 1 2; do
  start=$(now)
  mpirun --oversubscribe --allow-run-as-root -np "$ranks" "$moelab" prep --input "$text" \
    --tokenizer "$model" --out "$work/out$ranks" --threads 1 >/dev/null 2>&1
  report "moelab prep, $ranks rank(s)" "$start" "$(now)"
done
if ! cmp -s "$work/out1/train/manifest.json" "$work/out2/train/manifest.json"; then
  echo "WARNING: 1-rank and 2-rank manifests differ" >&2
fi

# spm_encode reads one sentence per line, so it encodes lines, not documents:
# the same bytes, slightly different units.
start=$(now)
spm_encode --model "$model" --output_format=id <"$text" >"$work/spm.ids"
report "spm_encode (1 process)" "$start" "$(now)"
