#include "data/hf_bpe_encoder.h"

#include <algorithm>
#include <cstdio>

#include "data/utf8.h"
#include "util/error.h"

namespace moelab {

namespace {

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // "▁"

void append_utf8(uint32_t code_point, std::string& out) {
  if (code_point < 0x80) {
    out += char(code_point);
  } else if (code_point < 0x800) {
    out += char(0xC0 | code_point >> 6);
    out += char(0x80 | (code_point & 0x3F));
  } else {
    out += char(0xE0 | code_point >> 12);
    out += char(0x80 | (code_point >> 6 & 0x3F));
    out += char(0x80 | (code_point & 0x3F));
  }
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
// others for U+0100 onwards, in byte order.
std::unordered_map<std::string, char> byte_alphabet() {
  std::unordered_map<std::string, char> chars;
  uint32_t next = 256;
  for (uint32_t byte = 0; byte < 256; ++byte) {
    const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                           (byte >= 0xAE && byte <= 0xFF);
    std::string text;
    append_utf8(printable ? byte : next++, text);
    chars.emplace(text, char(byte));
  }
  return chars;
}

// The bytes a byte-level token stands for, or false when it has a character
// outside the alphabet (such a token can only come from an added token).
bool byte_level_bytes(std::string_view token, std::string* bytes) {
  static const std::unordered_map<std::string, char> alphabet = byte_alphabet();
  bytes->clear();
  for (size_t at = 0; at < token.size();) {
    const size_t length = std::max<size_t>(1, utf8_sequence_length(token, at));
    const auto it = alphabet.find(std::string(token.substr(at, length)));
    if (it == alphabet.end()) return false;
    *bytes += it->second;
    at += length;
  }
  return true;
}

// "▁" -> " ", and <0xNN> -> the byte.
std::string metaspace_text(const std::string& token) {
  unsigned byte = 0;
  if (token.size() == 6 && std::sscanf(token.c_str(), "<0x%2X>", &byte) == 1) {
    return std::string(1, char(byte));
  }
  std::string text;
  for (size_t at = 0; at < token.size();) {
    if (token.compare(at, kMetaspace.size(), kMetaspace) == 0) {
      text += ' ';
      at += kMetaspace.size();
    } else {
      text += token[at++];
    }
  }
  return text;
}

}  // namespace

struct HfBpeEncoder::Scratch {
  WordCache words;
  std::vector<std::unique_ptr<SplitRegex::Matcher>> matchers;
  std::string buffer;
};

HfBpeEncoder::HfBpeEncoder(const std::string& json_text, const std::string& eos_token,
                           const std::string& origin)
    : origin_(origin), spec_(parse_hf_bpe(json_text, origin)), bytes_(origin) {
  add_vocabulary(spec_);
  add_merges(spec_);
  for (const std::string& pattern : spec_.split_regexes) {
    regexes_.push_back(std::make_unique<SplitRegex>(pattern, RegexDialect::kOniguruma, origin));
  }
  added_by_first_byte_.resize(256);
  for (const HfAddedToken& token : spec_.added_tokens) {
    if (token.content.empty()) continue;
    added_by_first_byte_[static_cast<uint8_t>(token.content[0])].emplace_back(token.content,
                                                                              token.id);
  }
  for (auto& tokens : added_by_first_byte_) {
    std::stable_sort(tokens.begin(), tokens.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  }
  choose_eos(spec_, eos_token);
}

void HfBpeEncoder::add_vocabulary(const HfBpeSpec& spec) {
  for (const auto& [token, id] : spec.vocab) vocab_size_ = std::max<int64_t>(vocab_size_, id + 1);
  for (const auto& token : spec.added_tokens) {
    vocab_size_ = std::max<int64_t>(vocab_size_, token.id + 1);
  }
  id_text_.resize(vocab_size_);
  std::string bytes;
  for (const auto& [token, id] : spec.vocab) {
    if (spec.byte_level) {
      if (byte_level_bytes(token, &bytes)) {
        bytes_.add_token(bytes, id);
        id_text_[id] = bytes;
      } else {
        id_text_[id] = token;
      }
    } else {
      pieces_.emplace(token, id);
      id_text_[id] = metaspace_text(token);
    }
  }
  for (const auto& token : spec.added_tokens) id_text_[token.id] = token.content;
  if (spec.byte_level) {
    bytes_.check_bytes();
    bytes_.set_whole_word_first(spec.ignore_merges);
  }
  if (spec.unk_token) {
    const auto it = pieces_.find(*spec.unk_token);
    if (it != pieces_.end()) unk_id_ = it->second;
  }
  int fallback_bytes = 0;
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    const auto it = pieces_.find(name);
    if (it == pieces_.end()) continue;
    fallback_ids_[byte] = it->second;
    ++fallback_bytes;
  }
  has_all_fallback_bytes_ = fallback_bytes == 256;
}

void HfBpeEncoder::add_merges(const HfBpeSpec& spec) {
  std::string left, right;
  const auto id_of = [&](const std::string& token, std::string* raw) -> const uint32_t* {
    if (!spec.byte_level) {
      const auto it = pieces_.find(token);
      return it == pieces_.end() ? nullptr : &it->second;
    }
    return byte_level_bytes(token, raw) ? bytes_.find(*raw) : nullptr;
  };
  RankBpe& merges = spec.byte_level ? bytes_.merges() : piece_merges_;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [a, b] = spec.merges[rank];
    std::string merged_raw;
    const uint32_t* a_id = id_of(a, &left);
    const uint32_t* b_id = id_of(b, &right);
    const uint32_t* merged = id_of(a + b, &merged_raw);
    if (!a_id || !b_id || !merged) {
      throw InputError(origin_ + ": merge '" + a + " " + b +
                       "' names a token that is not in the vocabulary");
    }
    merges.add_merge(*a_id, *b_id, uint32_t(rank), *merged);
  }
}

void HfBpeEncoder::choose_eos(const HfBpeSpec& spec, const std::string& eos_token) {
  const auto id_of = [&](const std::string& text) -> int64_t {
    for (const auto& token : spec.added_tokens) {
      if (token.content == text) return token.id;
    }
    for (const auto& [token, id] : spec.vocab) {
      if (token == text) return id;
    }
    return -1;
  };
  if (!eos_token.empty()) {
    eos_id_ = id_of(eos_token);
    if (eos_id_ < 0) {
      throw InputError(origin_ + ": --eos-token '" + eos_token + "' is not a token of this file");
    }
    return;
  }
  for (const char* conventional : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"}) {
    for (const auto& token : spec.added_tokens) {
      if (token.content == conventional) {
        eos_id_ = token.id;
        return;
      }
    }
  }
  throw InputError(origin_ +
                   ": cannot tell which token ends a document (no <|endoftext|>, "
                   "<|end_of_text|>, </s> or <eos> among its added tokens); pass --eos-token");
}

std::vector<std::vector<uint32_t>> HfBpeEncoder::encode_documents(
    const std::vector<std::string>& texts) const {
  Scratch scratch;
  for (const auto& regex : regexes_) {
    scratch.matchers.push_back(std::make_unique<SplitRegex::Matcher>(*regex));
  }
  std::vector<std::vector<uint32_t>> encoded;
  encoded.reserve(texts.size());
  for (const std::string& text : texts) {
    require_valid_utf8(text, origin_);
    std::vector<uint32_t> ids;
    encode_text(text, scratch, ids);
    ids.push_back(uint32_t(eos_id_));
    encoded.push_back(std::move(ids));
  }
  return encoded;
}

size_t HfBpeEncoder::added_token_at(std::string_view text, size_t at, uint32_t* id) const {
  for (const auto& [content, token_id] : added_by_first_byte_[static_cast<uint8_t>(text[at])]) {
    if (text.compare(at, content.size(), content) == 0) {
      *id = token_id;
      return content.size();
    }
  }
  return 0;
}

void HfBpeEncoder::encode_text(std::string_view text, Scratch& scratch,
                               std::vector<uint32_t>& ids) const {
  size_t segment = 0;
  for (size_t at = 0; at < text.size(); ++at) {
    if (added_by_first_byte_[static_cast<uint8_t>(text[at])].empty()) continue;
    uint32_t id = 0;
    const size_t length = added_token_at(text, at, &id);
    if (length == 0) continue;
    encode_segment(text.substr(segment, at - segment), segment == 0, scratch, ids);
    ids.push_back(id);
    segment = at + length;
    at = segment - 1;
  }
  encode_segment(text.substr(segment), segment == 0, scratch, ids);
}

void HfBpeEncoder::encode_segment(std::string_view segment, bool first, Scratch& scratch,
                                  std::vector<uint32_t>& ids) const {
  if (segment.empty()) return;
  if (!spec_.byte_level) {
    encode_metaspace(segment, first, scratch, ids);
    return;
  }
  if (spec_.add_prefix_space && segment[0] != ' ') {
    const std::string prefixed = " " + std::string(segment);
    pre_tokenize(prefixed, 0, scratch, ids);
    return;
  }
  pre_tokenize(segment, 0, scratch, ids);
}

void HfBpeEncoder::pre_tokenize(std::string_view text, size_t regex, Scratch& scratch,
                                std::vector<uint32_t>& ids) const {
  if (regex == regexes_.size()) {
    append_word_ids(text, scratch.words, ids,
                    [this](std::string_view word, auto& out) { bytes_.encode_word(word, out); });
    return;
  }
  scratch.matchers[regex]->split(
      text, [&](std::string_view piece) { pre_tokenize(piece, regex + 1, scratch, ids); });
}

void HfBpeEncoder::encode_metaspace(std::string_view segment, bool first, Scratch& scratch,
                                    std::vector<uint32_t>& ids) const {
  std::string& text = scratch.buffer;
  text.clear();
  for (char c : segment) {
    if (c == ' ' && spec_.metaspace) {
      text += kMetaspace;
    } else {
      text += c;
    }
  }
  const bool starts_with_space = text.compare(0, kMetaspace.size(), kMetaspace) == 0;
  const MetaspacePrepend prepend = spec_.prepend;
  if (prepend == MetaspacePrepend::kUnconditional ||
      (!starts_with_space &&
       (prepend == MetaspacePrepend::kAlways || (prepend == MetaspacePrepend::kFirst && first)))) {
    text.insert(0, kMetaspace);
  }
  const auto encode = [this](std::string_view word, std::vector<uint32_t>& out) {
    encode_characters(word, out);
  };
  if (!spec_.metaspace_split) {
    append_word_ids(text, scratch.words, ids, encode);
    return;
  }
  const std::string_view all = text;
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find(kMetaspace, start + 1);
    if (end == std::string_view::npos) end = all.size();
    append_word_ids(all.substr(start, end - start), scratch.words, ids, encode);
    start = end;
  }
}

