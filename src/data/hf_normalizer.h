// The `normalizer` of a tokenizer.json as a pipeline of steps, each applied
// to the text the previous one produced, as `tokenizers` applies them:
//   NFC, NFD, NFKC, NFKD   Unicode forms (unicode_forms.h)
//   Lowercase             Rust's char::to_lowercase
//   Strip                 whitespace off the left and/or right end
//   Replace               a string or regex by a string
//   Prepend               a string before non-empty text
//   Sequence              the steps of its list, in order (empty: none)
// Anything else is refused by name. A step that leaves the text as it is
// costs no copy (already-NFC text is only scanned).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "data/json_node.h"
#include "data/text_scratch.h"

namespace moelab {

class NormalizerStep {
 public:
  virtual ~NormalizerStep() = default;
  // False when `text` stays as it is (`out` untouched); else true with the
  // result in `out`.
  virtual bool apply(std::string_view text, TextScratch& scratch, std::string& out) const = 0;
  // False when the step can drop or replace the text's first character, so
  // the result's start is no longer where the original text started.
  virtual bool keeps_start() const { return true; }
};

class HfNormalizer {
 public:
  // The file's "normalizer" (null: none).
  HfNormalizer(const JsonNode& node, ScratchLayout& layout);

  bool empty() const { return steps_.empty(); }
  bool keeps_start() const;
  // The normalised text: `text` itself when no step changes it, otherwise a
  // view of a scratch buffer, valid until the next call.
  std::string_view apply(std::string_view text, TextScratch& scratch) const;

 private:
  void add(const JsonNode& node, ScratchLayout& layout);

  std::vector<std::unique_ptr<NormalizerStep>> steps_;
  size_t buffers_[2] = {};
};

}  // namespace moelab
