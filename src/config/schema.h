// The config schema: every TOML key moelab accepts, the struct field it fills,
// its type and its allowed values. Parsing, --set overrides, validation messages
// and the resolved-config dump all walk this one list.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "config/config.h"

namespace moelab {

// A key bound to an enum member (config/choices.h), read and written by the
// names of its table.
struct Choice {
  std::vector<std::string> names;  // what the key accepts, in message order
  std::function<std::string()> get;
  std::function<bool(const std::string&)> set;  // false (value kept) for an unknown name

  template <typename E>
  static Choice of(E* member) {
    return {choice_names<E>(), [member] { return choice_name(*member); },
            [member](const std::string& name) {
              const auto value = parse_choice<E>(name);
              if (value) *member = *value;
              return value.has_value();
            }};
  }
};

struct Field {
  std::string key;  // "section.name"
  std::variant<int64_t*, double*, bool*, std::string*, std::vector<int64_t>*, Choice> value;
  std::optional<double> min;  // numbers (and list entries): smallest allowed value (inclusive)
  std::optional<double> max;  // numbers: largest allowed value (inclusive)
  bool min_exclusive = false;
  std::string help;

  std::string section() const { return key.substr(0, key.find('.')); }
  std::string name() const { return key.substr(key.find('.') + 1); }
  // The TOML table the key sits in: "model.rope_scaling" for
  // "model.rope_scaling.type", the section for a key of the section itself.
  std::string table() const { return key.substr(0, key.rfind('.')); }
  // "an integer >= 1", "one of \"fp32\", \"bf16\"", ...: what the key accepts.
  std::string allowed() const;
  // Empty when the current value is allowed, else what is wrong with it.
  std::string check() const;
  std::string value_string() const;  // the current value, TOML-formatted
};

// `text` as a TOML basic string: quoted, with quotes, backslashes, newlines and tabs escaped.
std::string toml_string(const std::string& text);

// The fields of `cfg`, bound to its members, in dump order.
std::vector<Field> schema(Config& cfg);

// A key that holds an array of tables ([[data.sources]], [[eval.sets]]). Entry
// i's keys are Fields bound to element i, keyed "data.sources[i].dir", so they
// get the same type and range checks as every other key.
struct TableList {
  std::string key;  // "section.name"
  std::string help;
  std::function<size_t()> size;
  std::function<void(size_t)> resize;
  // Entry i's fields; i == size() gives those of a default entry (for the dump).
  std::function<std::vector<Field>(size_t)> entry;

  std::string section() const { return key.substr(0, key.find('.')); }
};

std::vector<TableList> table_lists(Config& cfg);

std::vector<std::string> schema_sections();

}  // namespace moelab
