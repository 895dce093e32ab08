#include "study/study_plan.h"

#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "config/load.h"
#include "config/param_count.h"
#include "study/stage_plan.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void apply_all(Config& cfg, const std::vector<StudyOverride>& overrides,
               const std::string& context) {
  for (const auto& o : overrides) {
    try {
      apply_override(cfg, o.assignment);
    } catch (const InputError& e) {
      throw InputError(o.origin + ": " + context + ": " + e.what());
    }
  }
}

int64_t batch_tokens(const Config& cfg) {
  return cfg.train.batch_tokens > 0 ? cfg.train.batch_tokens
                                    : cfg.train.batch_seqs * cfg.model.seq_len;
}

// Each variant's config, resolved in dependency order: a matched variant after
// the variant it matches (its config before the budget), a staged one after
// its parent (the parent's config as it trains, budget applied), so a match
// sees a finished MoE config and a child its parent's steps.
class VariantResolver {
 public:
  explicit VariantResolver(const StudySpec& spec) : spec_(spec), base_(load_config(spec.base)) {}

  // The config before the compute budget (as a match reads it).
  const Config& resolved(const VariantSpec& v) {
    if (auto it = resolved_.find(v.name); it != resolved_.end()) return it->second;
    if (!visiting_.insert(v.name).second) {
      throw InputError((v.from ? v.from->origin : v.match->origin) + ": variant '" + v.name +
                       "' depends, through from or match, on a variant that depends on '" + v.name +
                       "': a cycle");
    }
    Config cfg = v.match ? matched(v) : v.from ? staged(v) : plain(v);
    visiting_.erase(v.name);
    return resolved_[v.name] = std::move(cfg);
  }

  // The config as the variant trains: a budget buys steps of its FLOPs.
  Config trained(const VariantSpec& v) {
    Config cfg = resolved(v);
    try {
      apply_compute_budget(cfg);
    } catch (const InputError& e) {
      throw InputError(spec_.file + ": variant '" + v.name + "': " + e.what());
    }
    return cfg;
  }

  const VariantSpec& spec_of(const std::string& name) const {
    for (const auto& v : spec_.variants)
      if (v.name == name) return v;
    throw InputError(spec_.file + ": no variant '" + name + "'");
  }

  std::map<std::string, MatchOutcome> matches;

 private:
  Config plain(const VariantSpec& v) const {
    Config cfg = base_;
    apply_all(cfg, spec_.set, "study.set");
    apply_all(cfg, v.set, "variant '" + v.name + "'");
    return cfg;
  }

  Config matched(const VariantSpec& v);

  // The parent's trained config (its budget spent), converted if asked, then
  // the variant's own overrides (data, schedule, steps).
  Config staged(const VariantSpec& v) {
    const std::string context = "variant '" + v.name + "'";
    Config cfg = trained(spec_of(v.from->variant));
    cfg.train.compute_budget = 0;
    if (v.from->convert) cfg = converted_config(cfg, *v.from->convert, context);
    apply_all(cfg, v.set, context);
    return cfg;
  }

  const StudySpec& spec_;
  const Config base_;
  std::map<std::string, Config> resolved_;
  std::set<std::string> visiting_;
};

Config VariantResolver::matched(const VariantSpec& v) {
  const VariantSpec& target = spec_of(v.match->variant);
  // A matched variant listed later is not resolved yet: matches do not chain.
  if (target.match && !resolved_.count(target.name)) {
    throw InputError(v.match->origin + ": variant '" + v.name + "' matches '" + v.match->variant +
                     "', which is itself matched; match a variant that is not");
  }
  const Config& moe = resolved(target);
  MatchResult r;
  if (v.match->activation_rate > 0) {
    try {
      r = match_moe_total(moe, v.match->experts, v.match->activation_rate, count_params(moe).total);
    } catch (const InputError& e) {
      throw InputError(v.match->origin + ": variant '" + v.name + "': " + e.what());
    }
  } else if (!moe.moe.enabled) {
    throw InputError(v.match->origin + ": variant '" + v.name + "' matches '" + v.match->variant +
                     "', which is a dense model; match needs an MoE " +
                     "variant (moe.enabled = true) that is not itself matched");
  } else {
    r = match_dense(moe, v.match->target, v.match->knob);
  }
  Config cfg = r.dense;
  // The variant's own overrides come last (e.g. a different learning rate).
  apply_all(cfg, v.set, "variant '" + v.name + "'");
  const int64_t total = count_params(cfg).total;
  matches[v.name] =
      MatchOutcome{v.match->variant, v.match->target, v.match->knob,
                   r.target,         total,           double(total - r.target) / double(r.target)};
  return cfg;
}

