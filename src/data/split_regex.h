// A pre-tokenizer regex (PCRE2, UTF + Unicode properties, JIT-compiled): its
// matches as Oniguruma's find_iter gives them to `tokenizers` (empty matches
// included), and the pieces `tokenizers` Split(behavior = Isolated) and
// tiktoken cut text into: every match is a piece, and so is each stretch
// between matches.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "data/utf8.h"

namespace moelab {

// The regex engines whose `$` the patterns were written for: Oniguruma
// (`tokenizers`: `$` also matches before a newline) or Rust's fancy-regex
// (tiktoken: `$` matches only at the end of the text).
enum class RegexDialect { kOniguruma, kRust };

// GPT-2's pattern, which the ByteLevel pre-tokenizer applies with use_regex.
extern const char* const kGpt2Pattern;

// The pattern tiktoken uses for `name` (gpt2, cl100k, o200k); anything else is
// returned as a literal regex.
std::string tiktoken_pattern(const std::string& name);

class SplitRegex {
 public:
  // InputError naming `origin` when the pattern does not compile.
  SplitRegex(const std::string& pattern, RegexDialect dialect, const std::string& origin);
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  const std::string& pattern() const { return pattern_; }

  // Per-thread matching state (match data and a JIT stack large enough for a
  // 200 kB run of one character class).
  class Matcher {
   public:
    explicit Matcher(const SplitRegex& regex);
    ~Matcher();
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;
    // Calls emit(begin, end) for each match in `text`, in order, as
    // Oniguruma's find_iter does: an empty match is reported unless it sits
    // where the previous match ended. `text` must be valid UTF-8 (checked by
    // the caller once, not per match).
    template <typename Emit>
    void for_each_match(std::string_view text, Emit&& emit);
    // Calls emit(piece) for each non-empty piece of `text`, in order.
    template <typename Emit>
    void split(std::string_view text, Emit&& emit);

   private:
    // Start and end of the first match at or after `from`, or false.
    bool find(std::string_view text, size_t from, size_t* begin, size_t* end);
    const SplitRegex& regex_;
    struct State;
    std::unique_ptr<State> state_;
  };

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
};

template <typename Emit>
void SplitRegex::Matcher::for_each_match(std::string_view text, Emit&& emit) {
  size_t from = 0;
  bool matched = false;
  size_t last_end = 0;  // where the previous reported match ended
  size_t begin = 0, end = 0;
  while (from <= text.size() && find(text, from, &begin, &end)) {
    if (end == begin && matched && end == last_end) {  // search on one character later
      from = from < text.size() ? from + std::max<size_t>(1, utf8_sequence_length(text, from))
                                : from + 1;
      continue;
    }
    emit(begin, end);
    matched = true;
    from = last_end = end;
  }
}

template <typename Emit>
void SplitRegex::Matcher::split(std::string_view text, Emit&& emit) {
  size_t gap = 0;  // start of the text not yet emitted
  for_each_match(text, [&](size_t begin, size_t end) {
    if (end == begin) return;
    if (begin > gap) emit(text.substr(gap, begin - gap));
    emit(text.substr(begin, end - begin));
    gap = end;
  });
  if (gap < text.size()) emit(text.substr(gap));
}

}  // namespace moelab
