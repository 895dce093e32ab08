#include "data/spm_normalizer.h"

#include <cstring>

#include "data/utf8.h"
#include "util/error.h"

namespace moelab {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// A darts-clone double-array unit: a label byte, a has-leaf bit and an offset
// to the children; a leaf unit holds the value instead.
bool has_leaf(uint32_t unit) {
  return ((unit >> 8) & 1) == 1;
}
uint32_t leaf_value(uint32_t unit) {
  return unit & ((1U << 31) - 1);
}
uint32_t label(uint32_t unit) {
  return unit & ((1U << 31) | 0xFF);
}
uint32_t offset(uint32_t unit) {
  return (unit >> 10) << ((unit & (1U << 9)) >> 6);
}

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

SpmNormalizer::SpmNormalizer(const SpmModel& model, const std::string& origin)
    : user_symbols_(model),
      add_dummy_prefix_(model.add_dummy_prefix),
      remove_extra_whitespaces_(model.remove_extra_whitespaces),
      escape_whitespaces_(model.escape_whitespaces),
      treat_whitespace_as_suffix_(model.treat_whitespace_as_suffix) {
  const std::string& blob = model.precompiled_charsmap;
  if (blob.empty()) return;  // "identity": no character rewrites
  // [uint32 trie bytes][trie units][replacement strings]
  uint32_t trie_bytes = 0;
  if (blob.size() < 4) throw InputError(origin + ": truncated normalizer character map");
  std::memcpy(&trie_bytes, blob.data(), 4);
  if (trie_bytes % 4 != 0 || trie_bytes > blob.size() - 4 || trie_bytes == 0) {
    throw InputError(origin + ": malformed normalizer character map");
  }
  trie_.resize(trie_bytes / 4);
  std::memcpy(trie_.data(), blob.data() + 4, trie_bytes);
  replacements_ = blob.substr(4 + trie_bytes);
}

std::pair<std::string_view, size_t> SpmNormalizer::normalize_prefix(std::string_view text) const {
  if (const size_t user = user_symbols_.match(text); user > 0) return {text.substr(0, user), user};
  size_t longest = 0;
  uint32_t value = 0;
  if (!trie_.empty()) {
    // Every prefix of `text` that is a key; the last one found is the longest.
    size_t node = offset(trie_[0]);
    for (size_t i = 0; i < text.size(); ++i) {
      const auto byte = static_cast<uint8_t>(text[i]);
      node ^= byte;
      if (node >= trie_.size() || label(trie_[node]) != byte) break;
      const uint32_t unit = trie_[node];
      node ^= offset(unit);
      if (node >= trie_.size()) break;
      if (has_leaf(unit)) {
        longest = i + 1;
        value = leaf_value(trie_[node]);
      }
    }
  }
  if (longest > 0 && value < replacements_.size()) {
    return {std::string_view(replacements_.c_str() + value), longest};
  }
  const size_t length = utf8_sequence_length(text, 0);
  if (length == 0) return {kReplacement, 1};  // one invalid byte becomes U+FFFD
  return {text.substr(0, length), length};
}

std::string SpmNormalizer::normalize(std::string_view text) const {
  std::string out;
  if (remove_extra_whitespaces_) {
    while (!text.empty()) {
      const auto [rewrite, consumed] = normalize_prefix(text);
      if (rewrite != " ") break;
      text.remove_prefix(consumed);
    }
  }
  if (text.empty()) return out;
  out.reserve(text.size() + text.size() / 2 + 3);
  const std::string_view space = escape_whitespaces_ ? kSpaceSymbol : " ";
  if (!treat_whitespace_as_suffix_ && add_dummy_prefix_) out += space;
  bool previous_space = remove_extra_whitespaces_;
  while (!text.empty()) {
    auto [rewrite, consumed] = normalize_prefix(text);
    if (previous_space) {
      while (!rewrite.empty() && rewrite.front() == ' ') rewrite.remove_prefix(1);
    }
    if (!rewrite.empty()) {
      for (char c : rewrite) {
        if (c == ' ' && escape_whitespaces_) {
          out += kSpaceSymbol;
        } else {
          out += c;
        }
      }
      previous_space = rewrite.back() == ' ';
    }
    text.remove_prefix(consumed);
    if (!remove_extra_whitespaces_) previous_space = false;
  }
  if (remove_extra_whitespaces_) {
    while (ends_with(out, space)) out.resize(out.size() - space.size());
  }
  if (treat_whitespace_as_suffix_ && add_dummy_prefix_) out += space;
  return out;
}

}  // namespace moelab
