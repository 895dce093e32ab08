#include "study/study_spec.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "config/load.h"
#include "config/schema.h"
#include "study/stage_spec.h"
#include "study/toml_fields.h"
#include "util/error.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;

// TOML++ iterates keys sorted by name; file order is what the user wrote (and
// the order overrides apply in).
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(
    const toml::table& table) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (auto&& [key, value] : table) entries.emplace_back(&key, &value);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const auto& x = a.first->source().begin;
    const auto& y = b.first->source().begin;
    return x.line != y.line ? x.line < y.line : x.column < y.column;
  });
  return entries;
}

// A default config whose table lists hold the entry `key` names, if it names
// one ("eval.tasks[1].limit": two [[eval.tasks]]), so that an entry's key checks.
Config probe_for(const std::string& key) {
  Config probe;
  for (auto& list : table_lists(probe)) {
    const std::string prefix = list.key + "[";
    if (key.rfind(prefix, 0) != 0) continue;
    const char* index = key.c_str() + prefix.size();
    if (std::isdigit(static_cast<unsigned char>(*index)))
      list.resize(std::strtoul(index, nullptr, 10) + 1);
  }
  return probe;
}

// `key=value` checked against the config schema here, so a typo fails before
// anything runs.
StudyOverride checked_override(const std::string& key, const toml::node& value,
                               const std::string& at, const std::string& context,
                               const std::string& file) {
  StudyOverride o{key + "=" + toml_literal(value, key, file), at};
  Config probe = probe_for(key);
  try {
    apply_override(probe, o.assignment);
  } catch (const InputError& e) {
    throw InputError(at + ": " + context + ": " + e.what());
  }
  return o;
}

// A `set` table of dotted config keys, e.g. { "moe.num_experts" = 4 }. Keys are
// checked against the config schema here so a typo fails before anything runs.
std::vector<StudyOverride> read_overrides(const toml::node& node, const std::string& context,
                                          const std::string& file) {
  std::vector<StudyOverride> out;
  for (const auto& [key_ptr, value_ptr] : in_file_order(as_table(node, context, file))) {
    const toml::key& key = *key_ptr;
    const toml::node& value = *value_ptr;
    const std::string name(key.str());
    const std::string at = where(key, file);
    if (value.is_table()) {
      throw InputError(at + ": " + context + ": '" + name +
                       "' is a table; write config keys quoted and dotted, e.g. "
                       "\"moe.num_experts\" = 4");
    }
    out.push_back(checked_override(name, value, at, context, file));
  }
  return out;
}

std::vector<int64_t> read_seeds(const toml::table& study, const std::string& file) {
  const toml::node* n = study.get("seeds");
  if (!n) throw InputError(file + ": study.seeds is missing; expected e.g. seeds = [0, 1, 2]");
  const toml::array* arr = n->as_array();
  if (!arr || arr->empty()) {
    throw InputError(where(*n, file) + ": study.seeds must be a non-empty array of integers");
  }
  std::vector<int64_t> seeds;
  for (const auto& s : *arr) {
    if (!s.is_integer() || s.as_integer()->get() < 0) {
      throw InputError(where(s, file) + ": study.seeds: expected integers >= 0");
    }
    const int64_t seed = s.as_integer()->get();
    if (std::find(seeds.begin(), seeds.end(), seed) != seeds.end()) {
      throw InputError(where(s, file) + ": study.seeds: seed " + std::to_string(seed) +
                       " appears twice; each seed is one run per variant");
    }
    seeds.push_back(seed);
  }
  return seeds;
}

void check_variant_name(const std::string& name, const std::string& at) {
  if (name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
          std::string::npos ||
      name[0] == '.') {
    throw InputError(at + ": variant name '" + name +
                     "' is used as a folder name; use letters, digits, '_', '-', '.'");
  }
}

