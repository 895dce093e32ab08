// Reading, overriding, validating and writing configs. Every problem is an
// InputError whose one-line message names the file, line:column, key, the
// value and what is allowed.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace moelab {

// Reads a TOML file, applies `--set key.path=value` overrides in order, then
// validates. world_size > 0 also checks the parallel layout against it.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                   int world_size = 0);

// The same from TOML text; `source` names it in messages.
Config parse_config(const std::string& text, const std::string& source,
                    const std::vector<std::string>& overrides = {}, int world_size = 0);

// Applies one "key.path=value" override (value in TOML syntax; a bare word is
// taken as a string), with the same type and range checks as the file.
void apply_override(Config& cfg, const std::string& assignment);

// Cross-field checks (heads divide d_model, top_k <= num_experts, ...).
void validate(const Config& cfg, int world_size = 0);

// The fully resolved config as TOML that parse_config reads back to the same values.
std::string to_toml(const Config& cfg);

// Where `key` got its value: "file:3:5" for a key set in a file, "--set ..."
// for an override, "<source> (default)" otherwise.
std::string origin_of(const Config& cfg, const std::string& key);

// The key in `candidates` closest to `key` by edit distance, or "" if none is close.
std::string did_you_mean(const std::string& key, const std::vector<std::string>& candidates);

}  // namespace moelab
