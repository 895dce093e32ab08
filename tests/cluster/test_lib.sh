# Sourced by the cluster tests: a folder every host sees, the tally of their
# checks (tests/bench's too), and the tiny MoE job the training tests run.

# A new folder under $TMPDIR or /var/tmp: every host sees it, which is not true
# of /tmp (each host has its own).
shared_temp_dir() {  # NAME
  local base=${TMPDIR:-/var/tmp}
  [[ $(realpath -m "$base") == /tmp* ]] && base=/var/tmp
  mktemp -d "$base/$1.XXXXXX"
}

passed=0 failed=0
check() {  # description, then a command that succeeds when the check passes
  local what=$1; shift
  if "$@"; then echo "PASS: $what"; ((passed++))
  else echo "FAIL: $what"; ((failed++)); fi
}

# In the current folder: corpus.txt, data/ prepared from it by MOELAB (run
# through the optional launcher words before it, e.g. a host's `run`), and
# tiny.toml, the [model], [moe], [data] and [log] sections of a 2-layer MoE
# with 4 experts; each test adds the sections it varies.
write_tiny_moe_job() {  # MOELAB [launcher words...]
  local moelab=$1; shift
  local d
  for d in $(seq 40); do
    echo "story $d: the cat sat on the mat and looked at the moon."
    echo "<|endoftext|>"
  done >corpus.txt
  "$@" "$moelab" prep --input corpus.txt --val-count 4 --vocab-size 80 --out data >prep.log 2>&1 ||
    { cat prep.log; return 1; }
  cat >tiny.toml <<TOML
[model]
vocab_size = 80
d_model = 32
n_layers = 2
n_heads = 2
d_ff = 64
seq_len = 16
[moe]
enabled = true
num_experts = 4
d_expert = 32
[data]
dir = "$PWD/data"
[log]
interval = 1
progress = "off"
TOML
}
