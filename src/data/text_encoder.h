// What every tokenizer kind provides to Tokenizer (tokenizer.h): documents to
// ids, each followed by the tokenizer's EOS, and ids back to text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moelab {

class TextEncoder {
 public:
  virtual ~TextEncoder() = default;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t eos_id() const = 0;
  // Thread-safe: each call keeps its own caches and regex state.
  virtual std::vector<std::vector<uint32_t>> encode_documents(
      const std::vector<std::string>& texts) const = 0;
  virtual std::string decode(const std::vector<int>& ids) const = 0;
};

}  // namespace moelab
