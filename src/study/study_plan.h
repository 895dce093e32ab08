// A study resolved into its runs: one fully resolved Config per (variant, seed),
// parameter counts, and for matched variants the achieved mismatch. Also the
// study manifest (study.json in out_root) that the launchers write and the
// report reads, so a report needs only the study folder.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "study/study_spec.h"

namespace moelab {

struct MatchOutcome {
  std::string variant;  // the MoE variant matched
  std::string target;   // "active" | "total"
  std::string knob;     // "d_ff" | "d_model"
  int64_t target_params = 0;
  int64_t dense_total = 0;
  double mismatch = 0.0;  // (dense_total - target_params) / target_params
};

struct PlannedVariant {
  std::string name;
  bool moe = false;
  int64_t total_params = 0;
  int64_t active_params = 0;
  int64_t tokens = 0;  // train.max_steps * global batch tokens
  std::optional<MatchOutcome> match;
  std::vector<AxisValue> point;  // its grid coordinates (empty off the grid)
  double flops_per_token = 0;    // model_flops_per_token (config/param_count.h)
  double activation_rate = 0;    // moe.top_k / moe.num_experts (0 for a dense model)
  int64_t top_k = 0;             // moe.top_k (0 for a dense model)
  int64_t unique_tokens = 0;     // data.max_unique_tokens (0: the whole training set)
  // A staged variant: each run starts from `parent`'s run of its seed at
  // from_step, converted by `convert` ("" for none). The stage is 0 for a
  // fresh start, the parent's + 1 otherwise; what the parent chain trained
  // before the start is inherited (tokens and FLOPs, model_flops_per_token).
  std::string parent = "";
  int64_t from_step = 0;
  std::string convert = "";
  int64_t stage = 0;
  int64_t inherited_tokens = 0;
  double inherited_flops = 0;
  double own_flops() const { return double(tokens) * flops_per_token; }
};

struct PlannedRun {
  std::string variant;
  int64_t seed = 0;
  std::string dir;     // <out_root>/<variant>/seed<seed>
  std::string config;  // <dir>/config.toml
  Config cfg;          // the resolved config written there
  // A staged run: its parent's run of the same seed, and for a converted start
  // the `moelab` arguments that write cfg.train.init_from (upcycle or convert).
  std::string parent_dir;
  std::vector<std::string> start_args;
};

// A paired comparison: `a` minus `b`, seed by seed (every matched variant
// against the variant it matches).
struct VariantPair {
  std::string a;
  std::string b;
  std::string label() const { return a + " - " + b; }
};

struct StudyPlan {
  std::string name;
  std::string source;  // the study file
  std::string out_root;
  std::vector<int64_t> seeds;
  int64_t ranks = 1;
  int64_t threads = 1;
  int64_t runs_per_gpu = 1;       // study.runs_per_gpu
  std::vector<std::string> axes;  // the swept axes, in study order
  std::vector<PlannedVariant> variants;
  std::vector<PlannedRun> runs;  // variant-major (study order), seeds in study order
  std::vector<VariantPair> pairs;
  std::string hash;  // identifies the study's runs: name + every resolved config
};

// The variant `name` of the plan (InputError if none).
const PlannedVariant& planned_variant(const StudyPlan& plan, const std::string& name);

// Resolves every run; throws InputError for configs that do not validate.
StudyPlan plan_study(const StudySpec& spec);

// study.json: the plan without the configs (each run's config.toml holds it).
std::string manifest_json(const StudyPlan& plan);
StudyPlan read_study_manifest(const std::string& study_dir);

// InputError if out_root already holds study.json of a different study.
void check_out_root(const StudyPlan& plan);
// check_out_root, then writes study.json (if new) and every run's config.toml.
void prepare_out_root(const StudyPlan& plan);

}  // namespace moelab
