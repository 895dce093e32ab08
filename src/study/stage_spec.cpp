#include "study/stage_spec.h"

#include <algorithm>

#include "study/toml_fields.h"
#include "util/error.h"

namespace moelab {
namespace {

// A conversion option: its key in the study file is its command-line flag
// without "--" and with '_' for '-'; `methods` take it.
struct ConversionKey {
  std::string key;
  std::vector<std::string> methods;
  bool integer = false;
};

const std::vector<ConversionKey>& conversion_keys() {
  static const std::vector<std::string> all = {"upcycle", "random", "cluster", "dot"};
  static const std::vector<ConversionKey> keys = {
      {"router_init_std", all, false},         {"granularity", {"upcycle"}, true},
      {"reinit_fraction", {"upcycle"}, false}, {"cluster_iterations", {"cluster", "dot"}, true},
      {"calibration_steps", {"dot"}, true},    {"dot_temperature", {"dot"}, false},
      {"sinkhorn_iterations", {"dot"}, true},  {"dot_lr_scores", {"dot"}, false},
      {"dot_lr_router", {"dot"}, false},
  };
  return keys;
}

std::string flag_of(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return "--" + key;
}

// One option's value: a positive integer or a number >= 0, as `what` names it.
std::string option_value(const toml::node& n, const ConversionKey& k, const std::string& what,
                         const std::string& file) {
  const bool ok = k.integer ? n.is_integer() && n.as_integer()->get() > 0
                            : n.is_number() && n.value<double>().value_or(-1) >= 0;
  if (!ok) {
    throw InputError(where(n, file) + ": " + what + "." + k.key + " must be " +
                     (k.integer ? "an integer > 0" : "a number >= 0"));
  }
  return toml_literal(n, k.key, file);
}

StageConversion read_conversion(const toml::node& node, const std::string& context,
                                const std::string& file) {
  const std::string what = context + ".convert";
  const toml::table& t = as_table(node, what, file);
  StageConversion c;
  c.origin = where(node, file);
  c.method = choice(t, "method", what, file, "", {"upcycle", "random", "cluster", "dot"});
  if (c.method.empty()) {
    throw InputError(
        c.origin + ": " + what +
        ".method is missing; expected \"upcycle\", \"random\", \"cluster\" or \"dot\"");
  }
  std::vector<std::string> allowed = {"method", "experts", "top_k"};
  for (const auto& k : conversion_keys()) {
    if (std::count(k.methods.begin(), k.methods.end(), c.method)) allowed.push_back(k.key);
  }
  check_keys(t, allowed, what + " (method \"" + c.method + "\")", file);
  for (const std::string key : {"experts", "top_k"}) {
    if (!t.get(key)) {
      throw InputError(c.origin + ": " + what + "." + key + " is missing; expected an integer > 0");
    }
  }
  c.experts = read_int(t, "experts", what, file, 0, 1);
  c.top_k = read_int(t, "top_k", what, file, 0, 1);
  c.granularity = read_int(t, "granularity", what, file, 1, 1);
  if (c.method != "upcycle") c.flags.emplace_back("--method", c.method);
  c.flags.emplace_back("--experts", std::to_string(c.experts));
  c.flags.emplace_back("--top-k", std::to_string(c.top_k));
  for (const auto& k : conversion_keys()) {
    if (const toml::node* n = t.get(k.key); n && std::count(allowed.begin(), allowed.end(), k.key))
      c.flags.emplace_back(flag_of(k.key), option_value(*n, k, what, file));
  }
  return c;
}

}  // namespace

VariantFrom read_variant_from(const toml::table& t, const std::string& context,
                              const std::string& file) {
  const toml::node& node = *t.get("from");
  const std::string what = context + ".from";
  const toml::table& from = as_table(node, what, file);
  check_keys(from, {"variant", "step"}, what, file);
  VariantFrom f;
  f.origin = where(node, file);
  f.variant = read_string(from, "variant", what, file, true);
  f.step = read_int(from, "step", what, file, 0, 1);
  if (const toml::node* c = t.get("convert")) f.convert = read_conversion(*c, context, file);
  return f;
}

}  // namespace moelab
