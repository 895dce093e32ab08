#include "hub/tokenizer_files.h"

#include <nlohmann/json.hpp>

#include "data/spm_model.h"
#include "data/tokenizer.h"
#include "util/atomic_file.h"

namespace moelab {
namespace {

// tokenizer.model as prepared, and the wrapper's settings: its special
// tokens are the model's own pieces (none added, so the vocabulary stays the
// model's), and no BOS or EOS is added to encoded text.
void write_sentencepiece(const Tokenizer& tokenizer, const std::string& out, int64_t max_length) {
  const SpmModel model = parse_spm_model(tokenizer.file_bytes(), out + "/tokenizer.model");
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
  write_file_atomically(out + "/tokenizer.model", tokenizer.file_bytes());
  write_file_atomically(out + "/tokenizer_config.json", config.dump(2) + "\n");
}

// The added token with the EOS id, or null when the EOS is an ordinary vocabulary entry.
nlohmann::json eos_content(const nlohmann::json& file, int64_t eos_id) {
  for (const auto& added : file.value("added_tokens", nlohmann::json::array())) {
    if (added.value("id", int64_t{-1}) == eos_id) return added.value("content", "");
  }
  return nullptr;
}

void write_tokenizer_json(const Tokenizer& tokenizer, const std::string& out, int64_t max_length) {
  auto file = nlohmann::json::parse(tokenizer.file_bytes());
  const nlohmann::json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                 {"model_max_length", max_length},
                                 {"eos_token", eos_content(file, tokenizer.eos_id())}};
  // A dataset prepared without the template's tokens (--no-bos, or made before
  // moelab read templates) gets a file without its post-processor, so that
  // transformers adds none either; otherwise the file goes as it was given.
  const bool drop_template = !tokenizer.settings().add_special_tokens.value_or(false) &&
                             file.contains("post_processor") && !file["post_processor"].is_null();
  if (drop_template) file["post_processor"] = nullptr;
  write_file_atomically(out + "/tokenizer.json",
                        drop_template ? file.dump() : tokenizer.file_bytes());
  write_file_atomically(out + "/tokenizer_config.json", config.dump(2) + "\n");
}

}  // namespace

bool write_hf_tokenizer(const std::string& data_dir, const std::string& out, int64_t max_length) {
  if (data_dir.empty() || !Tokenizer::dataset_checksum(data_dir)) return false;
  const Tokenizer tokenizer = Tokenizer::from_dataset(data_dir);
  switch (tokenizer.kind()) {
    case TokenizerKind::kSentencePiece:
      write_sentencepiece(tokenizer, out, max_length);
      return true;
    case TokenizerKind::kHfBpe:
      write_tokenizer_json(tokenizer, out, max_length);
      return true;
    case TokenizerKind::kTiktoken:
      return false;
  }
  return false;
}

}  // namespace moelab
