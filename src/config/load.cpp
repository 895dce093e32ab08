#include "config/load.h"

#include <toml++/toml.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "config/data_sets.h"
#include "config/param_count.h"
#include "config/schema.h"
#include "util/error.h"

namespace moelab {
namespace {

std::string where(const toml::source_region& r, const std::string& source) {
  return source + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
}

std::string describe(const toml::node& n) {
  std::ostringstream os;
  switch (n.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      os << "string ";
      break;
    case toml::node_type::integer:
      os << "integer ";
      break;
    case toml::node_type::floating_point:
      os << "float ";
      break;
    case toml::node_type::boolean:
      os << "boolean ";
      break;
    default:
      os << "date/time ";
      break;
  }
  n.visit([&](auto&& v) {
    if constexpr (toml::is_value<decltype(v)>) os << v;
  });
  return os.str();
}

Field* find_field(std::vector<Field>& fields, const std::string& key) {
  for (auto& f : fields)
    if (f.key == key) return &f;
  return nullptr;
}

std::vector<std::string> all_keys(std::vector<Field>& fields) {
  std::vector<std::string> keys;
  for (auto& f : fields) keys.push_back(f.key);
  return keys;
}

std::string unknown_key_message(const std::string& key, std::vector<Field>& fields) {
  std::string msg = "unknown key '" + key + "'";
  std::string guess = did_you_mean(key, all_keys(fields));
  if (guess.empty()) {
    // A key put in the wrong section: look for the same name elsewhere.
    std::vector<std::string> names;
    const std::string name = key.substr(key.find('.') + 1);
    for (auto& f : fields)
      if (f.name() == name) names.push_back(f.key);
    if (names.size() == 1) guess = names[0];
  }
  return msg + (guess.empty() ? "" : "; did you mean '" + guess + "'?");
}

// Stores TOML node `n` into `f`, or throws naming `at` (where it came from).
void assign(Field& f, const toml::node& n, const std::string& at) {
  auto bad_type = [&] {
    return InputError(at + ": " + f.key + " = " + describe(n) + ": expected " + f.allowed());
  };
  if (auto* const* i = std::get_if<int64_t*>(&f.value)) {
    if (!n.is_integer()) throw bad_type();
    **i = n.as_integer()->get();
  } else if (auto* const* d = std::get_if<double*>(&f.value)) {
    if (n.is_integer()) {
      **d = double(n.as_integer()->get());
    } else if (n.is_floating_point()) {
      **d = n.as_floating_point()->get();
    } else {
      throw bad_type();
    }
  } else if (auto* const* b = std::get_if<bool*>(&f.value)) {
    if (!n.is_boolean()) throw bad_type();
    **b = n.as_boolean()->get();
  } else if (auto* const* list = std::get_if<std::vector<int64_t>*>(&f.value)) {
    const toml::array* arr = n.as_array();
    if (!arr) throw bad_type();
    (*list)->clear();
    for (const auto& x : *arr) {
      if (!x.is_integer()) throw bad_type();
      (*list)->push_back(x.as_integer()->get());
    }
  } else if (auto* choice = std::get_if<Choice>(&f.value)) {
    if (!n.is_string()) throw bad_type();
    const std::string& name = n.as_string()->get();
    if (!choice->set(name)) {
      throw InputError(at + ": " + f.key + " = " + toml_string(name) + ": expected " + f.allowed());
    }
  } else {
    if (!n.is_string()) throw bad_type();
    *std::get<std::string*>(f.value) = n.as_string()->get();
  }
  std::string problem = f.check();
  if (!problem.empty()) {
    throw InputError(at + ": " + f.key + " = " + f.value_string() + ": " + problem);
  }
}

void check_text(const std::string& text, const std::string& source) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw InputError(source + ": config file is empty; expected TOML sections such as [model]");
  }
  auto nul = text.find('\0');
  if (nul != std::string::npos) {
    throw InputError(source + ": not a text file (NUL byte at offset " + std::to_string(nul) +
                     "); expected a TOML config");
  }
}

TableList* find_list(std::vector<TableList>& lists, const std::string& key) {
  for (auto& l : lists)
    if (l.key == key) return &l;
  return nullptr;
}