// A value as a label: strings bare, numbers and booleans as TOML writes them.
std::string label_of(const toml::node& n, const std::string& key, const std::string& file) {
  if (auto* str = n.as_string()) return str->get();
  return toml_literal(n, key, file);
}

const toml::array& non_empty_array(const toml::node& n, const std::string& what,
                                   const std::string& file) {
  const toml::array* arr = n.as_array();
  if (!arr || arr->empty())
    throw InputError(where(n, file) + ": " + what + " must be a non-empty array");
  return *arr;
}

AxisSpec read_axis(const toml::node& node, const std::string& file) {
  const toml::table& t = as_table(node, "[[axis]]", file);
  check_keys(t, {"key", "name", "values", "set"}, "[[axis]]", file);
  AxisSpec axis;
  axis.origin = where(node, file);
  const std::string key = read_string(t, "key", "axis", file, false);
  const std::string name = read_string(t, "name", "axis", file, false);
  if (key.empty() == name.empty() || key.empty() != (t.get("set") != nullptr)) {
    throw InputError(axis.origin +
                     ": [[axis]] takes either key = \"<config key>\" and values, or name, "
                     "values and set = { \"<config key>\" = [one value per entry of values] }");
  }
  axis.name = key.empty() ? name : key;
  const toml::node* values_node = t.get("values");
  if (!values_node) throw InputError(axis.origin + ": [[axis]] '" + axis.name + "' has no values");
  const toml::array& values = non_empty_array(*values_node, "axis.values", file);
  const std::string context = "axis '" + axis.name + "'";
  for (const auto& v : values) {
    const std::string label = label_of(v, axis.name, file);
    if (std::find(axis.labels.begin(), axis.labels.end(), label) != axis.labels.end()) {
      throw InputError(where(v, file) + ": " + context + ": value " + label + " appears twice");
    }
    axis.labels.push_back(label);
    axis.sets.emplace_back();
    if (!key.empty())
      axis.sets.back().push_back(checked_override(key, v, where(v, file), context, file));
  }
  if (const toml::node* set = t.get("set")) {
    for (const auto& [k, column_ptr] : in_file_order(as_table(*set, context + ".set", file))) {
      const std::string config_key(k->str());
      const toml::node& column = *column_ptr;
      const toml::array& entries = non_empty_array(column, context + ".set." + config_key, file);
      if (entries.size() != values.size()) {
        throw InputError(where(column, file) + ": " + context + ".set.\"" + config_key + "\" has " +
                         std::to_string(entries.size()) + " entries for " +
                         std::to_string(values.size()) + " values");
      }
      for (size_t i = 0; i < entries.size(); ++i) {
        axis.sets[i].push_back(
            checked_override(config_key, entries[i], where(entries[i], file), context, file));
      }
    }
  }
  return axis;
}

std::vector<AxisSpec> read_axes(const toml::table& root, const std::string& file) {
  std::vector<AxisSpec> axes;
  const toml::node* n = root.get("axis");
  if (!n) return axes;
  const toml::array* arr = n->as_array();
  if (!arr) throw InputError(where(*n, file) + ": 'axis' must be an array of tables [[axis]]");
  for (const auto& a : *arr) {
    axes.push_back(read_axis(a, file));
    for (size_t i = 0; i + 1 < axes.size(); ++i) {
      if (axes[i].name == axes.back().name) {
        throw InputError(axes.back().origin + ": axis '" + axes.back().name + "' is swept twice");
      }
    }
  }
  return axes;
}

// Folder-safe: the axis name after its last '.', then the value.
std::string point_name(const std::vector<AxisValue>& point) {
  std::string name;
  for (const auto& [axis, label] : point) {
    std::string part = axis.substr(axis.rfind('.') + 1) + label;
    for (char& c : part) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '-';
    }
    name += (name.empty() ? "" : "_") + part;
  }
  return name;
}

