// The tokenizer next to an exported model, so that
// AutoTokenizer.from_pretrained(<out>) gives the ids `moelab prep` gave.
//
// - A SentencePiece dataset is written as its .model file with a
//   tokenizer_config.json naming BertGenerationTokenizer: transformers' plain
//   SentencePiece wrapper, which encodes with the model's own normaliser
//   (character map, whitespace collapsing, dummy prefix) and adds no BOS or
//   EOS. LlamaTokenizer would not: transformers 5 converts the .model into a
//   fast tokenizer that keeps repeated spaces and tabs and skips the character
//   map, so its ids differ on such text.
// - A tokenizer.json dataset is written as the file it was prepared with and a
//   tokenizer_config.json for PreTrainedTokenizerFast. moelab encodes without
//   the file's post-processor, so a file whose template adds a BOS gives
//   transformers' ids with that BOS in front.
// - A tiktoken dataset has no file transformers reads: nothing is written.
#pragma once

#include <cstdint>
#include <string>

namespace moelab {

// Writes the tokenizer `data_dir` was prepared with into `out`; false (nothing
// written) when the folder holds none or one transformers cannot read.
// `max_length` is the model's context.
bool write_hf_tokenizer(const std::string& data_dir, const std::string& out, int64_t max_length);

}  // namespace moelab