std::string absolute_path(const std::string& p) {
  return p.empty() ? p : fs::absolute(p).lexically_normal().string();
}

std::string hash_runs(const StudyPlan& plan) {
  std::string text = plan.name + "\n";
  for (const auto& r : plan.runs) {
    text += r.variant + " " + std::to_string(r.seed) + "\n" + to_toml(r.cfg) + "\n";
  }
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx",
           static_cast<unsigned long long>(XXH64(text.data(), text.size(), 0)));
  return hex;
}

}  // namespace

namespace {

// A run's config lives in its run folder, so the folders it reads must not be
// relative.
void make_data_paths_absolute(Config& cfg) {
  cfg.data.dir = absolute_path(cfg.data.dir);
  for (auto& source : cfg.data.sources) source.dir = absolute_path(source.dir);
  for (auto& set : cfg.eval.sets) set.dir = absolute_path(set.dir);
  for (auto& task : cfg.eval.tasks) task.dir = absolute_path(task.dir);
}

PlannedVariant planned_variant_of(const VariantSpec& v, const Config& cfg) {
  const ParamCounts counts = count_params(cfg);
  PlannedVariant pv{v.name,
                    cfg.moe.enabled,
                    counts.total,
                    counts.active,
                    cfg.train.max_steps * batch_tokens(cfg),
                    std::nullopt,
                    v.point,
                    model_flops_per_token(cfg)};
  if (cfg.moe.enabled) {
    pv.activation_rate = double(cfg.moe.top_k) / double(cfg.moe.num_experts);
    pv.top_k = cfg.moe.top_k;
  }
  pv.unique_tokens = cfg.data.max_unique_tokens;
  return pv;
}

// A staged variant's lineage: its parent's stage + 1 and what the parent chain
// trained up to the start (the parent's own tokens pro rata to from_step).
void add_lineage(PlannedVariant& pv, const VariantSpec& v, VariantResolver& resolver,
                 std::map<std::string, PlannedVariant>& lineage) {
  const VariantSpec& parent_spec = resolver.spec_of(v.from->variant);
  const Config parent_cfg = resolver.trained(parent_spec);
  if (!lineage.count(parent_spec.name)) {
    PlannedVariant parent = planned_variant_of(parent_spec, parent_cfg);
    if (parent_spec.from) add_lineage(parent, parent_spec, resolver, lineage);
    lineage[parent_spec.name] = parent;
  }
  const PlannedVariant& parent = lineage.at(parent_spec.name);
  pv.parent = parent.name;
  pv.from_step = start_step(parent_cfg, *v.from, "variant '" + v.name + "'");
  pv.convert = v.from->convert ? v.from->convert->method : "";
  pv.stage = parent.stage + 1;
  const int64_t tokens = pv.from_step * batch_tokens(parent_cfg);
  pv.inherited_tokens = parent.inherited_tokens + tokens;
  pv.inherited_flops = parent.inherited_flops + double(tokens) * parent.flops_per_token;
}

PlannedRun plan_run(const StudySpec& spec, const VariantSpec& v, const PlannedVariant& pv,
                    const Config& cfg, int64_t seed) {
  PlannedRun run;
  run.variant = v.name;
  run.seed = seed;
  run.dir = spec.out_root + "/" + v.name + "/seed" + std::to_string(seed);
  run.config = run.dir + "/config.toml";
  run.cfg = cfg;
  run.cfg.train.seed = seed;
  run.cfg.train.out_dir = run.dir;
  run.cfg.train.threads = spec.threads;
  make_data_paths_absolute(run.cfg);
  if (v.from) plan_start(run, *v.from, pv.from_step, spec.out_root);
  try {
    validate(run.cfg, int(spec.ranks));
  } catch (const InputError& e) {
    throw InputError(spec.file + ": variant '" + v.name + "', seed " + std::to_string(seed) +
                     " with study.ranks = " + std::to_string(spec.ranks) + ": " + e.what());
  }
  return run;
}

}  // namespace

