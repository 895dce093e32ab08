// A native SentencePiece BPE encoder, giving the ids spm_encode gives for the
// same model (checked against spm_encode in tests/data/bpe_encoder_test.cpp).
//
// The algorithm is SentencePiece's: normalise (spm_normalizer.h), split into
// characters, then repeatedly merge the adjacent pair whose concatenation is a
// piece with the highest score (leftmost on ties); pieces of type UNUSED are
// split back into the pair that formed them; with byte fallback an unknown
// piece becomes its bytes' <0xNN> pieces, without it a run of unknown pieces
// becomes one unknown token.
//
// Speed: no merge crosses the start of a "▁"-word when no piece has "▁" past
// its first character (SentencePiece's split_by_whitespace, the default), so
// each distinct word is encoded once and then looked up. Models where that does
// not hold, or with UNUSED pieces (whose split back depends on the whole line),
// are encoded line by line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/spm_model.h"
#include "data/spm_normalizer.h"

namespace moelab {

class BpeEncoder {
 public:
  // InputError naming `origin` for a model that is not BPE.
  BpeEncoder(const SpmModel& model, const std::string& origin);
  // The piece maps view strings inside pieces_, so the object stays where it is.
  BpeEncoder(const BpeEncoder&) = delete;
  BpeEncoder& operator=(const BpeEncoder&) = delete;

  // Ids of one line of text (as spm_encode --output_format=id), without EOS.
  // `cache` maps words to their ids; pass the same map to encode many texts.
  using WordCache = std::unordered_map<std::string, std::vector<uint32_t>>;
  std::vector<uint32_t> encode(std::string_view text, WordCache& cache) const;

 private:
  // Appends the ids of each "▁"-word of `normalized`, through the cache.
  void encode_words(std::string_view normalized, WordCache& cache,
                    std::vector<uint32_t>& ids) const;
  // Appends the ids of a normalised span, merging across all of it.
  void encode_span(std::string_view span, std::vector<uint32_t>& ids) const;
  // Appends the id of a final piece, or with byte fallback its bytes' ids.
  void append_piece(std::string_view piece, std::vector<uint32_t>& ids) const;

  SpmNormalizer normalizer_;
  UserSymbols user_symbols_;  // single symbols, never merged
  std::vector<SpmPiece> pieces_;
  std::unordered_map<std::string_view, int> mergeable_;  // NORMAL, USER_DEFINED, UNUSED
  std::unordered_map<std::string_view, int> reserved_;   // CONTROL, UNKNOWN, BYTE
  std::string space_;  // what a space became: "▁", or " " without escape_whitespaces
  int unknown_id_ = 0;
  uint32_t byte_ids_[256] = {};
  bool byte_fallback_ = false;
  bool words_are_independent_ = false;
};

}  // namespace moelab
