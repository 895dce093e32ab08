#!/usr/bin/env bash
# The GPU check, on a machine with one or more NVIDIA GPUs and a CUDA PyTorch:
#  1. builds moelab into build-gpu/ (or reuses it) against that PyTorch's LibTorch;
#  2. runs the NCCL communicator tests (1 rank, and 2 ranks when 2 GPUs are visible);
#  3. trains a short MoE on `cuda` and on the CPU, both fp32 (TF32 off, LibTorch's
#     default), from the same seed and data, and checks that the first loss agrees to
#     1e-5 relative and every later one to 1e-3;
#  4. checks the grouped expert GEMM (LibTorch's CUDA _grouped_mm, bf16) against one
#     expert at a time, values and gradients;
#  5. runs bench_model on the GPU: tokens/s and MFU against the GPU's measured peak,
#     and fine-grained (64 x 128, top-8) against coarse (4 x 512, top-2) experts.
#
# Environment:
#   MOELAB_PYTHON       python whose torch to build against (default: .venv, else python3)
#   MOELAB_DEPS_PREFIX  a folder of Debian packages unpacked with dpkg -x (launch/gpu-deps.sh
#                       makes one) for machines without MPI, HDF5, TOML++, spdlog, ...
#   MOELAB_GPU_DATA     prepared dataset (default data/fortunes, made by launch/demo.sh)
# Prints "gpu-check: PASS" or exits non-zero at the first failing part.
# `launch/gpu-check.sh --build-only` stops after the build: on a machine without a GPU it
# rehearses the GPU machine's build (e.g. MOELAB_PYTHON naming a venv with that machine's torch
# and MOELAB_DEPS_PREFIX=.gpu-deps) before any device time is spent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${MOELAB_BUILD_DIR:-$root/build-gpu}
data=${MOELAB_GPU_DATA:-data/fortunes}
python=${MOELAB_PYTHON:-}
[ -n "$python" ] || { [ -x .venv/bin/python ] && python=$root/.venv/bin/python || python=$(command -v python3); }
# CMake resolves a bare name such as "python3" against the source folder: make it a path.
[[ "$python" == */* ]] || python=$(command -v "$python") || { echo "gpu-check: no $MOELAB_PYTHON on PATH" >&2; exit 2; }

if [ -n "${MOELAB_DEPS_PREFIX:-}" ]; then
  deps=$(cd "$MOELAB_DEPS_PREFIX" && pwd)
  export PATH="$deps/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:$deps/lib/x86_64-linux-gnu:$deps/usr/lib/x86_64-linux-gnu/hdf5/serial:$deps/usr/lib/x86_64-linux-gnu/openmpi/lib:${LD_LIBRARY_PATH:-}"
  export CMAKE_PREFIX_PATH="$deps/usr:${CMAKE_PREFIX_PATH:-}"
  export CPATH="$deps/usr/include:$deps/usr/include/hdf5/serial:${CPATH:-}"
  export OPAL_PREFIX="$deps/usr"  # a relocated Open MPI finds its helpers and help files here
  export HDF5_ROOT="$deps/usr/lib/x86_64-linux-gnu/hdf5/serial"  # Debian's layout: include/ and lib/ links
  export MPI_HOME="$deps/usr/lib/x86_64-linux-gnu/openmpi"
fi

build_only=false
[ "${1:-}" = "--build-only" ] && build_only=true
$build_only || echo "== gpu-check: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -n 1), $(nvidia-smi -L | wc -l) GPU(s)"
"$python" -c 'import torch; print("== torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'

echo "== build ($build)"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# A configure that failed leaves a cache without build files: start that one afresh.
[ -f "$build/CMakeCache.txt" ] && ! [ -f "$build/build.ninja" ] && ! [ -f "$build/Makefile" ] && rm -rf "$build"
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DMOELAB_PYTHON="$python" -DMOELAB_WITH_NCCL=ON -DMOELAB_BUILD_TESTS=ON \
  -DMOELAB_WITH_PARQUET="$("$python" -c 'import pyarrow' 2>/dev/null && echo ON || echo OFF)"
cmake --build "$build" --parallel "$(nproc)" --target moelab bench_model nccl_comm test_model
if $build_only; then echo "gpu-check: built (--build-only)"; exit 0; fi

echo "== NCCL communicator tests"
mpi=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader)
gpus=$(nvidia-smi -L | wc -l)
"${mpi[@]}" -np 1 "$build/tests/nccl_comm"
if [ "$gpus" -ge 2 ]; then "${mpi[@]}" -np 2 "$build/tests/nccl_comm"; fi

echo "== CPU vs CUDA loss curves (fp32, MoE)"
[ -f "$data/train/manifest.json" ] || { echo "gpu-check: no dataset at $data (run launch/demo.sh once, or set MOELAB_GPU_DATA)" >&2; exit 2; }
out=$(mktemp -d)
for device in cpu cuda; do
  "$build/bin/moelab" train configs/moe-small.toml --set data.dir="$data" \
    --set train.device=$device --set train.precision=fp32 --set train.max_steps=20 --set optim.warmup_steps=5 \
    --set log.interval=1 --set eval.interval=0 --set log.progress=off \
    --set train.out_dir="$out/$device" >"$out/$device.log" 2>&1 ||
    { cat "$out/$device.log"; exit 1; }
done
"$python" - "$out/cpu/metrics.jsonl" "$out/cuda/metrics.jsonl" <<'PY'
import json, sys
cpu, gpu = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:])
rel = [abs(a - b) / abs(a) for a, b in zip(cpu, gpu)]
print(f"steps {len(cpu)}  first loss cpu {cpu[0]:.6f} cuda {gpu[0]:.6f}  last cpu {cpu[-1]:.6f} cuda {gpu[-1]:.6f}")
print("relative difference per step:", " ".join(f"{r:.1e}" for r in rel))
# The first loss comes from identical weights: only the kernels' rounding differs.
# Later ones follow trajectories that rounding pulls apart a little more each step.
ok = len(cpu) == len(gpu) == 20 and rel[0] <= 1e-5 and max(rel) <= 1e-3
sys.exit(0 if ok else "gpu-check: CPU and CUDA curves differ (first step > 1e-5 or any > 1e-3)")
PY

echo "== grouped experts on CUDA against one expert at a time"
"$build/tests/test_model" --gtest_filter='Experts.*OnCuda'

echo "== bench_model on the GPU"
"$build/bin/bench_model" --steps 10 --threads 1 --device cuda
echo "== fine-grained against coarse experts at equal active FLOPs, batch 16 and 128"
MOELAB_BUILD_DIR="$build" bench/granularity.sh 10 1 --device cuda
MOELAB_BUILD_DIR="$build" bench/granularity.sh 10 1 --device cuda --batch 128
echo "gpu-check: PASS"
