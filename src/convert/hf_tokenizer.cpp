#include "convert/hf_tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/spm_model.h"
#include "data/tokenizer.h"
#include "util/atomic_file.h"

namespace moelab {
namespace {

std::string spm_path(const std::string& data_dir) {
  return data_dir + "/tokenizer.model";
}

// tokenizer.model as prepared, and the wrapper's settings: its special
// tokens are the model's own pieces (none added, so the vocabulary stays the
// model's), and no BOS or EOS is added to encoded text.
void write_sentencepiece(const std::string& data_dir, const std::string& out, int64_t max_length) {
  const std::string bytes = read_text_file(spm_path(data_dir), "SentencePiece model");
  const Tokenizer tokenizer(bytes, spm_path(data_dir));
  const SpmModel model = parse_spm_model(bytes, spm_path(data_dir));
  nlohmann::json config = {{"tokenizer_class", "BertGenerationTokenizer"},
                           {"model_max_length", max_length},
                           {"add_bos_token", false},
                           {"add_eos_token", false},
                           {"bos_token", nullptr},
                           {"eos_token", nullptr},
                           {"unk_token", nullptr},
                           {"pad_token", nullptr},
                           {"sep_token", nullptr}};
  if (tokenizer.eos_id() >= 0) config["eos_token"] = model.pieces[size_t(tokenizer.eos_id())].text;
  for (const auto& piece : model.pieces) {
    if (piece.type == PieceType::kUnknown) config["unk_token"] = piece.text;
    if (piece.type == PieceType::kControl && piece.text == "<s>") config["bos_token"] = piece.text;
  }
  write_file_atomically(out + "/tokenizer.model", bytes);
  write_file_atomically(out + "/tokenizer_config.json", config.dump(2) + "\n");
}

}  // namespace

TokenizerKind dataset_tokenizer_kind(const std::string& data_dir) {
  if (!data_dir.empty() && std::filesystem::exists(spm_path(data_dir))) {
    return TokenizerKind::SentencePiece;
  }
  return TokenizerKind::None;
}

// A Hugging Face tokenizer.json dataset would be one more kind here, written
// by copying the bytes it was prepared with.
TokenizerKind write_hf_tokenizer(const std::string& data_dir, const std::string& out,
                                 int64_t max_length) {
  const TokenizerKind kind = dataset_tokenizer_kind(data_dir);
  switch (kind) {
    case TokenizerKind::None:
      break;
    case TokenizerKind::SentencePiece:
      write_sentencepiece(data_dir, out, max_length);
      break;
  }
  return kind;
}

}  // namespace moelab