// Fills `list` from the [[key]] tables in `node`, each key checked by its Field.
void read_table_list(Config& cfg, TableList& list, const toml::node& node,
                     const std::string& source) {
  const std::string at = where(node.source(), source);
  const toml::array* tables = node.as_array();
  if (!tables || tables->empty() || !tables->is_array_of_tables()) {
    throw InputError(at + ": " + list.key + " = " + describe(node) + ": expected one or more [[" +
                     list.key + "]] tables");
  }
  list.resize(tables->size());
  for (size_t i = 0; i < tables->size(); ++i) {
    const toml::table& entry = *(*tables)[i].as_table();
    const std::string prefix = list.key + "[" + std::to_string(i) + "]";
    cfg.origin[prefix] = where(entry.source(), source);
    auto fields = list.entry(i);
    for (auto&& [key, value] : entry) {
      const std::string full = prefix + "." + std::string(key.str());
      const std::string key_at = where(key.source(), source);
      Field* f = find_field(fields, full);
      if (!f) {
        std::vector<std::string> names;
        for (auto& entry_field : fields) names.push_back(entry_field.key);
        const std::string guess = did_you_mean(full, names);
        throw InputError(key_at + ": unknown key '" + full + "'" +
                         (guess.empty() ? "" : "; did you mean '" + guess + "'?"));
      }
      assign(*f, value, where(value.source(), source));
      cfg.origin[full] = key_at;
    }
  }
}

// Whether the schema has keys in the table `name` ("model.rope_scaling").
bool is_sub_table(const std::vector<Field>& fields, const std::string& name) {
  for (const auto& f : fields)
    if (f.table() == name) return true;
  return false;
}

// The keys of `table`, the TOML table `name`, each checked by its Field; the
// schema's sub-tables ([model.rope_scaling]) are read the same way.
void read_keys(Config& cfg, std::vector<Field>& fields, std::vector<TableList>& lists,
               const toml::table& table, const std::string& name, const std::string& source) {
  for (auto&& [key, node] : table) {
    const std::string full = name + "." + std::string(key.str());
    const std::string key_at = where(key.source(), source);
    if (TableList* list = find_list(lists, full)) {
      read_table_list(cfg, *list, node, source);
      continue;
    }
    if (is_sub_table(fields, full)) {
      if (!node.is_table()) {
        throw InputError(where(node.source(), source) + ": " + full + " = " + describe(node) +
                         ": expected a table [" + full + "]");
      }
      read_keys(cfg, fields, lists, *node.as_table(), full, source);
      continue;
    }
    Field* f = find_field(fields, full);
    if (!f) throw InputError(key_at + ": " + unknown_key_message(full, fields));
    assign(*f, node, where(node.source(), source));
    cfg.origin[full] = key_at;
  }
}

void read_table(Config& cfg, const toml::table& root, const std::string& source) {
  auto fields = schema(cfg);
  auto lists = table_lists(cfg);
  const auto sections = schema_sections();
  for (auto&& [section_key, section] : root) {
    const std::string section_name(section_key.str());
    const std::string at = where(section_key.source(), source);
    if (std::find(sections.begin(), sections.end(), section_name) == sections.end()) {
      std::string guess = did_you_mean(section_name, sections);
      throw InputError(at + ": unknown section '" + section_name + "'" +
                       (guess.empty() ? "" : "; did you mean '" + guess + "'?"));
    }
    if (!section.is_table()) {
      throw InputError(at + ": '" + section_name + "' = " + describe(section) +
                       ": expected a table [" + section_name + "]");
    }
    read_keys(cfg, fields, lists, *section.as_table(), section_name, source);
  }
}

// Throws for a broken cross-field rule, pointing at the first key named.
void require(bool ok, const Config& cfg, const std::string& key, const std::string& message) {
  if (!ok) throw InputError(origin_of(cfg, key) + ": " + message);
}

std::string kv(const std::string& key, int64_t v) {
  return key + " = " + std::to_string(v);
}

