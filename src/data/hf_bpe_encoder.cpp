#include "data/hf_bpe_encoder.h"

#include <cstdio>

#include "data/byte_alphabet.h"
#include "data/utf8.h"
#include "util/error.h"
#include "util/log.h"

namespace moelab {

struct HfBpeEncoder::Scratch {
  TextScratch text;
  WordCache words;
  std::string word_bytes;  // a word in the byte alphabet, as bytes
};

HfBpeEncoder::HfBpeEncoder(const std::string& json_text, const std::string& eos_token,
                           const std::string& origin)
    : origin_(origin), spec_(parse_hf_bpe(json_text, origin, layout_)), bytes_(origin) {
  add_vocabulary();
  add_merges();
  add_added_tokens();
  choose_eos(eos_token);
}

void HfBpeEncoder::add_vocabulary() {
  const bool byte_level = spec_.pre_tokenizer->byte_level();
  id_token_.resize(size_t(spec_.vocab_size));
  std::string bytes;
  for (const auto& [token, id] : spec_.model.vocab) {
    id_token_[id] = token;
    // A byte-level token outside the alphabet can only come from an added token.
    if (byte_level && bytes_of_byte_alphabet(token, &bytes)) bytes_.add_token(bytes, id);
    if (!byte_level) pieces_.emplace(token, id);
  }
  if (byte_level) {
    warn_of_missing_bytes();
    bytes_.set_whole_word_first(spec_.model.ignore_merges);
  }
  if (spec_.model.unk_token) {
    const auto it = pieces_.find(*spec_.model.unk_token);
    if (it != pieces_.end()) unk_id_ = it->second;
  }
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    const auto it = pieces_.find(name);
    if (it == pieces_.end()) continue;
    fallback_ids_[byte] = it->second;
    has_fallback_byte_[byte] = true;
  }
}

// Published byte-level vocabularies may lack bytes (Falcon's lacks some
// control characters): `tokenizers` leaves such bytes out of the ids, and so
// does moelab; the ones valid UTF-8 text can hold are worth a warning.
void HfBpeEncoder::warn_of_missing_bytes() const {
  std::string listed;
  for (int byte : bytes_.missing_bytes()) {
    if (byte == 0xC0 || byte == 0xC1 || byte >= 0xF5) continue;  // never in valid UTF-8
    char hex[8];
    std::snprintf(hex, sizeof(hex), " 0x%02X", byte);
    listed += hex;
  }
  if (!listed.empty()) {
    spdlog::warn(
        "{}: the byte-level vocabulary has no token for bytes{}; they are left out of "
        "the ids, as `tokenizers` leaves them out",
        origin_, listed);
  }
}

void HfBpeEncoder::add_merges() {
  const bool byte_level = spec_.pre_tokenizer->byte_level();
  std::string raw;
  const auto id_of = [&](const std::string& token) -> const uint32_t* {
    if (!byte_level) {
      const auto it = pieces_.find(token);
      return it == pieces_.end() ? nullptr : &it->second;
    }
    return bytes_of_byte_alphabet(token, &raw) ? bytes_.find(raw) : nullptr;
  };
  RankBpe& merges = byte_level ? bytes_.merges() : piece_merges_;
  for (size_t rank = 0; rank < spec_.model.merges.size(); ++rank) {
    const auto& [a, b] = spec_.model.merges[rank];
    const uint32_t* a_id = id_of(a);
    const uint32_t* b_id = id_of(b);
    const uint32_t* merged = id_of(a + b);
    const std::string where =
        origin_ + ": model.merges[" + std::to_string(rank) + "]: '" + a + " " + b + "' ";
    if (!a_id || !b_id || !merged) {
      throw InputError(where + "names a token that is not in the vocabulary");
    }
    if (!merges.add_merge(*a_id, *b_id, uint32_t(rank), *merged)) {
      throw InputError(where + "repeats an earlier merge");
    }
  }
}

// Each added token's pattern: its content, or for normalized ones the
// normalised content (which is also the string the decoder reads for it).
void HfBpeEncoder::add_added_tokens() {
  TextScratch scratch = layout_.make();
  for (const HfAddedToken& token : spec_.added_tokens) {
    std::string pattern = token.content;
    if (token.normalized) pattern = std::string(spec_.normalizer->apply(token.content, scratch));
    AddedTokenMatcher& matcher = token.normalized ? normalized_added_ : raw_added_;
    if (!matcher.add(pattern, token)) {
      throw InputError(origin_ + ": added token '" + token.content + "' " +
                       (pattern.empty() ? "normalizes to nothing"
                                        : "is matched by the same text as another added token"));
    }
    id_token_[token.id] = pattern;
  }
}

