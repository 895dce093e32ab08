// Added tokens of a tokenizer.json (`added_tokens`: <|endoftext|>, <s>, ...)
// cut out of text as `tokenizers` (AddedVocabulary) does: the leftmost match,
// the longest there, then on from its end; a `single_word` token only where no
// word character touches it; `lstrip` / `rstrip` take the whitespace beside it
// into the token. Tokens with `normalized: false` are matched on the raw
// text, those with `normalized: true` on each normalised stretch between the
// former, in their normalised form (one AddedTokenMatcher for each pass).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/function_ref.h"

namespace moelab {

struct HfAddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = false;
  bool normalized = true;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

class AddedTokenMatcher {
 public:
  // `token` matches where `pattern` (its content, or its normalised content)
  // occurs. False, adding nothing, when the pattern is empty or already
  // another token's (`tokenizers` refuses such a file).
  bool add(const std::string& pattern, const HfAddedToken& token);
  bool empty() const { return tokens_.empty(); }

  // Cuts `text` into consecutive spans, calling emit(begin, end, id) for an
  // added token and emit(begin, end, -1) for the text between (empty spans
  // left out, tokens included). Spans are find_matches's: an rstrip token's
  // span can reach past where the next match starts, as in `tokenizers`.
  void split(std::string_view text, FunctionRef<void(size_t, size_t, int64_t)> emit) const;

 private:
  struct Node {
    int32_t token = -1;  // index in tokens_ of the token ending here
    std::vector<std::pair<unsigned char, int32_t>> children;
  };
  // The end of the longest pattern starting at text[at] (and its token), or false.
  bool longest_at(std::string_view text, size_t at, size_t* end, int32_t* token) const;
  int32_t child(int32_t node, unsigned char byte) const;
  bool keeps_single_word(std::string_view text, size_t begin, size_t end) const;

  std::vector<HfAddedToken> tokens_;
  std::vector<Node> nodes_ = std::vector<Node>(1);  // nodes_[0]: the root
  bool first_byte_[256] = {};
};

}  // namespace moelab