// "data.sources[1].name" where the config sets it, else the entry "data.sources[1]".
std::string entry_key(const Config& cfg, const std::string& list, size_t i,
                      const std::string& field) {
  const std::string entry = list + "[" + std::to_string(i) + "]";
  return cfg.origin.count(entry + "." + field) ? entry + "." + field : entry;
}

// Every entry has a dir and a plain name no other entry has (names label
// metrics and val.csv columns).
void require_named_dirs(const Config& cfg, const std::string& list,
                        const std::vector<std::pair<std::string, std::string>>& name_dirs) {
  for (size_t i = 0; i < name_dirs.size(); ++i) {
    const auto& [name, dir] = name_dirs[i];
    const std::string entry = list + "[" + std::to_string(i) + "]";
    require(!dir.empty(), cfg, entry, entry + " has no dir (the prepared dataset folder)");
    require(
        is_plain_name(name), cfg, entry_key(cfg, list, i, "name"),
        entry + ".name = \"" + name + "\": expected a name of letters, digits, '_', '-' and '.'");
    for (size_t j = 0; j < i; ++j) {
      require(name_dirs[j].first != name, cfg, entry_key(cfg, list, i, "name"),
              entry + ".name = \"" + name + "\" is also the name of " + list + "[" +
                  std::to_string(j) + "]");
    }
  }
}

void validate_datasets(const Config& c) {
  if (!c.data.sources.empty()) {
    require(c.data.dir.empty(), c, "data.dir",
            "data.dir and [[data.sources]] exclude each other: list data.dir as a source");
    require(c.data.max_unique_tokens == 0, c, "data.max_unique_tokens",
            "data.max_unique_tokens caps data.dir alone: give each [[data.sources]] its own "
            "max_unique_tokens");
    std::vector<std::pair<std::string, std::string>> sources;
    for (const auto& s : training_sources(c)) sources.emplace_back(s.name, s.dir);
    require_named_dirs(c, "data.sources", sources);
  }
  std::vector<std::pair<std::string, std::string>> sets;
  for (const auto& s : c.eval.sets) sets.emplace_back(s.name, s.dir);
  require_named_dirs(c, "eval.sets", sets);
  std::vector<std::pair<std::string, std::string>> tasks;
  for (const auto& t : c.eval.tasks) tasks.emplace_back(t.name, t.dir);
  require_named_dirs(c, "eval.tasks", tasks);
  for (size_t i = 0; i < c.eval.tasks.size(); ++i) {
    const int64_t interval = c.eval.tasks[i].interval;
    require(interval == 0 || (c.eval.interval > 0 && interval % c.eval.interval == 0), c,
            entry_key(c, "eval.tasks", i, "interval"),
            "eval.tasks[" + std::to_string(i) + "].interval = " + std::to_string(interval) +
                " must be a multiple of eval.interval = " + std::to_string(c.eval.interval) +
                " (tasks are scored at validations)");
  }
}

// The key's last component: an entry's key without its "section.list[i]."
// prefix, a sub-table's without its table's name.
std::string leaf_name(const Field& f) {
  return f.key.substr(f.key.rfind('.') + 1);
}

// "key = value" with the value as the dump writes it.
std::string setting(const Config& c, const std::string& key) {
  Config copy = c;
  for (const auto& f : schema(copy))
    if (f.key == key) return key + " = " + f.value_string();
  throw std::logic_error("setting: no key " + key);
}

void validate_heads(const Config& c) {
  const auto& m = c.model;
  if (m.explicit_head_dim > 0) {
    require(m.head_dim() % 2 == 0, c, "model.head_dim",
            kv("model.head_dim", m.head_dim()) + " must be even for RoPE");
  } else {
    require(m.d_model % m.n_heads == 0, c, "model.n_heads",
            kv("model.n_heads", m.n_heads) + " must divide " + kv("model.d_model", m.d_model) +
                " (or set model.head_dim)");
    require(m.head_dim() % 2 == 0, c, "model.n_heads",
            "head dimension d_model / n_heads = " + std::to_string(m.head_dim()) +
                " must be even for RoPE");
  }
  require(m.n_kv_heads <= m.n_heads && m.n_heads % m.kv_heads() == 0, c, "model.n_kv_heads",
          kv("model.n_kv_heads", m.n_kv_heads) + " must divide " + kv("model.n_heads", m.n_heads));
}