void HfBpeEncoder::choose_eos(const std::string& eos_token) {
  const auto id_of = [&](const std::string& text) -> int64_t {
    for (const auto& token : spec_.added_tokens) {
      if (token.content == text) return token.id;
    }
    for (const auto& [token, id] : spec_.model.vocab) {
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
    for (const auto& token : spec_.added_tokens) {
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
  Scratch scratch{layout_.make(), {}, {}};
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

void HfBpeEncoder::encode_text(std::string_view text, Scratch& scratch,
                               std::vector<uint32_t>& ids) const {
  if (raw_added_.empty()) {
    encode_raw_piece(text, true, scratch, ids);
    return;
  }
  raw_added_.split(text, [&](size_t begin, size_t end, int64_t id) {
    if (id >= 0) {
      ids.push_back(uint32_t(id));
    } else {
      encode_raw_piece(text.substr(begin, end - begin), begin == 0, scratch, ids);
    }
  });
}

void HfBpeEncoder::encode_raw_piece(std::string_view piece, bool at_start, Scratch& scratch,
                                    std::vector<uint32_t>& ids) const {
  const std::string_view normalized = spec_.normalizer->apply(piece, scratch.text);
  const auto pre_tokenize = [&](std::string_view part, bool part_at_start) {
    spec_.pre_tokenizer->run(part, part_at_start, scratch.text,
                             [&](std::string_view word) { encode_word(word, scratch, ids); });
  };
  if (normalized_added_.empty()) {
    if (!normalized.empty()) pre_tokenize(normalized, at_start);
    return;
  }
  normalized_added_.split(normalized, [&](size_t begin, size_t end, int64_t id) {
    if (id >= 0) {
      ids.push_back(uint32_t(id));
    } else {
      pre_tokenize(normalized.substr(begin, end - begin), at_start && begin == 0);
    }
  });
}

void HfBpeEncoder::encode_word(std::string_view word, Scratch& scratch,
                               std::vector<uint32_t>& ids) const {
  if (!spec_.pre_tokenizer->byte_level()) {
    append_word_ids(word, scratch.words, ids,
                    [this](std::string_view w, auto& out) { encode_characters(w, out); });
    return;
  }
  if (spec_.pre_tokenizer->words_in_byte_alphabet()) {
    bytes_of_byte_alphabet(word, &scratch.word_bytes);
    word = scratch.word_bytes;
  }
  append_word_ids(word, scratch.words, ids,
                  [this](std::string_view w, auto& out) { bytes_.encode_word(w, out); });
}

// `tokenizers` BPE over characters: each character its token, else its
// bytes' <0xNN> tokens (byte_fallback, when all exist), else the unknown
// token, which waits for the next known character (one for a run with
// fuse_unk; byte tokens do not end the run); then the merges.
void HfBpeEncoder::encode_characters(std::string_view word, std::vector<uint32_t>& ids) const {
  ids.clear();
  if (spec_.model.ignore_merges) {
    if (const auto it = pieces_.find(std::string(word)); it != pieces_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  bool unknown_waits = false;
  std::string character;
  for (size_t at = 0; at < word.size();) {
    const size_t length = std::max<size_t>(1, utf8_sequence_length(word, at));
    character.assign(word.substr(at, length));
    at += length;
    if (const auto it = pieces_.find(character); it != pieces_.end()) {
      if (unknown_waits) ids.push_back(uint32_t(unk_id_));
      unknown_waits = false;
      ids.push_back(it->second);
      continue;
    }
    bool all_bytes = spec_.model.byte_fallback;
    for (char c : character) all_bytes = all_bytes && has_fallback_byte_[static_cast<uint8_t>(c)];
    if (all_bytes) {
      for (char c : character) ids.push_back(fallback_ids_[static_cast<uint8_t>(c)]);
    } else if (unk_id_ >= 0) {
      if (unknown_waits && !spec_.model.fuse_unk) ids.push_back(uint32_t(unk_id_));
      unknown_waits = true;
    } else {
      throw InputError(origin_ + ": character '" + character +
                       "' is not in the vocabulary and the model has no unk_token");
    }
  }
  if (unknown_waits) ids.push_back(uint32_t(unk_id_));
  piece_merges_.merge(ids);
}

std::string HfBpeEncoder::decode(const std::vector<int>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int id : ids) {
    if (id < 0 || id >= spec_.vocab_size) {
      throw InputError(origin_ + ": cannot decode id " + std::to_string(id) + " (vocabulary of " +
                       std::to_string(spec_.vocab_size) + ")");
    }
    tokens.push_back(id_token_[size_t(id)]);
  }
  return spec_.decoder->decode(std::move(tokens));
}

}  // namespace moelab
