// The tokenizer next to an exported model, so that
// AutoTokenizer.from_pretrained(<out>) gives the ids `moelab prep` gave.
//
// A SentencePiece dataset (<data.dir>/tokenizer.model) is written as that
// .model file with a tokenizer_config.json naming BertGenerationTokenizer:
// transformers' plain SentencePiece wrapper, which encodes with the model's
// own normaliser (character map, whitespace collapsing, dummy prefix) and adds
// no BOS or EOS. LlamaTokenizer would not: transformers 5 converts the .model
// into a fast tokenizer that keeps repeated spaces and tabs and skips the
// character map, so its ids differ on such text.
#pragma once

#include <string>

namespace moelab {

// What kind of tokenizer a prepared dataset folder holds.
enum class TokenizerKind { None, SentencePiece };

TokenizerKind dataset_tokenizer_kind(const std::string& data_dir);

// Writes the tokenizer files of `data_dir`'s kind into `out` (nothing for
// None); `max_length` is the model's context. Returns the kind written.
TokenizerKind write_hf_tokenizer(const std::string& data_dir, const std::string& out,
                                 int64_t max_length);

}  // namespace moelab
