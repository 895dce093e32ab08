// Encoder for a Hugging Face tokenizer.json with a BPE model (hf_bpe_spec.h
// lists what it reads), giving the ids `tokenizers` gives for
// encode(text, add_special_tokens=False), followed by EOS; the post-processor
// template's ids are document_template() (Tokenizer adds them when asked).
//
// As in `tokenizers`: added tokens with normalized=false are cut out of the
// raw text (hf_added_tokens.h); each stretch between them is normalised
// (hf_normalizer.h) and cut at the normalized added tokens; each remaining
// stretch is pre-tokenized into words (hf_pre_tokenizer.h), and each word is
// BPE-merged (rank_bpe.h) once and then looked up. Byte-level files merge over
// the word's bytes; the others over its characters, with byte fallback
// (<0xNN>) or the unknown token for characters outside the vocabulary.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/hf_bpe_spec.h"
#include "data/rank_bpe.h"
#include "data/text_encoder.h"

namespace moelab {

class HfBpeEncoder : public TextEncoder {
 public:
  // `eos_token`: the token that ends documents; empty: the file's own
  // (<|endoftext|>, <|end_of_text|>, </s> or <eos> among the added tokens).
  HfBpeEncoder(const std::string& json_text, const std::string& eos_token,
               const std::string& origin);

  int64_t vocab_size() const override { return spec_.vocab_size; }
  int64_t eos_id() const override { return eos_id_; }
  std::vector<std::vector<uint32_t>> encode_documents(
      const std::vector<std::string>& texts) const override;
  std::string decode(const std::vector<int>& ids) const override;
  DocumentTemplate document_template() const override { return spec_.document_template; }

 private:
  struct Scratch;
  void add_vocabulary();
  void warn_of_missing_bytes() const;
  void add_merges();
  void add_added_tokens();
  void choose_eos(const std::string& eos_token);
  void encode_text(std::string_view text, Scratch& scratch, std::vector<uint32_t>& ids) const;
  void encode_raw_piece(std::string_view piece, bool at_start, Scratch& scratch,
                        std::vector<uint32_t>& ids) const;
  void encode_word(std::string_view word, Scratch& scratch, std::vector<uint32_t>& ids) const;
  void encode_characters(std::string_view word, std::vector<uint32_t>& ids) const;

  std::string origin_;
  ScratchLayout layout_;
  HfBpeSpec spec_;
  AddedTokenMatcher raw_added_;         // normalized: false, matched on the raw text
  AddedTokenMatcher normalized_added_;  // normalized: true, matched on normalised text
  ByteBpe bytes_;                       // byte-level files
  std::unordered_map<std::string, uint32_t> pieces_;  // other files: token text -> id
  RankBpe piece_merges_;
  std::vector<std::string> id_token_;  // each id's token string, as the decoder reads it
  uint32_t fallback_ids_[256] = {};
  bool has_fallback_byte_[256] = {};
  int64_t unk_id_ = -1;
  int64_t eos_id_ = -1;
};

}  // namespace moelab