// Each key in `keys` holds its default: a value `owner` would ignore is
// refused, not dropped.
void require_defaults(const Config& c, const std::vector<std::string>& keys,
                      const std::string& owner) {
  Config defaults;
  for (const auto& key : keys) {
    require(setting(c, key) == setting(defaults, key), c, key,
            setting(c, key) + " does not apply to " + owner);
  }
}

const std::vector<std::string> kLatentAttentionKeys = {
    "model.q_lora_rank", "model.kv_lora_rank", "model.qk_nope_head_dim", "model.qk_rope_head_dim",
    "model.v_head_dim"};

// model.attention = "mla": its own head widths and one latent for every head,
// so the multi-head options (grouped heads, a head width, QK-norm, biases) are
// refused; "mha": the mla keys are.
void validate_attention(const Config& c) {
  const auto& m = c.model;
  const std::string kind = setting(c, "model.attention");
  if (!m.latent_attention()) {
    require_defaults(c, kLatentAttentionKeys, kind);
    validate_heads(c);
    return;
  }
  require_defaults(c, {"model.n_kv_heads", "model.head_dim", "model.qk_norm", "model.qkv_bias"},
                   kind + " (set qk_nope_head_dim, qk_rope_head_dim and v_head_dim)");
  // A width left unset is located at the choice that needs it.
  const auto at = [&c](const std::string& key) {
    return c.origin.count(key) ? key : "model.attention";
  };
  require(m.kv_lora_rank >= 1, c, at("model.kv_lora_rank"),
          kind + " needs model.kv_lora_rank >= 1 (the key/value latent's width)");
  require(m.qk_nope_head_dim >= 1, c, at("model.qk_nope_head_dim"),
          kind + " needs model.qk_nope_head_dim >= 1 (each head's dims without RoPE)");
  require(m.qk_rope_head_dim >= 2 && m.qk_rope_head_dim % 2 == 0, c, at("model.qk_rope_head_dim"),
          kv("model.qk_rope_head_dim", m.qk_rope_head_dim) + " must be even and >= 2 for RoPE");
  require(m.v_head_dim >= 1, c, at("model.v_head_dim"),
          kind + " needs model.v_head_dim >= 1 (each head's value width)");
}

// The [model.rope_scaling] keys each type reads, "type" aside.
std::vector<std::string> rope_scaling_keys(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kLlama3:
      return {"factor", "original_seq_len", "low_freq_factor", "high_freq_factor"};
    case RopeScalingType::kYarn:
      return {"factor", "original_seq_len", "beta_fast",        "beta_slow",
              "mscale", "mscale_all_dim",   "attention_factor", "truncate"};
    case RopeScalingType::kNone:
      break;
  }
  return {};
}

// Each key the type reads holds a usable value, and every other key its
// default: a value the type would ignore is refused, not dropped.
void validate_rope_scaling(const Config& c) {
  const RopeScaling& r = c.model.rope_scaling;
  const std::string type = setting(c, "model.rope_scaling.type");
  const auto used = rope_scaling_keys(r.type);
  Config copy = c, defaults;
  const auto fields = schema(copy), default_fields = schema(defaults);
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string name = leaf_name(fields[i]);
    if (fields[i].table() != "model.rope_scaling" || name == "type") continue;
    const bool is_default = fields[i].value_string() == default_fields[i].value_string();
    require(is_default || std::find(used.begin(), used.end(), name) != used.end(), c, fields[i].key,
            setting(c, fields[i].key) + " does not apply to " + type);
  }
  if (r.type == RopeScalingType::kNone) return;
  require(r.original_seq_len >= 1, c, "model.rope_scaling.type",
          type + " needs model.rope_scaling.original_seq_len >= 1 (the context trained at)");
  if (r.type == RopeScalingType::kLlama3) {
    require(r.high_freq_factor > r.low_freq_factor, c, "model.rope_scaling.high_freq_factor",
            setting(c, "model.rope_scaling.high_freq_factor") + " must be > " +
                setting(c, "model.rope_scaling.low_freq_factor"));
    return;
  }
  require(r.beta_fast >= r.beta_slow, c, "model.rope_scaling.beta_fast",
          setting(c, "model.rope_scaling.beta_fast") +
              " must be >= " + setting(c, "model.rope_scaling.beta_slow"));
  require((r.mscale > 0) == (r.mscale_all_dim > 0), c,
          r.mscale > 0 ? "model.rope_scaling.mscale" : "model.rope_scaling.mscale_all_dim",
          "model.rope_scaling.mscale and mscale_all_dim set the attention factor together: set "
          "both or neither");
}

