// Reading a study file's tables strictly: every error names file:line:col and
// what was expected. Shared by the study spec's parts (study_spec.cpp,
// stage_spec.cpp).
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <string>
#include <vector>

namespace moelab {

// "file:line:col" of a value or a key.
std::string where(const toml::node& n, const std::string& file);
std::string where(const toml::key& k, const std::string& file);

// Rejects any key of `table` not in `allowed`, naming the closest allowed one.
void check_keys(const toml::table& table, const std::vector<std::string>& allowed,
                const std::string& context, const std::string& file);

// `context.key` as a non-empty string ("" when absent and not required).
std::string read_string(const toml::table& t, const std::string& key, const std::string& context,
                        const std::string& file, bool required);
// `context.key` as an integer >= min (`fallback` when absent).
int64_t read_int(const toml::table& t, const std::string& key, const std::string& context,
                 const std::string& file, int64_t fallback, int64_t min);
// `context.key` as one of `allowed` (`fallback` when absent).
std::string choice(const toml::table& t, const std::string& key, const std::string& context,
                   const std::string& file, const std::string& fallback,
                   const std::vector<std::string>& allowed);

const toml::table& as_table(const toml::node& n, const std::string& what, const std::string& file);

// A config value as the TOML literal `--set` accepts.
std::string toml_literal(const toml::node& n, const std::string& key, const std::string& file);

}  // namespace moelab