StudyPlan plan_study(const StudySpec& spec) {
  StudyPlan plan;
  plan.name = spec.name;
  plan.source = spec.file;
  plan.out_root = spec.out_root;
  plan.seeds = spec.seeds;
  plan.ranks = spec.ranks;
  plan.threads = spec.threads;
  plan.runs_per_gpu = spec.runs_per_gpu;
  for (const auto& axis : spec.axes) plan.axes.push_back(axis.name);
  VariantResolver resolver(spec);
  std::map<std::string, PlannedVariant> lineage;
  for (const auto& v : spec.variants) {
    const Config cfg = resolver.trained(v);
    PlannedVariant pv = planned_variant_of(v, cfg);
    if (v.from) add_lineage(pv, v, resolver, lineage);
    if (v.match) {
      pv.match = resolver.matches.at(v.name);
      plan.pairs.push_back({v.name, v.match->variant});
    }
    plan.variants.push_back(pv);
    for (int64_t seed : spec.seeds) plan.runs.push_back(plan_run(spec, v, pv, cfg, seed));
  }
  for (const auto& [a, b] : spec.compare) plan.pairs.push_back({a, b});
  plan.hash = hash_runs(plan);
  return plan;
}

const PlannedVariant& planned_variant(const StudyPlan& plan, const std::string& name) {
  for (const auto& v : plan.variants)
    if (v.name == name) return v;
  throw InputError(plan.source + ": the study has no variant '" + name + "'");
}

std::string manifest_json(const StudyPlan& plan) {
  json j;
  j["name"] = plan.name;
  j["source"] = plan.source;
  j["hash"] = plan.hash;
  j["out_root"] = plan.out_root;
  j["seeds"] = plan.seeds;
  j["ranks"] = plan.ranks;
  j["threads"] = plan.threads;
  j["axes"] = plan.axes;
  j["variants"] = json::array();
  for (const auto& v : plan.variants) {
    json jv = {{"name", v.name},
               {"moe", v.moe},
               {"total_params", v.total_params},
               {"active_params", v.active_params},
               {"tokens", v.tokens},
               {"flops_per_token", v.flops_per_token},
               {"activation_rate", v.activation_rate},
               {"top_k", v.top_k},
               {"unique_tokens", v.unique_tokens},
               {"point", json::array()}};
    for (const auto& [axis, label] : v.point) jv["point"].push_back({axis, label});
    if (!v.parent.empty()) {
      jv["from"] = {{"variant", v.parent},
                    {"step", v.from_step},
                    {"convert", v.convert},
                    {"stage", v.stage},
                    {"inherited_tokens", v.inherited_tokens},
                    {"inherited_flops", v.inherited_flops}};
    }
    if (v.match) {
      jv["match"] = {{"variant", v.match->variant},
                     {"target", v.match->target},
                     {"knob", v.match->knob},
                     {"target_params", v.match->target_params},
                     {"dense_total", v.match->dense_total},
                     {"mismatch", v.match->mismatch}};
    }
    j["variants"].push_back(jv);
  }
  j["runs"] = json::array();
  for (const auto& r : plan.runs) {
    j["runs"].push_back({{"variant", r.variant}, {"seed", r.seed}, {"dir", r.dir}});
  }
  j["pairs"] = json::array();
  for (const auto& p : plan.pairs) j["pairs"].push_back({{"a", p.a}, {"b", p.b}});
  return j.dump(2) + "\n";
}

