// Reading a JSON file a user hands moelab (a tokenizer.json) so that every
// defect is an InputError naming the file and the field: parse errors with
// their byte offset, nesting deeper than any real file has (refused while
// parsing, before the tree is built), repeated keys, and wrong types, missing
// fields or out-of-range numbers where the reader asks for a field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moelab {

// Nesting a tokenizer.json needs: root, model, vocab, merge pair, ... (about 6).
constexpr int kMaxJsonDepth = 32;

// The document `text` of file `origin`; InputError for invalid JSON, nesting
// deeper than kMaxJsonDepth and objects that repeat a key.
nlohmann::json parse_json_file(const std::string& text, const std::string& origin);

// A value inside a parsed file, with the path that names it in messages
// (e.g. `pre_tokenizer.pretokenizers[1].behavior`).
class JsonNode {
 public:
  JsonNode(const nlohmann::json& value, std::string path, const std::string& origin)
      : value_(&value), path_(std::move(path)), origin_(&origin) {}

  const nlohmann::json& raw() const { return *value_; }
  const std::string& path() const { return path_; }
  const std::string& origin() const { return *origin_; }
  bool is_null() const { return value_->is_null(); }

  // Present and not null.
  bool has(const std::string& key) const;
  // The member `key`; InputError when this is not an object or lacks it.
  JsonNode operator[](const std::string& key) const;
  // The member `key`, or a null value (at that path) when it is absent.
  JsonNode member_or_null(const std::string& key) const;
  // Element `index` of an array; InputError when this is not an array that long.
  JsonNode element(size_t index) const;
  // The elements of an array; InputError for anything else.
  std::vector<JsonNode> elements() const;
  // The object's raw members (for long lists, read without a node each);
  // InputError when this is not an object.
  const nlohmann::json& object() const;

  std::string text() const;  // a string
  bool boolean() const;
  // A non-negative integer below `limit`; `what_limits` says why the limit (for the message).
  uint64_t index_below(uint64_t limit, const std::string& what_limits) const;
  // The object's string "type" (a component's name).
  std::string type() const;

  // Optional members: `fallback` when absent or null, InputError for a wrong type.
  bool flag(const std::string& key, bool fallback) const;
  std::string text_or(const std::string& key, const std::string& fallback) const;

  // InputError "<origin>: <path>: <problem>".
  [[noreturn]] void fail(const std::string& problem) const;

 private:
  const nlohmann::json* value_;
  std::string path_;
  const std::string* origin_;
};

}  // namespace moelab