void HfBpeEncoder::encode_characters(std::string_view word, std::vector<uint32_t>& ids) const {
  ids.clear();
  if (spec_.ignore_merges) {
    if (const auto it = pieces_.find(std::string(word)); it != pieces_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  bool last_was_unknown = false;
  for (size_t at = 0; at < word.size();) {
    const size_t length = std::max<size_t>(1, utf8_sequence_length(word, at));
    const std::string_view character = word.substr(at, length);
    at += length;
    if (const auto it = pieces_.find(std::string(character)); it != pieces_.end()) {
      ids.push_back(it->second);
      last_was_unknown = false;
    } else if (spec_.byte_fallback && has_all_fallback_bytes_) {
      for (char c : character) ids.push_back(fallback_ids_[static_cast<uint8_t>(c)]);
      last_was_unknown = false;
    } else if (unk_id_ >= 0) {
      if (!(spec_.fuse_unk && last_was_unknown)) ids.push_back(uint32_t(unk_id_));
      last_was_unknown = true;
    } else {
      throw InputError(origin_ + ": character '" + std::string(character) +
                       "' is not in the vocabulary and the model has no unk_token");
    }
  }
  piece_merges_.merge(ids);
}

std::string HfBpeEncoder::decode(const std::vector<int>& ids) const {
  std::string text;
  for (int id : ids) {
    if (id < 0 || id >= vocab_size_) {
      throw InputError(origin_ + ": cannot decode id " + std::to_string(id) + " (vocabulary of " +
                       std::to_string(vocab_size_) + ")");
    }
    text += id_text_[id];
  }
  if (spec_.metaspace && spec_.prepend != MetaspacePrepend::kNever && !text.empty() &&
      text[0] == ' ') {
    text.erase(0, 1);
  }
  return text;
}

}  // namespace moelab