// The cartesian product of the axes, the first axis varying slowest.
std::vector<VariantSpec> grid_variants(const std::vector<AxisSpec>& axes) {
  std::vector<VariantSpec> points(1);
  for (const auto& axis : axes) {
    std::vector<VariantSpec> next;
    for (const auto& p : points) {
      for (size_t i = 0; i < axis.labels.size(); ++i) {
        VariantSpec v = p;
        v.set.insert(v.set.end(), axis.sets[i].begin(), axis.sets[i].end());
        v.point.emplace_back(axis.name, axis.labels[i]);
        v.origin = axis.origin;
        next.push_back(std::move(v));
      }
    }
    points = std::move(next);
  }
  for (auto& p : points) p.name = point_name(p.point);
  return points;
}

VariantMatch read_match(const toml::node& node, const std::string& context,
                        const std::string& file) {
  const toml::table& t = as_table(node, context + ".match", file);
  check_keys(t, {"variant", "target", "knob", "activation_rate", "experts"}, context + ".match",
             file);
  VariantMatch m;
  m.variant = read_string(t, "variant", context + ".match", file, true);
  m.target = choice(t, "target", context + ".match", file, "active", {"active", "total"});
  m.knob = choice(t, "knob", context + ".match", file, "d_ff", {"d_ff", "d_model"});
  m.origin = where(node, file);
  if (const toml::node* rate = t.get("activation_rate")) {
    const double r = rate->value<double>().value_or(0.0);
    if (!(r > 0 && r <= 1) || m.target != "total" || !t.get("experts")) {
      throw InputError(where(*rate, file) + ": " + context +
                       ".match.activation_rate: expected a rate in (0, 1] with target = "
                       "\"total\" and experts = <experts per layer>");
    }
    m.activation_rate = r;
    m.knob = "d_expert";
    m.experts = read_int(t, "experts", context + ".match", file, 0, 1);
  }
  return m;
}

// `convert` converts the start `from` names; a variant is either staged or matched.
void check_stage_keys(const toml::table& t, const std::string& context, const std::string& file) {
  if (t.get("convert") && !t.get("from")) {
    throw InputError(where(*t.get("convert"), file) + ": " + context +
                     ".convert converts the checkpoint `from` names, but the variant has no "
                     "from = { variant = \"...\" }");
  }
  if (t.get("from") && t.get("match")) {
    throw InputError(where(*t.get("match"), file) + ": " + context +
                     " has both from and match; a staged variant takes its parent's model "
                     "(converted or not), so it cannot also be sized by a match");
  }
}

// Every `from` names another variant of the study (cycles: plan_study).
void check_parents(const std::vector<VariantSpec>& variants, const std::set<std::string>& names) {
  for (const auto& v : variants) {
    if (!v.from) continue;
    if (!names.count(v.from->variant)) {
      const std::string guess =
          did_you_mean(v.from->variant, std::vector<std::string>(names.begin(), names.end()));
      throw InputError(v.from->origin + ": variant '" + v.name + "' starts from variant '" +
                       v.from->variant + "', which the study does not define" +
                       (guess.empty() ? "" : "; did you mean '" + guess + "'?"));
    }
    if (v.from->variant == v.name) {
      throw InputError(v.from->origin + ": variant '" + v.name + "' cannot start from itself");
    }
  }
}

