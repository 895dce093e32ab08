// Encoder for a Hugging Face tokenizer.json with a BPE model (hf_bpe_spec.h
// lists what it reads), giving the ids `tokenizers` gives for
// encode(text, add_special_tokens=False), followed by EOS.
//
// As in `tokenizers`: added tokens are cut out of the text first (leftmost,
// longest first); each stretch between them is normalised, pre-tokenized into
// words (PCRE2 regexes for Split and ByteLevel), and each word is BPE-merged
// (rank_bpe.h) once and then looked up. Byte-level files merge over the word's
// bytes; SentencePiece-style files over its characters, with byte fallback
// (<0xNN>) or the unknown token for characters outside the vocabulary.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/hf_bpe_spec.h"
#include "data/rank_bpe.h"
#include "data/split_regex.h"
#include "data/text_encoder.h"

namespace moelab {

class HfBpeEncoder : public TextEncoder {
 public:
  // `eos_token`: the token that ends documents; empty: the file's own
  // (<|endoftext|>, <|end_of_text|>, </s> or <eos> among the added tokens).
  HfBpeEncoder(const std::string& json_text, const std::string& eos_token,
               const std::string& origin);

  int64_t vocab_size() const override { return vocab_size_; }
  int64_t eos_id() const override { return eos_id_; }
  std::vector<std::vector<uint32_t>> encode_documents(
      const std::vector<std::string>& texts) const override;
  std::string decode(const std::vector<int>& ids) const override;

 private:
  struct Scratch;
  void add_vocabulary(const HfBpeSpec& spec);
  void add_merges(const HfBpeSpec& spec);
  void choose_eos(const HfBpeSpec& spec, const std::string& eos_token);
  void encode_text(std::string_view text, Scratch& scratch, std::vector<uint32_t>& ids) const;
  void encode_segment(std::string_view segment, bool first, Scratch& scratch,
                      std::vector<uint32_t>& ids) const;
  void pre_tokenize(std::string_view text, size_t regex, Scratch& scratch,
                    std::vector<uint32_t>& ids) const;
  void encode_metaspace(std::string_view segment, bool first, Scratch& scratch,
                        std::vector<uint32_t>& ids) const;
  void encode_characters(std::string_view word, std::vector<uint32_t>& ids) const;
  // Length of the added token starting at text[at] (the longest), or 0.
  size_t added_token_at(std::string_view text, size_t at, uint32_t* id) const;

  std::string origin_;
  HfBpeSpec spec_;
  ByteBpe bytes_;                                     // byte-level files
  std::unordered_map<std::string, uint32_t> pieces_;  // other files: token text -> id
  RankBpe piece_merges_;
  std::vector<std::unique_ptr<SplitRegex>> regexes_;
  std::vector<std::vector<std::pair<std::string, uint32_t>>> added_by_first_byte_;
  std::vector<std::string> id_text_;  // decoded text of each id
  uint32_t fallback_ids_[256] = {};
  bool has_all_fallback_bytes_ = false;
  int64_t unk_id_ = -1;
  int64_t vocab_size_ = 0;
  int64_t eos_id_ = -1;
};

}  // namespace moelab
