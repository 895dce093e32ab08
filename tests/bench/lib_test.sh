#!/usr/bin/env bash
# Checks bench/lib.sh, the pieces the bench/ scripts share: their arguments'
# defaults and overrides, the exit 2 naming a binary the build lacks (from the
# library and from a script that uses it), the machine line, the tokens/s
# figures read from bench_model's output, and granularity.sh's table. Exits 0 when all pass, 1 when one fails.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cluster/test_lib.sh
source "$here/../cluster/test_lib.sh"
# shellcheck source=bench/lib.sh
source "$here/../../bench/lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# --- arguments: steps, threads, then bench_model's own options
args_are() {  # STEPS THREADS EXTRA, then the arguments
  local want_steps=$1 want_threads=$2 want_extra=$3
  shift 3
  bench_args "$@"
  [[ $steps == "$want_steps" && $threads == "$want_threads" && "${extra[*]}" == "$want_extra" ]]
}
check "no arguments: 8 steps, 2 threads, no options" args_are 8 2 ""
check "one argument: its steps, 2 threads" args_are 5 2 "" 5
check "steps, threads and options" args_are 10 1 "--device cuda --batch 128" 10 1 --device cuda --batch 128

# --- a binary the build lacks: exit 2 naming it
mkdir -p "$work/empty" "$work/built/bin"
refused() {  # SCRIPT COMMAND...: exits 2, SCRIPT naming the empty build's bench_model
  local script=$1 message rc
  shift
  message=$(MOELAB_BUILD_DIR=$work/empty "$@" 2>&1 >/dev/null)
  rc=$?
  echo "  exit $rc: $message"
  ((rc == 2)) && [[ $message == "$script: $work/empty/bin/bench_model not found"* ]]
}
check "bench_binary: no bench_model in the build" refused lib_test.sh bench_binary bench_model
for script in attention granularity peers; do
  check "bench/$script.sh: no bench_model in the build" \
    refused "$script.sh" "$here/../../bench/$script.sh" 1 1
done
printf '#!/bin/sh\n' >"$work/built/bin/bench_model"
chmod +x "$work/built/bin/bench_model"
found() { [[ $(MOELAB_BUILD_DIR=$work/built bench_binary bench_model) == "$work/built/bin/bench_model" ]]; }
check "bench_binary: the build's bench_model" found

# --- the machine line: the GPU's name where the options name cuda, else the
# CPU's (lscpu's "Model name:" line) and its bf16 flags
mkdir -p "$work/path"
printf '#!/bin/sh\necho "NVIDIA H100 80GB HBM3"\n' >"$work/path/nvidia-smi"
cat >"$work/path/lscpu" <<'LSCPU'
#!/bin/sh
cat <<'OUT'
Architecture:                            x86_64
Vendor ID:                               GenuineIntel
Model name:                              Intel(R) Xeon(R) Platinum 8480+
CPU family:                              6
OUT
LSCPU
chmod +x "$work/path/nvidia-smi" "$work/path/lscpu"
cpu_model() { [[ $(PATH=$work/path:$PATH bench_cpu_model) == "Intel(R) Xeon(R) Platinum 8480+" ]]; }
gpu_line() { [[ $(PATH=$work/path:$PATH bench_machine_header --device cuda) == "GPU: NVIDIA H100 80GB HBM3" ]]; }
cpu_line() {
  [[ $(PATH=$work/path:$PATH bench_machine_header --batch 64) == "CPU: Intel(R) Xeon(R) Platinum 8480+; bf16 flags: "* ]]
}
check "bench_cpu_model: lscpu's model name" cpu_model
check "--device cuda: the GPU line" gpu_line
check "no cuda option: the CPU line" cpu_line

# --- tokens/s from bench_model's output (its result line, bench_model.cpp's
# "{:<18} {:<9} {:>9.0f} tok/s ..."), the first of two results
bench_model_output='torch 2.15.0  device cpu  threads 1  matmul peak: fp32 231.5 GFLOP/s, bf16 1695.9 GFLOP/s
precision auto -> bf16 (auto: on this CPU (amx_bf16, avx512_bf16) bf16 matmul measured 7.33x the fp32 rate (1696 against 231 GFLOP/s on 1 thread))
model: d 256, 4 layers, 4 heads, vocab 4096, seq 256, batch 16
moe 4x512 top2     auto:bf16      9047 tok/s   0.453 s/step  MFU  18.5%  (141.9 GFLOP/step, 9.444M params, peak 1208 MiB)
    ms/step: forward=214 [ embedding=1 norm=4 attention=43 route=6 dispatch=4 experts=88 combine=5 head=57 ] loss=0 backward=220 optimizer=19
moe 64x128 top8    fp32         123456 tok/s   0.033 s/step  MFU   2.0%  (141.9 GFLOP/step, 9.444M params, peak 1208 MiB)
peak resident memory 1208 MiB'
first_figure() { [[ $(tokens_per_s <<<"$bench_model_output") == 9047 ]]; }
check "tokens_per_s: 9047 from bench_model's first result" first_figure
every_figure() { [[ $(each_tokens_per_s <<<"$bench_model_output" | tr '\n' ' ') == "9047 123456 " ]]; }
check "each_tokens_per_s: both results' figures, in order" every_figure

# --- granularity.sh: one bench_model run a pair and precision, the fine model
# in turn with the coarse one, against a stub that logs its arguments and
# prints two rows and its "in turn" line; the table takes each row's tokens/s,
# the median ratio, the range and the totals' ratio
cat >"$work/built/bin/bench_model" <<STUB
#!/bin/bash
echo "\$*" >>"$work/args.log"
echo "moe 4x512 top2     fp32          1000 tok/s   0.1 s/step"
echo "moe 64x128 top8    fp32           800 tok/s   0.1 s/step"
echo "in turn: moe 64x128 top8 / moe 4x512 top2 tok/s 0.812 (median of 1 rounds, range 0.700-0.900; totals 0.805)"
STUB
granularity_in_turn() {
  local out
  out=$(MOELAB_BUILD_DIR=$work/built PATH=$work/path:$PATH "$here/../../bench/granularity.sh" 1 1)
  echo "$out" | sed 's/^/  /'
  [[ $(wc -l <"$work/args.log") == 4 ]] &&
    grep -q -E -- '--experts 4 --top-k 2 --ffn 512 --in-turn-with 64:8:128 --precision fp32' \
      "$work/args.log" &&
    grep -q -E -- '--ffn 256 --in-turn-with 64:8:64 --precision auto --d-model 128' \
      "$work/args.log" &&
    grep -q -E '^reference +fp32 +4x512 1000 +64x128 800 +0.812x  0.700-0.900, 0.805$' <<<"$out"
}
check "granularity.sh: each pair in turn in one run; median ratio, range and totals" \
  granularity_in_turn

echo "bench lib_test: $passed passed, $failed failed"
((failed == 0))