namespace {

// One variant of study.json; manifests written before grids, FLOPs or stages
// existed lack those keys.
PlannedVariant variant_from_json(const json& jv) {
  PlannedVariant v{jv.at("name"),
                   jv.at("moe"),
                   jv.at("total_params"),
                   jv.at("active_params"),
                   jv.at("tokens"),
                   std::nullopt,
                   {},
                   jv.value("flops_per_token", 0.0)};
  v.activation_rate = jv.value("activation_rate", 0.0);
  v.top_k = jv.value("top_k", int64_t{0});
  v.unique_tokens = jv.value("unique_tokens", int64_t{0});
  for (const auto& p : jv.value("point", json::array())) v.point.emplace_back(p.at(0), p.at(1));
  if (jv.contains("from")) {
    const auto& f = jv["from"];
    v.parent = f.at("variant");
    v.from_step = f.at("step");
    v.convert = f.at("convert");
    v.stage = f.at("stage");
    v.inherited_tokens = f.at("inherited_tokens");
    v.inherited_flops = f.at("inherited_flops");
  }
  if (jv.contains("match")) {
    const auto& m = jv["match"];
    v.match = MatchOutcome{m.at("variant"),       m.at("target"),      m.at("knob"),
                           m.at("target_params"), m.at("dense_total"), m.at("mismatch")};
  }
  return v;
}

}  // namespace

StudyPlan read_study_manifest(const std::string& study_dir) {
  const std::string path = study_dir + "/study.json";
  const std::string text = read_text_file(path, "study manifest (is this a study folder?)");
  StudyPlan plan;
  try {
    const json j = json::parse(text);
    plan.name = j.at("name");
    plan.source = j.at("source");
    plan.hash = j.at("hash");
    plan.out_root = j.at("out_root");
    plan.seeds = j.at("seeds").get<std::vector<int64_t>>();
    plan.ranks = j.at("ranks");
    plan.threads = j.at("threads");
    // Manifests written before grids existed have no axes, points or FLOPs.
    plan.axes = j.value("axes", std::vector<std::string>{});
    for (const auto& jv : j.at("variants")) plan.variants.push_back(variant_from_json(jv));
    for (const auto& jr : j.at("runs")) {
      PlannedRun r;
      r.variant = jr.at("variant");
      r.seed = jr.at("seed");
      r.dir = jr.at("dir");
      r.config = r.dir + "/config.toml";
      plan.runs.push_back(r);
    }
    for (const auto& jp : j.at("pairs")) plan.pairs.push_back({jp.at("a"), jp.at("b")});
  } catch (const json::exception& e) {
    throw InputError(path + ": not a valid study manifest (" + e.what() + ")");
  }
  // The folder may have moved since the manifest was written: runs are found
  // relative to it, not at their recorded absolute paths.
  for (auto& r : plan.runs) {
    r.dir = study_dir + "/" + r.variant + "/seed" + std::to_string(r.seed);
    r.config = r.dir + "/config.toml";
  }
  plan.out_root = study_dir;
  return plan;
}

void check_out_root(const StudyPlan& plan) {
  const std::string path = plan.out_root + "/study.json";
  if (!fs::exists(path)) return;
  const StudyPlan existing = read_study_manifest(plan.out_root);
  if (existing.hash != plan.hash) {
    throw InputError(plan.source + ": study.out_root " + plan.out_root +
                     " already holds a different study ('" + existing.name + "' from " +
                     existing.source + ", hash " + existing.hash + "; this one is '" + plan.name +
                     "', hash " + plan.hash + "); choose another out_root or remove the old runs");
  }
}

void prepare_out_root(const StudyPlan& plan) {
  check_out_root(plan);
  const std::string manifest = plan.out_root + "/study.json";
  if (!fs::exists(manifest)) write_file_atomically(manifest, manifest_json(plan));
  for (const auto& r : plan.runs) write_file_atomically(r.config, to_toml(r.cfg));
}

}  // namespace moelab
