#include "data/manifest.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace moelab {

using nlohmann::json;

namespace {

const json& field(const json& object, const char* key, const std::string& path) {
  const auto found = object.find(key);
  if (found == object.end()) throw InputError(path + ": manifest has no field '" + key + "'");
  return *found;
}

int64_t int_field(const json& object, const char* key, const std::string& path) {
  const json& value = field(object, key, path);
  if (!value.is_number_integer()) {
    throw InputError(path + ": manifest field '" + key + "' must be an integer");
  }
  return value.get<int64_t>();
}

std::string string_field(const json& object, const char* key, const std::string& path) {
  const json& value = field(object, key, path);
  if (!value.is_string())
    throw InputError(path + ": manifest field '" + key + "' must be a string");
  return value.get<std::string>();
}

}  // namespace

int64_t Manifest::num_tokens() const {
  int64_t total = 0;
  for (const auto& shard : shards) total += shard.tokens;
  return total;
}

int64_t Manifest::num_docs() const {
  int64_t total = 0;
  for (const auto& shard : shards) total += shard.docs;
  return total;
}

std::string manifest_to_json(const Manifest& manifest) {
  json shards = json::array();
  for (const auto& shard : manifest.shards) {
    shards.push_back({{"name", shard.name},
                      {"tokens", shard.tokens},
                      {"docs", shard.docs},
                      {"checksum", shard.checksum}});
  }
  const json document = {{"format_version", manifest.format_version},
                         {"split", manifest.split},
                         {"vocab_size", manifest.vocab_size},
                         {"eos_id", manifest.eos_id},
                         {"tokenizer_checksum", manifest.tokenizer_checksum},
                         {"num_tokens", manifest.num_tokens()},
                         {"num_docs", manifest.num_docs()},
                         {"shards", shards}};
  return document.dump(2) + "\n";
}

Manifest read_manifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open manifest (is this a moelab prep dataset?)");
  const json document = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded() || !document.is_object()) {
    throw InputError(path + ": manifest is not a JSON object");
  }
  Manifest manifest;
  manifest.format_version = int_field(document, "format_version", path);
  manifest.split = string_field(document, "split", path);
  manifest.vocab_size = int_field(document, "vocab_size", path);
  manifest.eos_id = int_field(document, "eos_id", path);
  manifest.tokenizer_checksum = string_field(document, "tokenizer_checksum", path);
  const json& shards = field(document, "shards", path);
  if (!shards.is_array()) throw InputError(path + ": manifest field 'shards' must be an array");
  for (const json& entry : shards) {
    if (!entry.is_object()) throw InputError(path + ": manifest shard entries must be objects");
    manifest.shards.push_back({string_field(entry, "name", path), int_field(entry, "tokens", path),
                               int_field(entry, "docs", path),
                               string_field(entry, "checksum", path)});
  }
  return manifest;
}

}  // namespace moelab
