// SentencePiece's text normalisation, as spm_encode applies it before encoding:
// user-defined symbols kept as they are, the precompiled character map (longest-prefix rewrites
// such as NFKC, stored as a double-array trie over UTF-8 bytes plus the replacement strings),
// invalid UTF-8 bytes replaced one by one with U+FFFD, leading, trailing and repeated spaces
// removed, a space prepended (add_dummy_prefix), and spaces written as U+2581 "▁".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/spm_model.h"

namespace moelab {

class SpmNormalizer {
 public:
  // `origin` names the model, for errors in a malformed character map.
  SpmNormalizer(const SpmModel& model, const std::string& origin);

  std::string normalize(std::string_view text) const;

 private:
  // The rewrite of the longest rule matching at the start of `text`, and how
  // many input bytes it consumes (at least 1 for non-empty text).
  std::pair<std::string_view, size_t> normalize_prefix(std::string_view text) const;

  UserSymbols user_symbols_;    // passed through unchanged
  std::vector<uint32_t> trie_;  // darts-clone double array units
  std::string replacements_;    // NUL-terminated strings, indexed by trie values
  bool add_dummy_prefix_, remove_extra_whitespaces_, escape_whitespaces_,
      treat_whitespace_as_suffix_;
};

}  // namespace moelab
