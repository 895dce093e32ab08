// The `pre_tokenizer` of a tokenizer.json as a pipeline of steps: each step
// cuts every piece the step before it produced (a Sequence's list, in order),
// and the last step's pieces are the words the BPE model encodes:
//   Split        a regex or string, any behaviour (split_behavior.h), `invert`
//   Punctuation  punctuation characters, any behaviour
//   Digits       numeric characters: runs, or each alone (`individual_digits`)
//   Whitespace   runs of word characters and runs of other non-space ones
//   WhitespaceSplit  on whitespace, removed
//   Metaspace    spaces become the replacement ("▁"), prepended per
//                `prepend_scheme`, and each starts a word (`split`)
//   ByteLevel    optionally a space in front and GPT-2's regex, then the
//                bytes as GPT-2's byte alphabet; steps after it see that text
// Anything else is refused by name.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "data/json_node.h"
#include "data/text_scratch.h"
#include "util/function_ref.h"

namespace moelab {

// A piece of text and whether it starts where the (normalised) text did,
// which Metaspace's prepend_scheme "first" asks.
using PieceSink = FunctionRef<void(std::string_view piece, bool at_start)>;

class PreTokenizerStep {
 public:
  virtual ~PreTokenizerStep() = default;
  virtual void split(std::string_view text, bool at_start, TextScratch& scratch,
                     PieceSink emit) const = 0;
};

class HfPreTokenizer {
 public:
  // The file's "pre_tokenizer" (null: none, the text is one word).
  HfPreTokenizer(const JsonNode& node, ScratchLayout& layout);
  ~HfPreTokenizer();

  // A ByteLevel step: words are bytes to a byte-level BPE.
  bool byte_level() const { return byte_level_; }
  // Steps after ByteLevel: words reach the model in GPT-2's byte alphabet.
  bool words_in_byte_alphabet() const { return words_in_byte_alphabet_; }
  // A Metaspace step with prepend_scheme "first".
  bool asks_text_start() const { return asks_text_start_; }

  // Calls word(w) for each word of `text`, in order.
  void run(std::string_view text, bool at_start, TextScratch& scratch,
           FunctionRef<void(std::string_view)> word) const;

 private:
  void add(const JsonNode& node, ScratchLayout& layout);
  void run_from(size_t step, std::string_view text, bool at_start, TextScratch& scratch,
                FunctionRef<void(std::string_view)> word) const;

  std::vector<std::unique_ptr<PreTokenizerStep>> steps_;
  bool byte_level_ = false;
  bool words_in_byte_alphabet_ = false;
  bool asks_text_start_ = false;
  bool metaspace_ = false;
};

}  // namespace moelab
