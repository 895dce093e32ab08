// What every tokenizer kind provides to Tokenizer (tokenizer.h): documents to
// ids, each followed by the tokenizer's EOS, and ids back to text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moelab {

// The ids a tokenizer file's post-processor puts around each document (a
// tokenizer.json's template: Llama's <s> / <|begin_of_text|> in front).
struct DocumentTemplate {
  std::vector<uint32_t> before;  // ids in front of the document's
  std::vector<uint32_t> after;   // ids after them
  bool empty() const { return before.empty() && after.empty(); }
};

class TextEncoder {
 public:
  virtual ~TextEncoder() = default;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t eos_id() const = 0;
  // Thread-safe: each call keeps its own caches and regex state.
  virtual std::vector<std::vector<uint32_t>> encode_documents(
      const std::vector<std::string>& texts) const = 0;
  virtual std::string decode(const std::vector<int>& ids) const = 0;
  virtual DocumentTemplate document_template() const { return {}; }
};

}  // namespace moelab
