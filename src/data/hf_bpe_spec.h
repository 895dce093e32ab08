// The parts of a Hugging Face tokenizer.json with a BPE model that moelab
// encodes with (hf_bpe_encoder.h). Parsing refuses, by name, every
// normalizer, pre-tokenizer, model or option it does not implement, so a file
// is either encoded exactly as `tokenizers` does or not at all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moelab {

struct HfAddedToken {
  std::string content;
  uint32_t id = 0;
};

// Where "▁" is put in front of a segment (SentencePiece-style files).
enum class MetaspacePrepend {
  kNever,
  kAlways,         // Metaspace prepend_scheme "always": unless it starts with "▁"
  kFirst,          // Metaspace prepend_scheme "first": only the text's first segment
  kUnconditional,  // normalizer Prepend("▁"): every non-empty segment
};

struct HfBpeSpec {
  std::vector<std::pair<std::string, uint32_t>> vocab;      // token as written in the file
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::vector<HfAddedToken> added_tokens;
  // Byte-level files: ByteLevel pre-tokenizer, vocabulary in GPT-2's byte alphabet.
  bool byte_level = false;
  bool add_prefix_space = false;  // ByteLevel's
  // Split(Isolated) patterns, then ByteLevel's own (GPT-2's) with use_regex.
  std::vector<std::string> split_regexes;
  // SentencePiece-style files: spaces become "▁".
  bool metaspace = false;
  bool metaspace_split = false;  // Metaspace split: each "▁" starts a word
  MetaspacePrepend prepend = MetaspacePrepend::kNever;
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
  std::optional<std::string> unk_token;
};

// InputError naming `origin` and the component for anything unsupported.
HfBpeSpec parse_hf_bpe(const std::string& json_text, const std::string& origin);

}  // namespace moelab
