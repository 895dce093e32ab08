// Pre-tokenized corpora read document by document, without a tokenizer:
// Megatron-LM indexed datasets (PREFIX.idx + PREFIX.bin) and 1-D NumPy token
// arrays split at an end-of-document id. Both are validated against their own
// headers before the first document is read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moelab {

class TokenDocumentReader {
 public:
  virtual ~TokenDocumentReader() = default;
  // The next non-empty document; false after the last.
  virtual bool next(std::vector<int64_t>* tokens) = 0;
  // Where the document last returned came from, for messages:
  // "file: document D (byte offset B)".
  virtual std::string where() const = 0;
};

// `prefix` names PREFIX.idx and PREFIX.bin (Megatron's MMapIndexedDataset,
// index version 1, uint16 or int32 tokens). InputError naming the file on a bad
// magic, version or dtype, or an index that disagrees with the .bin.
std::unique_ptr<TokenDocumentReader> open_megatron_documents(const std::string& prefix);

// A .npy file holding one 1-D little-endian uint16, int32 or int64 array; a
// document ends after each `eos_id` (the tail after the last one is a document
// too). InputError naming the file on any other layout.
std::unique_ptr<TokenDocumentReader> open_npy_documents(const std::string& path, int64_t eos_id);

}  // namespace moelab
