// SentencePiece BPE tokenizer: trained from a sample of documents or loaded
// from an existing .model file. Every encoded document ends with EOS.
//
// Encoding is native (bpe_encoder.h: the same ids as spm_encode, several times
// faster, in-process). Training and decoding run SentencePiece's command-line
// tools (package `sentencepiece`) on temporary files: Debian's libsentencepiece
// bundles its own protobuf-lite (3.14) and exports its symbols, which collide
// with LibTorch's protobuf in one process (version check failure or a crash at
// start-up).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moelab {

class BpeEncoder;

struct TokenizerTrainOptions {
  int64_t vocab_size = 4096;
  double character_coverage = 0.9995;
  bool byte_fallback = false;
};

// Trains BPE on `documents` and returns the serialized model (the bytes of a
// .model file). Deterministic for the same documents and options.
std::string train_tokenizer(const std::vector<std::string>& documents,
                            const TokenizerTrainOptions& options);

class Tokenizer {
 public:
  // `origin` names where the bytes came from, for messages.
  Tokenizer(const std::string& serialized_model, const std::string& origin);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept = default;
  Tokenizer& operator=(Tokenizer&&) noexcept = default;
  static Tokenizer from_file(const std::string& path);

  int64_t vocab_size() const { return vocab_size_; }
  int64_t eos_id() const { return eos_id_; }
  // Token ids of each text followed by EOS. Thread-safe. Newlines inside a
  // document are encoded as spaces (SentencePiece's normalisation does the same).
  std::vector<std::vector<uint32_t>> encode_documents(const std::vector<std::string>& texts) const;
  std::string decode(const std::vector<int>& ids) const;
  const std::string& serialized() const { return serialized_; }

 private:
  std::string serialized_;
  std::string origin_;
  std::string model_path_;  // private temporary copy the tools read
  std::shared_ptr<const BpeEncoder> encoder_;
  int64_t vocab_size_ = 0;
  int64_t eos_id_ = -1;
};

}  // namespace moelab
