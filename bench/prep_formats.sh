#!/usr/bin/env bash
# Prep throughput by input format: the same documents as JSON Lines and as
# Parquet, encoded by `moelab prep` with the same tokenizer (a small BPE trained
# once), runs interleaved and repeated; medians in MB/s of document text and
# tokens/s, their ratio, and a bar chart.
#   bench/prep_formats.sh TEXT_DIR [OUT_DIR] [MOELAB_BINARY]
# TEXT_DIR holds `<|endoftext|>`-separated .txt files (e.g. the TinyStories
# sample, shared/data/tinystories). Writes OUT_DIR/prep_formats.{csv,png}.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
text_dir=${1:?usage: prep_formats.sh TEXT_DIR [OUT_DIR] [MOELAB_BINARY]}
out=${2:-$root/results/prep-formats}
moelab=${3:-$root/build/bin/moelab}
repeats=${MOELAB_BENCH_REPEATS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# The documents once, as JSONL and as Parquet (row groups of 1024 documents).
"$root/.venv/bin/python" - "$text_dir" "$work" <<'PY'
import glob, json, sys
import pyarrow as pa, pyarrow.parquet as pq
text_dir, work = sys.argv[1:]
docs = []
for path in sorted(glob.glob(text_dir + "/*.txt")):
    with open(path, encoding="utf-8") as f:
        docs += [d.strip() for d in f.read().split("\n<|endoftext|>\n") if d.strip()]
if not docs:
    sys.exit(f"prep_formats: no documents in {text_dir}/*.txt")
with open(work + "/docs.jsonl", "w", encoding="utf-8") as f:
    for d in docs:
        f.write(json.dumps({"text": d}) + "\n")
pq.write_table(pa.table({"text": docs}), work + "/docs.parquet", row_group_size=1024)
with open(work + "/text_bytes", "w") as f:
    f.write(str(sum(len(d.encode("utf-8")) for d in docs)))
PY
text_bytes=$(cat "$work/text_bytes")
"$moelab" prep --format jsonl --input "$work/docs.jsonl" --vocab-size 4096 \
  --out "$work/tokenizer" >/dev/null 2>&1
tokenizer=$work/tokenizer/tokenizer.model

csv=$out/prep_formats.csv
echo "format,repeat,seconds,text_bytes,tokens" >"$csv"
for repeat in $(seq "$repeats"); do
  for format in jsonl parquet; do
    start=$(date +%s.%N)
    "$moelab" prep --format "$format" --input "$work/docs.$format" --tokenizer "$tokenizer" \
      --threads 1 --force --out "$work/out_$format" >/dev/null 2>&1
    end=$(date +%s.%N)
    tokens=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["num_tokens"])' \
      "$work/out_$format/train/manifest.json")
    echo "$format,$repeat,$(awk -v s="$start" -v e="$end" 'BEGIN { print e - s }'),$text_bytes,$tokens" >>"$csv"
  done
done

# Debian's Python, which has matplotlib (python3-matplotlib, launch/install-deps.sh).
/usr/bin/python3 - "$csv" "$out/prep_formats.png" "$(bench_cpu_model)" <<'PY'
import csv, statistics, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
path, png, cpu = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
formats = ["jsonl", "parquet"]
def median(fmt, key):
    return statistics.median(float(r[key]) / float(r["seconds"]) for r in rows if r["format"] == fmt)
mbs = [median(f, "text_bytes") / 1e6 for f in formats]
tps = [median(f, "tokens") for f in formats]
for f, m, t in zip(formats, mbs, tps):
    print(f"{f:8s} {m:8.2f} MB/s of text  {t:12.0f} tokens/s")
# Each repeat runs both formats back to back: the median of their ratios is the
# figure least moved by other load on the machine.
seconds = {(r["format"], r["repeat"]): float(r["seconds"]) for r in rows}
ratios = [seconds[("jsonl", k)] / seconds[("parquet", k)] for f, k in seconds if f == "jsonl"]
print(f"parquet / jsonl throughput: {statistics.median(ratios):.3f} "
      f"(median of {len(ratios)} paired runs; per run {', '.join(f'{x:.2f}' for x in ratios)})")
fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
for ax, values, label in ((axes[0], mbs, "MB/s of text"), (axes[1], tps, "tokens/s")):
    ax.bar(formats, values, color=["tab:blue", "tab:orange"])
    ax.set_ylabel(label)
fig.suptitle(f"moelab prep, 1 rank, 1 thread, same BPE-4096 tokenizer\n{cpu}", fontsize=9)
fig.tight_layout()
fig.savefig(png, dpi=120)
PY
