#!/usr/bin/env bash
# A checkpoint that cannot be written (the run folder's file system is full):
# on a tmpfs sized to hold the run and one checkpoint, a 2-rank run checkpoints
# at step 2, then fails at step 4. It must end with exit 1 and the system's
# reason ("No space left on device"), not crash, leave no partial folder, and
# leave step 2 the checkpoint `--resume auto` takes; with checkpoint.async the
# same. (Which write runs out of space, a file's HDF5 structure or its values
# on the background thread, depends on the ranks' timing; a failure of the
# background write itself: TwoRankJob.ABackgroundWriteThatFailsEndsTheRun.)
#   full_disk_test.sh MOELAB_BINARY
# Exits 0 when all pass, 1 when one fails, 77 (skipped) where a tmpfs cannot be
# mounted in a private mount namespace (not root).
set -uo pipefail

moelab=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cluster/test_lib.sh
source "$here/test_lib.sh"

dir=$(shared_temp_dir full_disk)
trap 'cd /; rm -rf "$dir"' EXIT
cd "$dir" || exit 1
err=$(unshare --mount --propagation private sh -c "mkdir -p probe && mount -t tmpfs -o size=1m tmpfs probe" 2>&1) ||
  { echo "full_disk_test: SKIP (cannot mount a tmpfs here: $err)"; exit 77; }

write_tiny_moe_job "$moelab" || exit 1
cat tiny.toml - >run.toml <<TOML
[parallel]
ep = 2
[train]
precision = "fp32"
batch_seqs = 4
threads = 1
max_steps = 6
[optim]
warmup_steps = 1
[eval]
interval = 0
max_windows = 4
[checkpoint]
interval = 2
keep = 10
TOML
sed -i 's/^\[log\]$/[log]\ntensorboard = false/' run.toml
mpi=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader -np 2)

# How much the run folder holds after its first checkpoint, and one checkpoint.
"${mpi[@]}" "$moelab" train run.toml --out probe_run --set train.max_steps=2 >probe.log 2>&1 ||
  { cat probe.log; exit 1; }
checkpoint=$(du -sb probe_run/checkpoints/step_00000002 | cut -f1)
folder=$(du -sb probe_run | cut -f1)
size=$(( (folder + checkpoint / 2) / 4096 * 4096 + 8 * 4096 ))
echo "run folder $folder bytes after one checkpoint of $checkpoint bytes: a tmpfs of $size bytes"

full() {  # NAME ASYNC: runs into the small file system, then copies the folder out
  local name=$1 async=$2
  unshare --mount --propagation private bash -c '
    mkdir -p small && mount -t tmpfs -o size='"$size"' tmpfs small || exit 99
    "$@" --out small/run >'"$name"'.log 2>&1
    rc=$?
    cp -r small/run '"$name"'
    exit $rc' full "${mpi[@]}" "$moelab" train run.toml --set checkpoint.async="$async"
}
ends_cleanly() {  # NAME ASYNC REASON: REASON a pattern of the message expected
  local name=$1 reason=$3 rc=0
  full "$@" || rc=$?
  echo "$name: exit $rc"
  grep -m1 "No space" "$name.log" | cut -c1-300
  ((rc == 1)) || { tail -n 30 "$name.log"; return 1; }
  grep -q "checkpoint at step 4 failed: .*$reason" "$name.log" || return 1
  ! grep -q "internal error\|Segmentation\|core dumped" "$name.log" || return 1
  [[ -d $name/checkpoints/step_00000002 && ! -e $name/checkpoints/step_00000004.tmp &&
    ! -e $name/checkpoints/step_00000004 ]] || { ls -la "$name/checkpoints"; return 1; }
  # On a file system with room, the run resumes from step 2.
  "${mpi[@]}" "$moelab" train run.toml --out "$name" --resume auto >>"$name.log" 2>&1 ||
    { tail -n 20 "$name.log"; return 1; }
  grep -q "step_00000002 (step 2)" "$name.log" && [[ -f $name/DONE ]]
}
check "a full disk at the step-4 checkpoint: exit 1 with the reason, step 2 kept and resumed" \
  ends_cleanly sync false "No space left on device"
check "... the same with checkpoint.async" ends_cleanly async true "No space left on device"

echo "full_disk_test: $passed passed, $failed failed"
((failed == 0))