// [[key]] tables, one per entry; with none, the keys of a default entry as
// comments, so the dump still lists every key.
void write_table_list(const TableList& list, std::ostream& os) {
  if (list.size() == 0) {
    os << "# [[" << list.key << "]]: " << list.help << "\n";
    for (const auto& f : list.entry(0))
      os << "# " << leaf_name(f) << " = " << f.value_string() << "\n";
  }
  for (size_t i = 0; i < list.size(); ++i) {
    os << "[[" << list.key << "]]\n";
    for (const auto& f : list.entry(i)) os << leaf_name(f) << " = " << f.value_string() << "\n";
  }
}

// The section's sub-tables ([model.rope_scaling]), each under its own header.
void write_sub_tables(const std::vector<Field>& fields, const std::string& section,
                      std::ostream& os) {
  std::string open;
  for (const auto& f : fields) {
    if (f.section() != section || f.table() == section) continue;
    if (f.table() != open) os << "[" << (open = f.table()) << "]\n";
    os << leaf_name(f) << " = " << f.value_string() << "\n";
  }
}

}  // namespace

std::string origin_of(const Config& cfg, const std::string& key) {
  auto it = cfg.origin.find(key);
  return it == cfg.origin.end() ? cfg.source + " (default)" : it->second;
}

std::string did_you_mean(const std::string& key, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, key.size() / 3) + 1;
  for (const auto& c : candidates) {
    std::vector<size_t> prev(c.size() + 1), cur(c.size() + 1);
    for (size_t j = 0; j <= c.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= key.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= c.size(); ++j) {
        size_t sub = prev[j - 1] + (key[i - 1] == c[j - 1] ? 0 : 1);
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
      }
      std::swap(prev, cur);
    }
    if (prev[c.size()] < best_distance) {
      best_distance = prev[c.size()];
      best = c;
    }
  }
  return best;
}

namespace {

// The list `list` replaced by the inline tables of the TOML array that
// `assignment` ("data.sources=[{...}, ...]", a TOML line, so positions in
// messages are its own) sets; the replaced entries go with their values and
// origins.
void replace_table_list(Config& cfg, TableList& list, const std::string& assignment,
                        const std::string& at) {
  toml::table parsed;
  try {
    parsed = toml::parse(assignment);
  } catch (const toml::parse_error& e) {
    throw InputError(at + ": expected a TOML array of inline tables [{...}, ...] (" +
                     std::string(e.description()) + ")");
  }
  const std::string prefix = list.key + "[";
  for (auto it = cfg.origin.begin(); it != cfg.origin.end();) {
    it = it->first.compare(0, prefix.size(), prefix) == 0 ? cfg.origin.erase(it) : std::next(it);
  }
  list.resize(0);
  read_table_list(cfg, list, *parsed.at_path(list.key).node(), at);
}

}  // namespace