// The grid points, then each [[variant]]; a variant matching "*" becomes one
// matched variant per grid point, named <variant>_<point>.
std::vector<VariantSpec> read_variants(const toml::table& root, const std::vector<AxisSpec>& axes,
                                       const std::string& file) {
  std::vector<VariantSpec> variants;
  if (!axes.empty()) variants = grid_variants(axes);
  const std::vector<VariantSpec> grid = variants;
  const toml::node* n = root.get("variant");
  if (!n && variants.empty()) {
    throw InputError(file +
                     ": no [[variant]] tables and no [[axis]]; a study needs at least one "
                     "variant");
  }
  const toml::array* arr = n ? n->as_array() : nullptr;
  if (n && (!arr || arr->empty())) {
    throw InputError(where(*n, file) + ": 'variant' must be an array of tables [[variant]]");
  }
  std::set<std::string> names;
  for (const auto& v : variants) names.insert(v.name);
  auto add = [&](VariantSpec spec, const std::string& at) {
    check_variant_name(spec.name, at);
    if (!names.insert(spec.name).second) {
      throw InputError(at + ": variant '" + spec.name + "' is defined twice");
    }
    variants.push_back(std::move(spec));
  };
  static const toml::array none;
  for (const auto& v : arr ? *arr : none) {
    const toml::table& t = as_table(v, "[[variant]]", file);
    check_keys(t, {"name", "set", "match", "from", "convert"}, "[[variant]]", file);
    VariantSpec spec;
    spec.origin = where(v, file);
    spec.name = read_string(t, "name", "variant", file, true);
    const std::string at = where(*t.get("name"), file);
    const std::string context = "variant '" + spec.name + "'";
    if (const toml::node* s = t.get("set")) spec.set = read_overrides(*s, context + ".set", file);
    if (const toml::node* m = t.get("match")) spec.match = read_match(*m, context, file);
    if (t.get("from")) spec.from = read_variant_from(t, context, file);
    check_stage_keys(t, context, file);
    if (!spec.match || spec.match->variant != "*") {
      add(std::move(spec), at);
      continue;
    }
    if (grid.empty()) {
      throw InputError(spec.match->origin + ": " + context +
                       " matches \"*\" (every grid point), but the study has no [[axis]]");
    }
    for (const auto& point : grid) {
      VariantSpec matched = spec;
      matched.name = spec.name + "_" + point.name;
      matched.match->variant = point.name;
      matched.point = point.point;
      add(std::move(matched), at);
    }
  }
  check_parents(variants, names);
  for (const auto& v : variants) {
    if (!v.match) continue;
    if (!names.count(v.match->variant)) {
      std::vector<std::string> known(names.begin(), names.end());
      const std::string guess = did_you_mean(v.match->variant, known);
      throw InputError(v.match->origin + ": variant '" + v.name + "' matches variant '" +
                       v.match->variant + "', which the study does not define" +
                       (guess.empty() ? "" : "; did you mean '" + guess + "'?"));
    }
    if (v.match->variant == v.name) {
      throw InputError(v.match->origin + ": variant '" + v.name + "' cannot match itself");
    }
  }
  return variants;
}

// [study] compare: pairs of two different variants the study defines.
std::vector<std::pair<std::string, std::string>> read_compare(
    const toml::node& node, const std::vector<VariantSpec>& variants, const std::string& file) {
  std::vector<std::string> names;
  for (const auto& v : variants) names.push_back(v.name);
  const toml::array* pairs = node.as_array();
  if (!pairs) throw InputError(where(node, file) + ": study.compare must be a list of pairs");
  std::vector<std::pair<std::string, std::string>> compare;
  for (const toml::node& pair_node : *pairs) {
    const toml::array* pair = pair_node.as_array();
    if (!pair || pair->size() != 2 || !(*pair)[0].is_string() || !(*pair)[1].is_string()) {
      throw InputError(where(pair_node, file) +
                       ": study.compare: expected a pair of variant names [\"a\", \"b\"]");
    }
    const std::string a = *(*pair)[0].value<std::string>(), b = *(*pair)[1].value<std::string>();
    for (const std::string& name : {a, b}) {
      if (std::find(names.begin(), names.end(), name) != names.end()) continue;
      const std::string guess = did_you_mean(name, names);
      throw InputError(where(pair_node, file) + ": study.compare names variant '" + name +
                       "', which the study does not define" +
                       (guess.empty() ? "" : "; did you mean '" + guess + "'?"));
    }
    if (a == b) {
      throw InputError(where(pair_node, file) + ": study.compare: '" + a +
                       "' compared with itself");
    }
    compare.emplace_back(a, b);
  }
  return compare;
}

