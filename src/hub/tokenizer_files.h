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
//   tokenizer_config.json for PreTrainedTokenizerFast; a dataset prepared
//   without the template's tokens (prep --no-bos) gets the file without its
//   post-processor, so transformers adds no BOS that prep did not.
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
