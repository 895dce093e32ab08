#include "study/toml_fields.h"

#include <algorithm>
#include <sstream>

#include "config/load.h"
#include "util/error.h"

namespace moelab {

std::string where(const toml::node& n, const std::string& file) {
  const auto& b = n.source().begin;
  return file + ":" + std::to_string(b.line) + ":" + std::to_string(b.column);
}

std::string where(const toml::key& k, const std::string& file) {
  const auto& b = k.source().begin;
  return file + ":" + std::to_string(b.line) + ":" + std::to_string(b.column);
}

void check_keys(const toml::table& table, const std::vector<std::string>& allowed,
                const std::string& context, const std::string& file) {
  for (auto&& [key, node] : table) {
    const std::string name(key.str());
    if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
    const std::string guess = did_you_mean(name, allowed);
    std::string known;
    for (const auto& a : allowed) known += (known.empty() ? "" : ", ") + a;
    throw InputError(where(key, file) + ": unknown key '" + name + "' in " + context +
                     (guess.empty() ? "" : "; did you mean '" + guess + "'?") +
                     " (allowed: " + known + ")");
  }
}

std::string read_string(const toml::table& t, const std::string& key, const std::string& context,
                        const std::string& file, bool required) {
  const toml::node* n = t.get(key);
  if (!n) {
    if (required) {
      throw InputError(file + ": " + context + "." + key + " is missing; expected a string");
    }
    return "";
  }
  if (!n->is_string() || n->as_string()->get().empty()) {
    throw InputError(where(*n, file) + ": " + context + "." + key + " must be a non-empty string");
  }
  return n->as_string()->get();
}

int64_t read_int(const toml::table& t, const std::string& key, const std::string& context,
                 const std::string& file, int64_t fallback, int64_t min) {
  const toml::node* n = t.get(key);
  if (!n) return fallback;
  if (!n->is_integer() || n->as_integer()->get() < min) {
    throw InputError(where(*n, file) + ": " + context + "." + key +
                     " must be an integer >= " + std::to_string(min));
  }
  return n->as_integer()->get();
}

std::string choice(const toml::table& t, const std::string& key, const std::string& context,
                   const std::string& file, const std::string& fallback,
                   const std::vector<std::string>& allowed) {
  if (!t.get(key)) return fallback;
  std::string v = read_string(t, key, context, file, true);
  if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
    std::string known;
    for (const auto& a : allowed) known += (known.empty() ? "\"" : ", \"") + a + "\"";
    throw InputError(where(*t.get(key), file) + ": " + context + "." + key + " = \"" + v +
                     "\": expected one of " + known);
  }
  return v;
}

const toml::table& as_table(const toml::node& n, const std::string& what, const std::string& file) {
  if (!n.is_table()) throw InputError(where(n, file) + ": " + what + " must be a table");
  return *n.as_table();
}

std::string toml_literal(const toml::node& n, const std::string& key, const std::string& file) {
  std::ostringstream os;
  if (auto* s = n.as_string()) {
    os << '"';
    for (char c : s->get()) {
      if (c == '"' || c == '\\') os << '\\';
      os << c;
    }
    os << '"';
  } else if (auto* i = n.as_integer()) {
    os << i->get();
  } else if (auto* d = n.as_floating_point()) {
    os.precision(17);
    os << d->get();
    if (os.str().find_first_of(".eEn") == std::string::npos) os << ".0";
  } else if (auto* b = n.as_boolean()) {
    os << (b->get() ? "true" : "false");
  } else if (auto* arr = n.as_array()) {  // moe.expert_widths = [512, 256]; data.sources = [{...}]
    os << '[';
    for (size_t i = 0; i < arr->size(); ++i) {
      if ((*arr)[i].is_array()) {
        throw InputError(where((*arr)[i], file) + ": '" + key +
                         "': expected a list of plain values or of inline tables");
      }
      os << (i ? ", " : "") << toml_literal((*arr)[i], key, file);
    }
    os << ']';
  } else if (auto* table = n.as_table()) {  // an entry of a list such as data.sources
    os << '{';
    const char* separator = " ";
    for (auto&& [k, v] : *table) {
      os << separator << toml_literal(toml::value<std::string>(std::string(k.str())), key, file)
         << " = " << toml_literal(v, key, file);
      separator = ", ";
    }
    os << " }";
  } else {
    throw InputError(where(n, file) + ": '" + key +
                     "': expected a string, number, boolean or list config value");
  }
  return os.str();
}

}  // namespace moelab