SlurmSpec read_slurm(const toml::node& node, const std::string& file) {
  const toml::table& t = as_table(node, "[slurm]", file);
  check_keys(t,
             {"partition", "account", "time", "nodes", "ntasks_per_node", "gpus_per_node",
              "cpus_per_task", "launcher", "extra"},
             "[slurm]", file);
  SlurmSpec s;
  s.partition = read_string(t, "partition", "slurm", file, false);
  s.account = read_string(t, "account", "slurm", file, false);
  s.time = read_string(t, "time", "slurm", file, false);
  s.nodes = read_int(t, "nodes", "slurm", file, 1, 1);
  s.ntasks_per_node = read_int(t, "ntasks_per_node", "slurm", file, 0, 0);
  s.gpus_per_node = read_int(t, "gpus_per_node", "slurm", file, 0, 0);
  s.cpus_per_task = read_int(t, "cpus_per_task", "slurm", file, 0, 0);
  s.launcher = choice(t, "launcher", "slurm", file, "srun", {"srun", "mpirun"});
  if (const toml::node* e = t.get("extra")) {
    const toml::array* arr = e->as_array();
    if (!arr) throw InputError(where(*e, file) + ": slurm.extra must be an array of strings");
    for (const auto& x : *arr) {
      if (!x.is_string() || x.as_string()->get().rfind("--", 0) != 0) {
        throw InputError(where(x, file) +
                         ": slurm.extra: expected sbatch options as strings, e.g. \"--qos=low\"");
      }
      s.extra.push_back(x.as_string()->get());
    }
  }
  return s;
}

}  // namespace

StudySpec parse_study(const std::string& text, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw InputError(path + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) +
                     ": TOML syntax error: " + std::string(e.description()));
  }
  check_keys(root, {"study", "axis", "variant", "slurm"}, "the study file", path);
  const toml::node* study_node = root.get("study");
  if (!study_node) throw InputError(path + ": missing [study] table");
  const toml::table& study = as_table(*study_node, "[study]", path);
  check_keys(study,
             {"name", "base", "seeds", "out_root", "ranks", "threads", "parallel_runs",
              "runs_per_gpu", "set", "compare"},
             "[study]", path);

  StudySpec spec;
  spec.file = path;
  spec.name = read_string(study, "name", "study", path, true);
  const fs::path base = read_string(study, "base", "study", path, true);
  spec.base =
      (base.is_absolute() ? base : fs::path(path).parent_path() / base).lexically_normal().string();
  spec.seeds = read_seeds(study, path);
  // Like train.out_dir, out_root is relative to the working directory.
  spec.out_root =
      fs::absolute(read_string(study, "out_root", "study", path, true)).lexically_normal().string();
  while (spec.out_root.size() > 1 && spec.out_root.back() == '/') spec.out_root.pop_back();
  spec.ranks = read_int(study, "ranks", "study", path, 1, 1);
  spec.threads = read_int(study, "threads", "study", path, 1, 1);
  spec.parallel_runs = read_int(study, "parallel_runs", "study", path, 1, 1);
  spec.runs_per_gpu = read_int(study, "runs_per_gpu", "study", path, 1, 1);
  if (const toml::node* s = study.get("set")) spec.set = read_overrides(*s, "study.set", path);
  spec.axes = read_axes(root, path);
  spec.variants = read_variants(root, spec.axes, path);
  if (const toml::node* c = study.get("compare")) {
    spec.compare = read_compare(*c, spec.variants, path);
  }
  if (const toml::node* s = root.get("slurm")) spec.slurm = read_slurm(*s, path);
  return spec;
}

StudySpec load_study(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open study file (" + std::strerror(errno) + ")");
  std::stringstream buf;
  buf << in.rdbuf();
  if (buf.str().find_first_not_of(" \t\r\n") == std::string::npos) {
    throw InputError(path + ": study file is empty; expected a [study] table and [[variant]]s");
  }
  return parse_study(buf.str(), path);
}

}  // namespace moelab
