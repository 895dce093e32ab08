// The `decoder` of a tokenizer.json: token strings back to text, as
// `tokenizers` decode(ids, skip_special_tokens=False) does. Each step maps the
// list of token strings to a new list; the result is their concatenation.
//   ByteLevel     GPT-2's byte alphabet back to bytes (all tokens at once)
//   Metaspace     the replacement back to spaces (dropped in the first token
//                 unless prepend_scheme is "never")
//   Replace       a string by a string, in each token
//   ByteFallback  runs of <0xNN> tokens to the bytes they spell
//   Fuse          all tokens into one
//   Strip         up to `start` / `stop` copies of a character off each token
//   Sequence      its steps in order; none (null): tokens joined by spaces
// Anything else is refused by name. Invalid UTF-8 that `tokenizers` would
// show as U+FFFD stays as the bytes the ids stand for, except in
// ByteFallback's own rule (one U+FFFD per byte that spells no text).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/json_node.h"

namespace moelab {

class DecoderStep {
 public:
  virtual ~DecoderStep() = default;
  virtual void apply(std::vector<std::string>& tokens) const = 0;
};

class HfDecoder {
 public:
  explicit HfDecoder(const JsonNode& node);
  ~HfDecoder();
  std::string decode(std::vector<std::string> tokens) const;

 private:
  void add(const JsonNode& node);

  bool join_with_spaces_ = false;
  std::vector<std::unique_ptr<DecoderStep>> steps_;
};

}  // namespace moelab
