# Sourced by the bench/ scripts: their arguments, the binaries they run, the
# machine line above their figures and bench_model's tokens/s.
# tests/bench/lib_test.sh checks each piece.

bench_lib_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# A bench_model script's arguments: sets steps and threads (the first two, by
# default 8 and 2) and extra (the rest, bench_model options).
bench_args() {
  steps=${1:-8}
  threads=${2:-2}
  shift $(($# < 2 ? $# : 2))
  extra=("$@")
}

# The build's bin/NAME (MOELAB_BUILD_DIR, else build/), or exit 2 naming it.
bench_binary() {  # NAME
  local path=${MOELAB_BUILD_DIR:-$bench_lib_root/build}/bin/$1
  [ -x "$path" ] || { echo "${0##*/}: $path not found (launch/build.sh builds it)" >&2; exit 2; }
  echo "$path"
}

# The CPU's model name, as lscpu says it.
bench_cpu_model() {
  lscpu | sed -n 's/^Model name: *//p'
}

# The CPU's model name and which bf16 instruction sets it has.
bench_cpu() {
  echo "CPU: $(bench_cpu_model); bf16 flags: $(grep -o -w -E 'amx_bf16|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
}

# The first GPU's name.
bench_gpu() {
  echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
}

# What the figures ran on: the GPU where the bench_model options name cuda, else the CPU.
bench_machine_header() {  # bench_model options...
  if [[ " $* " == *" cuda "* ]]; then bench_gpu; else bench_cpu; fi
}

# Each tokens/s figure of bench_model's output (stdin), a line each.
each_tokens_per_s() {
  sed -n 's/.* \([0-9][0-9]*\) tok\/s.*/\1/p'
}

# The first tokens/s figure of bench_model's output (stdin).
tokens_per_s() {
  each_tokens_per_s | head -n 1
}
