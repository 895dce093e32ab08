#!/usr/bin/env bash
# Peak resident memory of `moelab import` against the size of the folder it
# reads: a random Qwen2.5-0.5B-shaped model (hidden 896, 24 layers, 14 heads,
# 2 key/value heads, d_ff 4864, vocabulary 151936, tied embeddings, q/k/v
# biases; 494M parameters) saved in bfloat16 by transformers, imported tensor by
# tensor (src/hub/hub.h). Prints the file size, the import's peak RSS
# (/usr/bin/time) and their ratio.
#
# Usage: bench/import_memory.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
moelab=$(bench_binary moelab)
python=$root/.venv/bin/python
out=$(mktemp -d /var/tmp/import_memory.XXXXXX)
trap 'rm -rf "$out"' EXIT

"$python" "$root/tests/reference/hf_make_model.py" qwen2 "$out/hf" dtype=bf16 \
  hidden_size=896 num_hidden_layers=24 num_attention_heads=14 num_key_value_heads=2 \
  intermediate_size=4864 vocab_size=151936 tie_word_embeddings=true \
  max_position_embeddings=32768 rms_norm_eps=1e-6
/usr/bin/time -f "%M" -o "$out/peak_kib" "$moelab" import "$out/hf" --out "$out/imported" >/dev/null
file_bytes=$(stat -c %s "$out/hf/model.safetensors")
peak_kib=$(cat "$out/peak_kib")
echo "CPU: $(bench_cpu_model)"
awk -v f="$file_bytes" -v p="$peak_kib" 'BEGIN {
  printf "model.safetensors: %.0f MiB; moelab import peak RSS: %.0f MiB; ratio %.2f\n",
         f / 1048576, p / 1024, p * 1024 / f }'
