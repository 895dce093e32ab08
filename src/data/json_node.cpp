#include "data/json_node.h"

#include <cctype>

#include "util/error.h"

namespace moelab {

using nlohmann::json;

namespace {

bool is_identifier(const std::string& key) {
  if (key.empty() || std::isdigit(static_cast<unsigned char>(key[0]))) return false;
  for (char c : key) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

std::string member_path(const std::string& path, const std::string& key) {
  if (is_identifier(key)) return path.empty() ? key : path + "." + key;
  return path + "[" + json(key).dump() + "]";
}

std::string element_path(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

// Watches the parser's events: refuses nesting beyond kMaxJsonDepth as soon as
// it opens, and objects whose distinct keys are fewer than the keys read.
class StructureCheck {
 public:
  explicit StructureCheck(const std::string& origin) : origin_(origin) {}

  bool operator()(int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (frames_.size() >= size_t(kMaxJsonDepth)) {
          fail(path(), "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        }
        frames_.emplace_back();
        frames_.back().is_object = event == json::parse_event_t::object_start;
        break;
      case json::parse_event_t::key:
        frames_.back().key = parsed.get<std::string>();
        ++frames_.back().keys;
        break;
      case json::parse_event_t::object_end: {
        const size_t keys = frames_.back().keys;
        frames_.pop_back();
        if (parsed.size() != keys) fail(path(), "an object repeats a key");
        next_element();
        break;
      }
      case json::parse_event_t::array_end:
        frames_.pop_back();
        next_element();
        break;
      case json::parse_event_t::value:
        next_element();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool is_object = false;
    size_t keys = 0;
    size_t index = 0;
    std::string key;
  };

  void next_element() {
    if (!frames_.empty() && !frames_.back().is_object) ++frames_.back().index;
  }
  // The path of the value being read.
  std::string path() const {
    std::string path;
    for (const Frame& frame : frames_) {
      path = frame.is_object ? member_path(path, frame.key) : element_path(path, frame.index);
    }
    return path;
  }
  [[noreturn]] void fail(const std::string& where, const std::string& problem) const {
    throw InputError(origin_ + ": " + (where.empty() ? "the document" : where) + ": " + problem);
  }

  const std::string& origin_;
  std::vector<Frame> frames_;
};

}  // namespace

json parse_json_file(const std::string& text, const std::string& origin) {
  StructureCheck check(origin);
  try {
    return json::parse(text, std::ref(check));
  } catch (const json::parse_error& error) {
    throw InputError(origin + ": not valid JSON (" + error.what() + ")");
  }
}

bool JsonNode::has(const std::string& key) const {
  if (!value_->is_object()) return false;
  const auto it = value_->find(key);
  return it != value_->end() && !it->is_null();
}

JsonNode JsonNode::operator[](const std::string& key) const {
  const auto it = object().find(key);
  if (it == value_->end()) fail("lacks \"" + key + "\"");
  return JsonNode(*it, member_path(path_, key), *origin_);
}

JsonNode JsonNode::member_or_null(const std::string& key) const {
  static const json kNull;
  return has(key) ? (*this)[key] : JsonNode(kNull, member_path(path_, key), *origin_);
}

JsonNode JsonNode::element(size_t index) const {
  if (!value_->is_array()) fail(std::string("expected an array, not ") + value_->type_name());
  if (index >= value_->size()) fail("has no element " + std::to_string(index));
  return JsonNode((*value_)[index], element_path(path_, index), *origin_);
}

std::vector<JsonNode> JsonNode::elements() const {
  if (!value_->is_array()) fail(std::string("expected an array, not ") + value_->type_name());
  std::vector<JsonNode> elements;
  elements.reserve(value_->size());
  for (size_t i = 0; i < value_->size(); ++i) {
    elements.emplace_back((*value_)[i], element_path(path_, i), *origin_);
  }
  return elements;
}

const json& JsonNode::object() const {
  if (!value_->is_object()) fail(std::string("expected an object, not ") + value_->type_name());
  return *value_;
}

std::string JsonNode::text() const {
  if (!value_->is_string()) fail(std::string("expected a string, not ") + value_->type_name());
  return value_->get<std::string>();
}

bool JsonNode::boolean() const {
  if (!value_->is_boolean()) fail(std::string("expected true or false, not ") + value_->dump());
  return value_->get<bool>();
}

uint64_t JsonNode::index_below(uint64_t limit, const std::string& what_limits) const {
  if (!value_->is_number_unsigned()) {
    fail("expected a non-negative integer, not " + value_->dump());
  }
  const uint64_t value = value_->get<uint64_t>();
  if (value >= limit) {
    fail(std::to_string(value) + " is out of range: " + what_limits + " (below " +
         std::to_string(limit) + ")");
  }
  return value;
}

std::string JsonNode::type() const {
  if (!has("type")) fail("has no \"type\"");
  return (*this)["type"].text();
}

bool JsonNode::flag(const std::string& key, bool fallback) const {
  return has(key) ? (*this)[key].boolean() : fallback;
}

std::string JsonNode::text_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? (*this)[key].text() : fallback;
}

void JsonNode::fail(const std::string& problem) const {
  throw InputError(*origin_ + ": " + (path_.empty() ? "the document" : path_) + ": " + problem);
}

}  // namespace moelab
