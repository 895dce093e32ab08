// The parts of a SentencePiece model file (a serialized ModelProto) that
// encoding needs, read straight from the protobuf wire format: pieces with
// their scores and types, the normalizer settings and its precompiled character
// map, and the trainer's model type and byte-fallback flag. No protobuf library
// is linked (see tokenizer.h for why).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moelab {

enum class PieceType : int {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

struct SpmPiece {
  std::string text;
  float score = 0;
  PieceType type = PieceType::kNormal;
};

struct SpmModel {
  std::vector<SpmPiece> pieces;  // id = index
  int model_type = 1;            // TrainerSpec.ModelType: 1 unigram, 2 BPE, 3 word, 4 char
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  std::string normalizer_name;
  std::string precompiled_charsmap;  // empty: no character normalisation
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// Parses `bytes`; an InputError naming `origin` when they are not a ModelProto.
SpmModel parse_spm_model(const std::string& bytes, const std::string& origin);

// The model's USER_DEFINED pieces, which SentencePiece keeps whole: neither
// normalised nor merged with their neighbours.
class UserSymbols {
 public:
  explicit UserSymbols(const SpmModel& model);
  // Length of the longest symbol that `text` starts with; 0 when none does.
  size_t match(std::string_view text) const;
  bool empty() const { return symbols_.empty(); }

 private:
  std::vector<std::string> symbols_;
};

}  // namespace moelab
