#include "data/hf_added_tokens.h"

#include <algorithm>

#include "data/unicode_chars.h"
#include "data/utf8.h"

namespace moelab {

namespace {

// The code point that ends at text[end] (text[..end] is not empty).
char32_t code_point_before(std::string_view text, size_t end) {
  size_t begin = end - 1;
  while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
  return next_code_point(text, &begin);
}

// Where the whitespace that ends text[..end] begins (regex `\s*$`).
size_t whitespace_run_before(std::string_view text, size_t end) {
  while (end > 0) {
    size_t begin = end - 1;
    while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
    size_t at = begin;
    if (!is_rust_whitespace(next_code_point(text, &at))) break;
    end = begin;
  }
  return end;
}

// Where the whitespace that starts text[begin..] ends (regex `^\s*`).
size_t whitespace_run_after(std::string_view text, size_t begin) {
  while (begin < text.size()) {
    size_t at = begin;
    if (!is_rust_whitespace(next_code_point(text, &at))) break;
    begin = at;
  }
  return begin;
}

}  // namespace

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  for (const auto& [edge, next] : nodes_[node].children) {
    if (edge == byte) return next;
  }
  return -1;
}

bool AddedTokenMatcher::add(const std::string& pattern, const HfAddedToken& token) {
  if (pattern.empty()) return false;
  int32_t node = 0;
  for (char c : pattern) {
    const auto byte = static_cast<unsigned char>(c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = int32_t(nodes_.size());
      nodes_[node].children.emplace_back(byte, next);
      nodes_.emplace_back();
    }
    node = next;
  }
  if (nodes_[node].token >= 0) return false;
  first_byte_[static_cast<unsigned char>(pattern[0])] = true;
  nodes_[node].token = int32_t(tokens_.size());
  tokens_.push_back(token);
  return true;
}

bool AddedTokenMatcher::longest_at(std::string_view text, size_t at, size_t* end,
                                   int32_t* token) const {
  bool found = false;
  for (int32_t node = 0; at < text.size();) {
    node = child(node, static_cast<unsigned char>(text[at++]));
    if (node < 0) break;
    if (nodes_[node].token >= 0) {
      *end = at;
      *token = nodes_[node].token;
      found = true;
    }
  }
  return found;
}

bool AddedTokenMatcher::keeps_single_word(std::string_view text, size_t begin, size_t end) const {
  const bool space_before = begin == 0 || !is_rust_word(code_point_before(text, begin));
  size_t at = end;
  const bool space_after = end == text.size() || !is_rust_word(next_code_point(text, &at));
  return space_before && space_after;
}

void AddedTokenMatcher::split(std::string_view text,
                              FunctionRef<void(size_t, size_t, int64_t)> emit) const {
  size_t emitted = 0;  // end of the last span emitted
  for (size_t at = 0; at < text.size();) {
    size_t match_end = 0;
    int32_t index = -1;
    if (!first_byte_[static_cast<unsigned char>(text[at])] ||
        !longest_at(text, at, &match_end, &index)) {
      ++at;
      continue;
    }
    const HfAddedToken& token = tokens_[index];
    size_t begin = at, end = match_end;
    at = match_end;  // the next match is searched after this one, kept or not
    if (token.single_word && !keeps_single_word(text, begin, end)) continue;
    if (token.lstrip) begin = std::max(whitespace_run_before(text, begin), emitted);
    if (token.rstrip) end = whitespace_run_after(text, end);
    if (emitted < begin) emit(emitted, begin, -1);
    // A span the whitespace of an rstrip before it took whole is no token.
    if (begin < end) emit(begin, end, token.id);
    emitted = end;
  }
  if (emitted < text.size()) emit(emitted, text.size(), -1);
}

}  // namespace moelab
