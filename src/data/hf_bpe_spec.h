// A Hugging Face tokenizer.json with a BPE model, read for HfBpeEncoder
// (hf_bpe_encoder.h): the model's vocabulary and merges, the added tokens, and
// the normalizer, pre-tokenizer, post-processor template and decoder. Every
// component moelab does not implement is refused by name, so a file is either
// encoded exactly as `tokenizers` does or not at all.
//
// A hostile file is an InputError naming the file and the field, found before
// anything is allocated by a size the file states: invalid or truncated JSON,
// nesting deeper than a tokenizer.json has, repeated keys, wrong types, ids
// outside [0, vocabulary entries + added tokens), two tokens with one id, an
// added token whose id is not the one `tokenizers` gives it, a merge repeated.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/hf_added_tokens.h"
#include "data/hf_decoder.h"
#include "data/hf_normalizer.h"
#include "data/hf_post_processor.h"
#include "data/hf_pre_tokenizer.h"
#include "data/text_scratch.h"

namespace moelab {

struct HfBpeModel {
  std::vector<std::pair<std::string, uint32_t>> vocab;      // token as written in the file
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
  std::optional<std::string> unk_token;
};

struct HfBpeSpec {
  HfBpeModel model;
  std::vector<HfAddedToken> added_tokens;  // each with the id `tokenizers` gives it
  int64_t vocab_size = 0;                  // the highest id + 1
  std::unique_ptr<HfNormalizer> normalizer;
  std::unique_ptr<HfPreTokenizer> pre_tokenizer;
  DocumentTemplate document_template;
  std::unique_ptr<HfDecoder> decoder;
};

// The pipeline's regexes and buffers are registered in `layout`.
HfBpeSpec parse_hf_bpe(const std::string& json_text, const std::string& origin,
                       ScratchLayout& layout);

}  // namespace moelab