void apply_override(Config& cfg, const std::string& assignment) {
  const std::string at = "--set " + assignment;
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(at + ": expected key.path=value, e.g. --set model.d_model=256");
  }
  std::string key = assignment.substr(0, eq);
  std::string value = assignment.substr(eq + 1);
  auto lists = table_lists(cfg);
  // A whole list ("data.sources=[{dir=\"a\"}, {dir=\"b\", weight=2}]"): a
  // study's child stage can train on another mixture than its parent.
  if (TableList* list = find_list(lists, key)) {
    replace_table_list(cfg, *list, assignment, at);
    cfg.origin[key] = at;
    return;
  }
  auto fields = schema(cfg);
  // The keys of the entries the config has ("data.sources[1].weight"): a study
  // variant can change a mixture weight.
  for (auto& list : lists) {
    for (size_t i = 0; i < list.size(); ++i) {
      for (auto& entry_field : list.entry(i)) fields.push_back(entry_field);
    }
  }
  Field* f = find_field(fields, key);
  if (!f) throw InputError(at + ": " + unknown_key_message(key, fields));
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    // Not a TOML literal: take the bare word as a string (e.g. precision=bf16).
    toml::table t;
    t.insert("v", value);
    parsed = std::move(t);
  }
  assign(*f, *parsed.get("v"), at);
  cfg.origin[key] = at;
}

Config parse_config(const std::string& text, const std::string& source,
                    const std::vector<std::string>& overrides, int world_size) {
  check_text(text, source);
  Config cfg;
  cfg.source = source;
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InputError(where(e.source(), source) +
                     ": TOML syntax error: " + std::string(e.description()));
  }
  read_table(cfg, root, source);
  for (const auto& o : overrides) apply_override(cfg, o);
  apply_compute_budget(cfg);
  validate(cfg, world_size);
  return cfg;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides,
                   int world_size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(path + ": cannot open config file (" + std::strerror(errno) + ")");
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_config(buf.str(), path, overrides, world_size);
}

namespace {

// Group-limited routing: whole groups, enough experts in the chosen groups for
// top_k, and two per group for a top-2 sum.
void validate_expert_groups(const MoeConfig& e, const Config& c) {
  require(e.num_experts % e.n_groups == 0, c, "moe.n_groups",
          kv("moe.n_groups", e.n_groups) + " must divide " + kv("moe.num_experts", e.num_experts));
  require(e.topk_groups <= e.n_groups, c, "moe.topk_groups",
          kv("moe.topk_groups", e.topk_groups) + " must be <= " + kv("moe.n_groups", e.n_groups));
  const int64_t per_group = e.num_experts / e.n_groups;
  require(e.top_k <= e.topk_groups * per_group, c, "moe.top_k",
          kv("moe.top_k", e.top_k) + " must be <= moe.topk_groups x experts per group (" +
              std::to_string(e.topk_groups) + " x " + std::to_string(per_group) + ")");
  require(e.group_score != GroupScore::kTop2Sum || e.n_groups == 1 || per_group >= 2, c,
          "moe.n_groups",
          "moe.group_score = \"top2_sum\" needs at least 2 experts per group (" +
              kv("moe.num_experts", e.num_experts) + ", " + kv("moe.n_groups", e.n_groups) +
              "); use \"max\"");
}

// The [moe] keys against the model and the expert-parallel layout.
void validate_moe(const Config& c) {
  const auto& m = c.model;
  const auto& e = c.moe;
  if (e.enabled) {
    require(c.moe_layers() > 0, c,
            e.first_dense_layers >= m.n_layers ? "moe.first_dense_layers" : "moe.layer_interval",
            kv("moe.first_dense_layers", e.first_dense_layers) + " and " +
                kv("moe.layer_interval", e.layer_interval) + " leave no MoE layer among " +
                kv("model.n_layers", m.n_layers));
    require(e.top_k <= e.num_experts, c, "moe.top_k",
            kv("moe.top_k", e.top_k) + " must be <= " + kv("moe.num_experts", e.num_experts));
    require(
        e.num_experts % c.parallel.ep == 0, c, "parallel.ep",
        kv("parallel.ep", c.parallel.ep) + " must divide " + kv("moe.num_experts", e.num_experts));
    validate_expert_groups(e, c);
    require(!e.shared_expert_gate || e.shared_width() > 0, c, "moe.shared_expert_gate",
            "moe.shared_expert_gate = true needs a shared expert (moe.num_shared_experts or "
            "moe.d_shared > 0)");
    require(e.expert_widths.empty() || int64_t(e.expert_widths.size()) == e.num_experts, c,
            "moe.expert_widths",
            "moe.expert_widths lists " + std::to_string(e.expert_widths.size()) + " widths for " +
                kv("moe.num_experts", e.num_experts));
    // Every rank must move the routing bias the same way, so it follows the
    // global load, never one micro-batch's.
    require(e.balance != Balance::kAuxFree || e.stats == BalanceStats::kGlobal, c, "moe.stats",
            "moe.balance = \"aux_free\" needs moe.stats = \"global\" (got \"" +
                choice_name(e.stats) + "\")");
  } else {
    require(c.parallel.ep == 1, c, "parallel.ep",
            kv("parallel.ep", c.parallel.ep) +
                " needs moe.enabled = true (a dense model has no "
                "experts to split)");
  }
}

}  // namespace

