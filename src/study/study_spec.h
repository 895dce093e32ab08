// A study file: one base config, named variants as overrides of it (or dense
// models matched to another variant's parameter count), optionally a grid of
// variants swept over axes, a list of seeds, how each run is launched and
// where the runs go. Parsing is strict: an unknown key
// is an InputError naming file:line:col with a did-you-mean.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moelab {

// One config override taken from the study file: `key=value` (value in TOML
// syntax, as `--set` takes it) plus where it was written, for messages.
struct StudyOverride {
  std::string assignment;
  std::string origin;  // "file:line:col"
};

// A dense variant sized to match another (MoE) variant's parameter count; or,
// with an activation rate, an MoE (top_k / experts = rate, d_expert solved)
// matching another variant's total (config/param_count.h: match_moe_total).
struct VariantMatch {
  std::string variant;            // the variant it matches
  std::string target = "active";  // "active" | "total"
  std::string knob = "d_ff";      // "d_ff" | "d_model"
  double activation_rate = 0;     // > 0: an MoE at this rate (target "total")
  int64_t experts = 0;            // with activation_rate: experts per layer
  std::string origin;
};

// One grid point's coordinate: an axis and the label of its value there.
using AxisValue = std::pair<std::string, std::string>;

// How a staged variant's start is converted from its parent's dense checkpoint:
// `moelab upcycle` (method "upcycle") or `moelab convert --method M`, with the
// options as those commands take them (src/convert/convert.h). The run's seed
// is the conversion's.
struct StageConversion {
  std::string method;  // "upcycle" | "random" | "cluster" | "dot"
  int64_t experts = 0;
  int64_t top_k = 0;
  int64_t granularity = 1;  // upcycle: experts are d_ff / granularity wide
  // Every option as its command-line flag and value, e.g. {"--top-k", "2"}.
  std::vector<std::pair<std::string, std::string>> flags;
  std::string origin;
};

// A staged variant starts each seed's run from the same seed's run of
// another variant: its checkpoint at `step` (0: the last), converted or not.
struct VariantFrom {
  std::string variant;
  int64_t step = 0;
  std::optional<StageConversion> convert;
  std::string origin;
};

struct VariantSpec {
  std::string name;
  std::vector<StudyOverride> set;  // applied after study.set (and after matching)
  std::optional<VariantMatch> match;
  std::optional<VariantFrom> from;  // a staged variant (set applies to the parent's config)
  std::vector<AxisValue> point;     // grid variants (and matches to them): the axis values
  std::string origin;
};

// A swept axis ([[axis]]): either one config key and its values, or a name
// whose values each set several keys (parallel arrays in `set`). The study's
// grid is the cartesian product of its axes: one variant per point, named from
// the values, e.g. "num_experts16_granularity2".
struct AxisSpec {
  std::string name;                              // the config key, or the axis name
  std::vector<std::string> labels;               // each value as written
  std::vector<std::vector<StudyOverride>> sets;  // the overrides of each value
  std::string origin;
};

struct SlurmSpec {
  std::string partition;
  std::string account;
  std::string time;  // sbatch --time, e.g. "01:00:00"
  int64_t nodes = 1;
  int64_t ntasks_per_node = 0;  // 0 = study.ranks / nodes
  int64_t gpus_per_node = 0;
  int64_t cpus_per_task = 0;       // 0 = study.threads
  std::string launcher = "srun";   // "srun" (srun --mpi=pmix) | "mpirun"
  std::vector<std::string> extra;  // further "#SBATCH" options, e.g. "--qos=low"
};

struct StudySpec {
  std::string file;  // the study file as given
  std::string name;
  std::string base;  // base config path, resolved relative to the study file
  std::vector<int64_t> seeds;
  std::string out_root;  // absolute
  int64_t ranks = 1;     // MPI ranks per run
  int64_t threads = 1;   // OMP/torch threads per rank
  int64_t parallel_runs = 1;
  // Runs sharing each GPU, as concurrent processes: on Slurm k runs per array
  // task on the same GPUs; locally k runs per GPU of this machine. Runs at this
  // scale leave most of a GPU idle.
  int64_t runs_per_gpu = 1;
  std::vector<StudyOverride> set;
  std::vector<AxisSpec> axes;
  std::vector<VariantSpec> variants;  // the grid points first, then the [[variant]]s
  // [study] compare = [["a", "b"], ...]: pairs the report gives per-seed gaps
  // for (a - b), after those of the matched variants.
  std::vector<std::pair<std::string, std::string>> compare;
  SlurmSpec slurm;
};

StudySpec load_study(const std::string& path);
// The same from text; `path` names it in messages and anchors relative paths.
StudySpec parse_study(const std::string& text, const std::string& path);

}  // namespace moelab
