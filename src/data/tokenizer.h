// The tokenizer a dataset is encoded with. Three kinds:
//   - SentencePiece BPE (.model): trained by prep or given. Encoding is native
//     (bpe_encoder.h: spm_encode's ids, in-process). Training and decoding run
//     SentencePiece's command-line tools (package `sentencepiece`) on temporary
//     files: Debian's libsentencepiece bundles its own protobuf-lite (3.14) and
//     exports its symbols, which collide with LibTorch's protobuf in one process.
//   - a Hugging Face tokenizer.json with a BPE model (hf_bpe_encoder.h):
//     byte-level (GPT-2, Llama 3, Qwen, OLMo) or SentencePiece-style (Llama 2,
//     Mistral); the ids of `tokenizers`.
//   - a tiktoken file (tiktoken_encoder.h): the ids of tiktoken.
// Every encoded document ends with the tokenizer's EOS.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moelab {

class TextEncoder;

struct TokenizerTrainOptions {
  int64_t vocab_size = 4096;
  double character_coverage = 0.9995;
  bool byte_fallback = false;
};

// Trains BPE on `documents` and returns the serialized model (the bytes of a
// .model file). Deterministic for the same documents and options.
std::string train_tokenizer(const std::vector<std::string>& documents,
                            const TokenizerTrainOptions& options);

enum class TokenizerKind { kSentencePiece, kHfBpe, kTiktoken };

// "sentencepiece", "tokenizer.json", "tiktoken".
const char* tokenizer_kind_name(TokenizerKind kind);

// What a tokenizer file may not say itself.
struct TokenizerSettings {
  std::string eos_token;         // tokenizer.json: overrides its own; tiktoken: required
  std::string tiktoken_pattern;  // tiktoken: gpt2, cl100k, o200k or a regex
  // tokenizer.json with a post-processor template: whether each document gets
  // its special tokens (Llama's BOS); unset (no template, or a dataset made
  // before templates were read) means not.
  std::optional<bool> add_special_tokens;
};

class Tokenizer {
 public:
  // A SentencePiece model; `origin` names where the bytes came from, for messages.
  Tokenizer(const std::string& serialized_model, const std::string& origin);
  Tokenizer(TokenizerKind kind, const std::string& file_bytes, const TokenizerSettings& settings,
            const std::string& origin);
  // The kind from the file: .tiktoken by name, tokenizer.json by content (a
  // JSON object), a SentencePiece model otherwise.
  static Tokenizer from_file(const std::string& path, const TokenizerSettings& settings = {});

  TokenizerKind kind() const { return kind_; }
  // Whether the file's post-processor puts special tokens around documents.
  bool has_document_template() const;
  // This tokenizer with the template's special tokens on or off (recorded in
  // settings()); unchanged when the file has no template.
  Tokenizer with_special_tokens(bool add) const;
  int64_t vocab_size() const;
  int64_t eos_id() const;
  // Token ids of each text followed by EOS (and, with add_special_tokens, the
  // template's ids around them, EOS not repeated when the template ends with
  // it). Thread-safe. SentencePiece encodes newlines inside a document as
  // spaces (its normalisation does the same).
  std::vector<std::vector<uint32_t>> encode_documents(const std::vector<std::string>& texts) const;
  std::string decode(const std::vector<int>& ids) const;
  // The tokenizer file's bytes, as given (what an export writes next to weights).
  const std::string& file_bytes() const { return file_bytes_; }
  const TokenizerSettings& settings() const { return settings_; }
  // The checksum datasets record (tokenizer_checksum in shards and manifests).
  std::string checksum() const;

  // A dataset's copy of its tokenizer: tokenizer.model, tokenizer.json or
  // tokenizer.tiktoken, plus tokenizer_settings.json for the latter two.
  void save_to_dataset(const std::string& dataset_dir) const;
  static Tokenizer from_dataset(const std::string& dataset_dir);
  // The checksum of the dataset's copy, without building the encoder; none
  // when the folder holds no tokenizer file.
  static std::optional<std::string> dataset_checksum(const std::string& dataset_dir);
  // The files save_to_dataset may write (for a folder being replaced).
  static std::vector<std::string> dataset_file_names();

 private:
  TokenizerKind kind_;
  std::string file_bytes_;
  TokenizerSettings settings_;
  std::shared_ptr<const TextEncoder> encoder_;
};

}  // namespace moelab
