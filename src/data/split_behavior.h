// How a tokenizer.json pre-tokenizer cuts text at what its pattern matches:
// the five behaviours of `tokenizers` (SplitDelimiterBehavior). A pattern
// (regex or character class) describes the text as consecutive segments,
// each a match or not; the behaviour decides which become pieces. For
// `the-final--countdown` split at "-":
//   Removed             the, final, countdown
//   Isolated            the, -, final, -, -, countdown
//   MergedWithPrevious  the-, final-, -, countdown
//   MergedWithNext      the, -final, -, -countdown
//   Contiguous          the, -, final, --, countdown
// Empty pieces are dropped, as `tokenizers` drops them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "data/utf8.h"
#include "util/function_ref.h"

namespace moelab {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// The behaviour a tokenizer.json names ("Removed", ...), or none.
std::optional<SplitBehavior> split_behavior_named(const std::string& name);

// Receives the segments of a text in order and emits the pieces (begin and
// end offsets) `behavior` keeps, each as soon as it can no longer grow.
class BehaviorSplitter {
 public:
  using Emit = FunctionRef<void(size_t begin, size_t end)>;
  BehaviorSplitter(SplitBehavior behavior, Emit emit) : behavior_(behavior), emit_(emit) {}

  void segment(size_t begin, size_t end, bool is_match);
  // Emits what is still held; call once after the last segment.
  void finish() { flush(); }

 private:
  void flush();

  SplitBehavior behavior_;
  Emit emit_;
  bool holding_ = false;
  size_t begin_ = 0, end_ = 0;
  bool held_is_lone_match_ = false;  // MergedWithNext: a match not yet merged with what follows
  bool previous_is_match_ = false;
};

// Segments of `text` for a character class: each character in the class is a
// match of its own, each run of others one non-match.
template <typename InClass>
void split_by_class(std::string_view text, InClass&& in_class, BehaviorSplitter& splitter) {
  size_t run = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t begin = at;
    if (!in_class(next_code_point(text, &at))) continue;
    if (begin > run) splitter.segment(run, begin, false);
    splitter.segment(begin, at, true);
    run = at;
  }
  if (run < text.size()) splitter.segment(run, text.size(), false);
  splitter.finish();
}

// Segments of `text` for a regex (SplitRegex::Matcher): its matches, and the
// stretches between them; `invert` swaps which of the two count as matches.
template <typename Matcher>
void split_by_regex(std::string_view text, Matcher& matcher, bool invert,
                    BehaviorSplitter& splitter) {
  size_t previous = 0;
  matcher.for_each_match(text, [&](size_t begin, size_t end) {
    if (begin != previous) splitter.segment(previous, begin, invert);
    splitter.segment(begin, end, !invert);
    previous = end;
  });
  if (previous != text.size()) splitter.segment(previous, text.size(), invert);
  splitter.finish();
}

}  // namespace moelab
