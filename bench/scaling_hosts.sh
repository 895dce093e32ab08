#!/usr/bin/env bash
# Training across hosts on the test cluster of tests/cluster/hosts.sh (network
# namespaces on this machine, TCP over a bridge between them): the cost of the
# network and how much of the gradient exchange the overlap hides.
#   bench/scaling.sh --hosts DATA_DIR(vocab 4096) [STEPS=20]
# For the dense and MoE reference shapes (`moelab config defaults`, MoE with
# moe.enabled = true), in fp32 and with precision auto, each rank 1 thread:
#   1 host  x 2 ranks (shared memory), overlap on
#   2 hosts x 1 rank  (TCP), overlap off, then on
#   2 hosts x 2 ranks (TCP between hosts, shared memory within), overlap off, then on
# Prints tokens/s, rank 0's median forward+backward and grad_sync ms (after the
# first 5 steps), and the share of the exchange the overlap hid:
# 1 - grad_sync(on) / grad_sync(off). On a machine with fewer cores than ranks
# the 4-rank rows share cores (their tokens/s is not a speed-up). Needs root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
moelab=${MOELAB_BUILD_DIR:-$root/build}/bin/moelab
hosts=$root/tests/cluster/hosts.sh
data=$(cd "${1:?usage: scaling.sh --hosts DATA_DIR [STEPS]}" && pwd)
steps=${2:-20}
work=$(mktemp -d /var/tmp/scaling_hosts.XXXXXX)
trap 'cd /; "$hosts" down "$work" >/dev/null 2>&1; rm -rf "$work"' EXIT
"$hosts" up 2 "$work" >/dev/null
export HOSTS_DIR=$work
cd "$work"
printf '[moe]\nenabled = true\n' >moe.toml
printf '[moe]\nenabled = false\n' >dense.toml
echo "CPU: $(bench_cpu_model), $(nproc) cores; steps $steps"

run() {  # name config precision overlap placement(one2|two1|two2)
  local name=$1 config=$2 precision=$3 overlap=$4 placement=$5 launch
  case $placement in
    one2) launch=("$hosts" run h1 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 2) ;;
    two1) launch=("$hosts" mpirun --oversubscribe --host h1:1,h2:1 -np 2) ;;
    two2) launch=("$hosts" mpirun --oversubscribe --host h1:2,h2:2 -np 4) ;;
  esac
  OMP_NUM_THREADS=1 "${launch[@]}" -x OMP_NUM_THREADS "$moelab" train "$config" --out "$name" \
    --set data.dir="$data" --set eval.interval=0 --set eval.max_windows=1 --set log.interval=1 \
    --set log.progress=off --set train.max_steps="$steps" --set optim.warmup_steps=1 \
    --set train.threads=1 \
    --set train.precision="$precision" --set parallel.overlap_grad_sync="$overlap" \
    >"$name.log" 2>&1 || { tail -n 20 "$name.log" >&2; exit 1; }
}

medians() {  # run: "tokens/s fb_ms sync_ms" (rank 0, after the first 5 steps)
  python3 - "$1/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][5:]
m = statistics.median
print(f'{m(r["tokens_per_s"] for r in rows):.0f} {m(r["time_ms"]["forward_backward"] for r in rows):.0f}'
      f' {m(r["time_ms"]["grad_sync"] for r in rows):.1f}')
PY
}

printf '%-6s %-5s %-24s %9s %8s %9s %7s\n' model prec layout tokens/s fb_ms sync_ms hidden
for model in dense moe; do
  for precision in fp32 auto; do
    row() {  # label name [sync_ms without overlap]
      read -r tps fb sync <<<"$(medians "$2")"
      local hidden=""
      [[ -z ${3:-} ]] || hidden=$(awk -v on="$sync" -v off="$3" 'BEGIN { printf "%.0f%%", 100 * (1 - on / off) }')
      printf '%-6s %-5s %-24s %9s %8s %9s %7s\n' "$model" "$precision" "$1" "$tps" "$fb" "$sync" "$hidden"
    }
    base=${model}_${precision}
    run "${base}_one2" "$model.toml" "$precision" true one2
    row "1 host x 2, overlap" "${base}_one2"
    for placement in two1 two2; do
      run "${base}_${placement}_off" "$model.toml" "$precision" false "$placement"
      run "${base}_${placement}_on" "$model.toml" "$precision" true "$placement"
      off=$(medians "${base}_${placement}_off" | cut -d' ' -f3)
      label="2 hosts x ${placement#two}"
      row "$label, no overlap" "${base}_${placement}_off"
      row "$label, overlap" "${base}_${placement}_on" "$off"
    done
  done
done
