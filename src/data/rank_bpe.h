// Rank-ordered BPE merging over token ids, the algorithm of `tokenizers` BPE
// and of tiktoken: repeatedly merge the adjacent pair with the lowest merge
// rank (the leftmost among equals) until no adjacent pair has a merge.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moelab {

class RankBpe {
 public:
  // Adds the merge left + right -> merged at `rank`; the first one given for
  // a pair wins (false for a later one, which can never apply).
  bool add_merge(uint32_t left, uint32_t right, uint32_t rank, uint32_t merged);
  size_t size() const { return merges_.size(); }

  // Merges `symbols` in place.
  void merge(std::vector<uint32_t>& symbols) const;

 private:
  struct Merge {
    uint32_t rank;
    uint32_t merged;
  };
  static uint64_t key(uint32_t left, uint32_t right) { return uint64_t(left) << 32 | right; }
  const Merge* find(uint32_t left, uint32_t right) const;

  std::unordered_map<uint64_t, Merge> merges_;
};

// Ids of words already encoded: encoders look each pre-tokenized word up here
// before merging it (`key` is a reusable buffer).
struct WordCache {
  std::unordered_map<std::string, std::vector<uint32_t>> ids;
  std::string key;
};

}  // namespace moelab

namespace moelab {

// Appends the ids of `word`, computed by encode(word, ids-out) once per
// distinct word. Very long words are not kept (as `tokenizers` does), so one
// huge line does not pin its ids in memory.
template <typename Encode>
void append_word_ids(std::string_view word, WordCache& cache, std::vector<uint32_t>& ids,
                     Encode&& encode) {
  constexpr size_t kLongestCachedWord = 256;
  if (word.size() > kLongestCachedWord) {
    std::vector<uint32_t> word_ids;
    encode(word, word_ids);
    ids.insert(ids.end(), word_ids.begin(), word_ids.end());
    return;
  }
  cache.key.assign(word);
  auto it = cache.ids.find(cache.key);
  if (it == cache.ids.end()) {
    std::vector<uint32_t> word_ids;
    encode(word, word_ids);
    it = cache.ids.emplace(cache.key, std::move(word_ids)).first;
  }
  ids.insert(ids.end(), it->second.begin(), it->second.end());
}

// BPE over the bytes of a word (GPT-2 style byte-level BPE and tiktoken): each
// byte starts as its own token, then RankBpe merges.
class ByteBpe {
 public:
  // `origin` names the file for messages.
  explicit ByteBpe(std::string origin) : origin_(std::move(origin)) {}
  // Token `id` is these bytes. False when the bytes already name a token.
  bool add_token(const std::string& bytes, uint32_t id);
  // Checks that every single byte is a token; InputError otherwise.
  void check_bytes() const;
  // The bytes that are no token (encode_word leaves them out, as `tokenizers`
  // leaves out a character its vocabulary lacks).
  std::vector<int> missing_bytes() const;
  const uint32_t* find(std::string_view bytes) const;
  RankBpe& merges() { return bpe_; }
  // A word that is itself a token is that token, without merging (tiktoken,
  // and `tokenizers` with ignore_merges).
  void set_whole_word_first(bool on) { whole_word_first_ = on; }

  void encode_word(std::string_view word, std::vector<uint32_t>& ids) const;

 private:
  std::string origin_;
  std::unordered_map<std::string, uint32_t> token_ids_;
  uint32_t byte_ids_[256] = {};
  bool has_byte_[256] = {};
  RankBpe bpe_;
  bool whole_word_first_ = false;
};

}  // namespace moelab
