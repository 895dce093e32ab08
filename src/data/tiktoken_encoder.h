// Encoder for a tiktoken BPE file (`*.tiktoken`: one "base64-token rank" per
// line), giving tiktoken's encode_ordinary ids followed by EOS. Text is split by
// the encoding's regex (tiktoken_pattern in split_regex.h); a piece that is a
// token is that token, the others are merged byte by byte in rank order.
//
// The EOS is a special token outside the file: `eos_token` gets the id after
// the highest rank (as cl100k's <|endoftext|> would if it were numbered next).
// Special-token text inside documents is encoded as ordinary text.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/rank_bpe.h"
#include "data/split_regex.h"
#include "data/text_encoder.h"

namespace moelab {

class TiktokenEncoder : public TextEncoder {
 public:
  TiktokenEncoder(const std::string& file_bytes, const std::string& pattern,
                  const std::string& eos_token, const std::string& origin);

  int64_t vocab_size() const override { return int64_t(id_bytes_.size()); }
  int64_t eos_id() const override { return vocab_size() - 1; }
  std::vector<std::vector<uint32_t>> encode_documents(
      const std::vector<std::string>& texts) const override;
  std::string decode(const std::vector<int>& ids) const override;

 private:
  void read_ranks(const std::string& file_bytes);
  void add_merges();

  std::string origin_;
  ByteBpe bytes_;
  std::unique_ptr<SplitRegex> regex_;
  std::vector<std::string> id_bytes_;  // by rank, then the EOS
};

}  // namespace moelab