void validate(const Config& c, int world_size) {
  const auto& m = c.model;
  const auto& e = c.moe;
  validate_attention(c);
  validate_rope_scaling(c);
  validate_moe(c);
  require(c.train.activation_checkpointing != ActivationCheckpointing::kMoe || e.enabled, c,
          "train.activation_checkpointing",
          "train.activation_checkpointing = \"moe\" needs moe.enabled = true (a dense model has "
          "no MoE FFN to recompute)");
  // Depth k predicts token i + k + 1 of a window of seq_len + 1 tokens: the
  // deepest module needs at least one position with a target.
  require(c.train.mtp_depth < m.seq_len, c, "train.mtp_depth",
          kv("train.mtp_depth", c.train.mtp_depth) + " must be < " +
              kv("model.seq_len", m.seq_len) + " (depth k predicts k + 1 tokens ahead)");
  const auto& profiled = c.train.profile_steps;
  require(profiled.empty() || (profiled.size() == 2 && profiled[0] <= profiled[1]), c,
          "train.profile_steps",
          "train.profile_steps must be [] or [first, last] with first <= last");
  require(c.train.memory_snapshot_step == 0 || c.train.device == TrainDevice::kCuda, c,
          "train.memory_snapshot_step",
          "train.memory_snapshot_step needs train.device = \"cuda\" (it is the CUDA caching "
          "allocator's snapshot)");
  if (world_size > 0) {
    require(world_size % c.parallel.ep == 0, c, "parallel.ep",
            kv("parallel.ep", c.parallel.ep) + " must divide the world size " +
                std::to_string(world_size));
    const int64_t seqs =
        c.train.batch_tokens > 0 ? c.train.batch_tokens / m.seq_len : c.train.batch_seqs;
    require(seqs % world_size == 0, c,
            c.train.batch_tokens > 0 ? "train.batch_tokens" : "train.batch_seqs",
            "the global batch of " + std::to_string(seqs) + " sequences must split evenly over " +
                std::to_string(world_size) + " ranks");
  }
  if (c.train.batch_tokens > 0) {
    require(c.train.batch_tokens % m.seq_len == 0, c, "train.batch_tokens",
            kv("train.batch_tokens", c.train.batch_tokens) + " must be a multiple of " +
                kv("model.seq_len", m.seq_len));
  }
  require(c.optim.warmup_steps <= c.train.max_steps, c, "optim.warmup_steps",
          kv("optim.warmup_steps", c.optim.warmup_steps) +
              " must be <= " + kv("train.max_steps", c.train.max_steps));
  require(c.parallel.backend != Backend::kNccl || c.train.device == TrainDevice::kCuda, c,
          "parallel.backend", "parallel.backend = \"nccl\" needs train.device = \"cuda\"");
  require(c.train.out_dir != "", c, "train.out_dir", "train.out_dir must not be empty");
  validate_datasets(c);
}

std::string to_toml(const Config& cfg) {
  Config copy = cfg;
  const auto fields = schema(copy);
  const auto lists = table_lists(copy);
  std::ostringstream os;
  for (const auto& section : schema_sections()) {
    os << (os.tellp() > 0 ? "\n" : "") << "[" << section << "]\n";
    for (const auto& f : fields)
      if (f.table() == section) os << f.name() << " = " << f.value_string() << "\n";
    for (const auto& list : lists)
      if (list.section() == section) write_table_list(list, os);
    write_sub_tables(fields, section, os);
  }
  return os.str();
}

}  // namespace moelab
