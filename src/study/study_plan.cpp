#include "study/study_plan.h"

#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "config/load.h"
#include "config/param_count.h"
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

// Each variant's config before the per-seed settings; matched variants after
// the variants they match, so a match always sees a finished MoE config.
std::map<std::string, Config> resolve_variants(const StudySpec& spec,
                                               std::map<std::string, MatchOutcome>& matches) {
  const Config base = load_config(spec.base);
  std::map<std::string, Config> resolved;
  for (const auto& v : spec.variants) {
    if (v.match) continue;
    Config cfg = base;
    apply_all(cfg, spec.set, "study.set");
    apply_all(cfg, v.set, "variant '" + v.name + "'");
    resolved[v.name] = cfg;
  }
  for (const auto& v : spec.variants) {
    if (!v.match) continue;
    const auto it = resolved.find(v.match->variant);
    if (it == resolved.end()) {
      throw InputError(v.match->origin + ": variant '" + v.name + "' matches '" + v.match->variant +
                       "', which is itself matched; match a variant that is not");
    }
    MatchResult r;
    if (v.match->activation_rate > 0) {
      try {
        r = match_moe_total(it->second, v.match->experts, v.match->activation_rate,
                            count_params(it->second).total);
      } catch (const InputError& e) {
        throw InputError(v.match->origin + ": variant '" + v.name + "': " + e.what());
      }
    } else if (!it->second.moe.enabled) {
      throw InputError(v.match->origin + ": variant '" + v.name + "' matches '" + v.match->variant +
                       "', which is a dense model; match needs an MoE " +
                       "variant (moe.enabled = true) that is not itself matched");
    } else {
      r = match_dense(it->second, v.match->target, v.match->knob);
    }
    Config cfg = r.dense;
    // The variant's own overrides come last (e.g. a different learning rate).
    apply_all(cfg, v.set, "variant '" + v.name + "'");
    const int64_t total = count_params(cfg).total;
    matches[v.name] = MatchOutcome{
        v.match->variant, v.match->target, v.match->knob,
        r.target,         total,           double(total - r.target) / double(r.target)};
    resolved[v.name] = cfg;
  }
  return resolved;
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
  std::map<std::string, MatchOutcome> matches;
  const auto resolved = resolve_variants(spec, matches);
  for (const auto& v : spec.variants) {
    Config cfg = resolved.at(v.name);
    // After every override: a budget buys steps of this variant's FLOPs.
    try {
      apply_compute_budget(cfg);
    } catch (const InputError& e) {
      throw InputError(spec.file + ": variant '" + v.name + "': " + e.what());
    }
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
    if (v.match) {
      pv.match = matches.at(v.name);
      plan.pairs.push_back({v.name, v.match->variant});
    }
    plan.variants.push_back(pv);
    for (int64_t seed : spec.seeds) {
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
      try {
        validate(run.cfg, int(spec.ranks));
      } catch (const InputError& e) {
        throw InputError(spec.file + ": variant '" + v.name + "', seed " + std::to_string(seed) +
                         " with study.ranks = " + std::to_string(spec.ranks) + ": " + e.what());
      }
      plan.runs.push_back(std::move(run));
    }
  }
  plan.hash = hash_runs(plan);
  return plan;
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
    for (const auto& jv : j.at("variants")) {
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
      if (jv.contains("match")) {
        const auto& m = jv["match"];
        v.match = MatchOutcome{m.at("variant"),       m.at("target"),      m.at("knob"),
                               m.at("target_params"), m.at("dense_total"), m.at("mismatch")};
      }
      plan.variants.push_back(v);
    }
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
