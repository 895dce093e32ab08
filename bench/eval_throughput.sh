#!/usr/bin/env bash
# Downstream scoring speed against the validation loss on the same model: runs
# `moelab eval CHECKPOINT --tasks TASKS_DIR` once and prints the validation
# loss's tokens/s, each task's scored tokens/s (tokens forwarded, padding
# excluded) and their ratio (the goal: at least 0.8). Run on an idle machine.
#   bench/eval_throughput.sh CHECKPOINT TASKS_DIR [--limit N] [--max-windows N] [other eval options]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
moelab=${MOELAB_BUILD_DIR:-$root/build}/bin/moelab
[ $# -ge 2 ] || { sed -n 2,7p "$0"; exit 2; }
checkpoint=$1 tasks=$2
shift 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$moelab" eval "$checkpoint" --tasks "$tasks" --json "$out/eval.json" "$@" >"$out/log" 2>&1 ||
  { cat "$out/log"; exit 1; }
python3 - "$out/eval.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
loss = r["loss"]["tokens_per_s"]
print(f"validation loss: {r['loss']['tokens']} tokens in {r['loss']['seconds']:.2f} s, {loss:.0f} tokens/s")
print(f"{'task':<24} {'items':>7} {'tokens':>9} {'seconds':>8} {'tokens/s':>10} {'ratio':>6}")
for name, t in r["tasks"].items():
    print(f"{name:<24} {t['items']:>7} {t['tokens']:>9} {t['seconds']:>8.2f} "
          f"{t['tokens_per_s']:>10.0f} {t['tokens_per_s'] / loss:>6.2f}")
PY
