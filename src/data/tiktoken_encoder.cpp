#include "data/tiktoken_encoder.h"

#include <sstream>

#include "data/utf8.h"
#include "util/error.h"

namespace moelab {

namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// False for anything but padded base64.
bool decode_base64(const std::string& text, std::string* bytes) {
  bytes->clear();
  uint32_t bits = 0;
  int count = 0;
  size_t padding = 0;
  for (char c : text) {
    if (c == '=') {
      ++padding;
      continue;
    }
    const int value = base64_value(c);
    if (value < 0 || padding > 0) return false;
    bits = bits << 6 | uint32_t(value);
    count += 6;
    if (count >= 8) {
      count -= 8;
      *bytes += char(bits >> count & 0xFF);
    }
  }
  return text.size() % 4 == 0 && padding <= 2;
}

}  // namespace

TiktokenEncoder::TiktokenEncoder(const std::string& file_bytes, const std::string& pattern,
                                 const std::string& eos_token, const std::string& origin)
    : origin_(origin), bytes_(origin) {
  if (pattern.empty()) {
    throw InputError(origin +
                     ": a tiktoken file needs its split pattern: pass "
                     "--tiktoken-pattern gpt2|cl100k|o200k or a regex");
  }
  if (eos_token.empty()) {
    throw InputError(origin +
                     ": a tiktoken file names no end-of-document token: pass "
                     "--eos-token (e.g. '<|endoftext|>')");
  }
  read_ranks(file_bytes);
  bytes_.check_bytes();
  bytes_.set_whole_word_first(true);
  add_merges();
  regex_ = std::make_unique<SplitRegex>(tiktoken_pattern(pattern), RegexDialect::kRust, origin);
  id_bytes_.push_back(eos_token);
}

void TiktokenEncoder::read_ranks(const std::string& file_bytes) {
  std::istringstream lines(file_bytes);
  std::string line, token;
  for (int64_t number = 1; std::getline(lines, line); ++number) {
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    char* end = nullptr;
    const unsigned long long rank =
        space == std::string::npos ? 0 : std::strtoull(line.c_str() + space + 1, &end, 10);
    if (space == std::string::npos || !decode_base64(line.substr(0, space), &token) ||
        end == line.c_str() + space + 1 || *end != '\0' || rank != id_bytes_.size()) {
      throw InputError(origin_ + ":" + std::to_string(number) + ": expected '<base64 token> " +
                       std::to_string(id_bytes_.size()) + "' (ranks in order from 0)");
    }
    if (!bytes_.add_token(token, uint32_t(rank))) {
      throw InputError(origin_ + ":" + std::to_string(number) + ": token appears twice");
    }
    id_bytes_.push_back(token);
  }
}

// tiktoken merges any two adjacent parts whose bytes together are a token, at
// that token's rank: every split of every token into two tokens is a merge.
void TiktokenEncoder::add_merges() {
  for (uint32_t rank = 0; rank < id_bytes_.size(); ++rank) {
    const std::string_view token = id_bytes_[rank];
    for (size_t cut = 1; cut < token.size(); ++cut) {
      const uint32_t* left = bytes_.find(token.substr(0, cut));
      const uint32_t* right = bytes_.find(token.substr(cut));
      if (left && right) bytes_.merges().add_merge(*left, *right, rank, rank);
    }
  }
}

std::vector<std::vector<uint32_t>> TiktokenEncoder::encode_documents(
    const std::vector<std::string>& texts) const {
  WordCache words;
  SplitRegex::Matcher matcher(*regex_);
  std::vector<std::vector<uint32_t>> encoded;
  encoded.reserve(texts.size());
  for (const std::string& text : texts) {
    require_valid_utf8(text, origin_);
    std::vector<uint32_t> ids;
    matcher.split(text, [&](std::string_view piece) {
      append_word_ids(piece, words, ids,
                      [this](std::string_view word, auto& out) { bytes_.encode_word(word, out); });
    });
    ids.push_back(uint32_t(eos_id()));
    encoded.push_back(std::move(ids));
  }
  return encoded;
}

std::string TiktokenEncoder::decode(const std::vector<int>& ids) const {
  std::string text;
  for (int id : ids) {
    if (id < 0 || id >= vocab_size()) {
      throw InputError(origin_ + ": cannot decode id " + std::to_string(id) + " (vocabulary of " +
                       std::to_string(vocab_size()) + ")");
    }
    text += id_bytes_[id];
  }
  return text;
}

}  // namespace moelab
