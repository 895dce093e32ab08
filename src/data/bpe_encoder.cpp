#include "data/bpe_encoder.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "util/error.h"

namespace moelab {
namespace {

constexpr int kBpe = 2;  // TrainerSpec.ModelType

// Bytes in the UTF-8 character led by `lead` (the text is valid after normalising).
size_t char_length(uint8_t lead) {
  static constexpr uint8_t kLength[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLength[lead >> 4];
}

struct Symbol {
  size_t begin = 0, length = 0;  // a span of the normalised text; length 0 = merged away
  int prev = -1, next = -1;
  bool frozen = false;  // a user-defined symbol
};

struct Candidate {  // merging symbols[left] with symbols[right] would make a piece
  float score;
  int left, right;
  size_t length;
};

// Highest score first; among equal scores the leftmost pair.
struct LowerPriority {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

BpeEncoder::BpeEncoder(const SpmModel& model, const std::string& origin)
    : normalizer_(model, origin),
      user_symbols_(model),
      pieces_(model.pieces),
      byte_fallback_(model.byte_fallback) {
  if (model.model_type != kBpe) {
    throw InputError(origin + ": SentencePiece model type " + std::to_string(model.model_type) +
                     " is not BPE (2); moelab's encoder reads BPE models only");
  }
  space_ = model.escape_whitespaces ? "\xE2\x96\x81" : " ";
  words_are_independent_ = !model.treat_whitespace_as_suffix;
  int found_bytes = 0;
  for (size_t id = 0; id < pieces_.size(); ++id) {
    const SpmPiece& piece = pieces_[id];
    const std::string_view text = piece.text;
    const bool mergeable = piece.type == PieceType::kNormal ||
                           piece.type == PieceType::kUserDefined ||
                           piece.type == PieceType::kUnused;
    if (!(mergeable ? mergeable_ : reserved_).emplace(text, int(id)).second) {
      throw InputError(origin + ": piece '" + piece.text + "' appears twice");
    }
    if (piece.type == PieceType::kUnknown) unknown_id_ = int(id);
    if (piece.type == PieceType::kUnused || piece.type == PieceType::kUserDefined ||
        (mergeable && text.find(space_, 1) != std::string_view::npos)) {
      words_are_independent_ = false;
    }
    unsigned byte = 0;
    if (piece.type == PieceType::kByte && text.size() == 6 &&
        std::sscanf(piece.text.c_str(), "<0x%2X>", &byte) == 1) {
      byte_ids_[byte] = uint32_t(id);
      ++found_bytes;
    }
  }
  if (byte_fallback_ && found_bytes != 256) {
    throw InputError(origin + ": byte fallback is on but the model has " +
                     std::to_string(found_bytes) + " of the 256 byte pieces");
  }
}

std::vector<uint32_t> BpeEncoder::encode(std::string_view text, WordCache& cache) const {
  const std::string normalized = normalizer_.normalize(text);
  std::vector<uint32_t> ids;
  if (words_are_independent_) {
    encode_words(normalized, cache, ids);
  } else {
    encode_span(normalized, ids);
  }
  if (!byte_fallback_) {
    // SentencePiece merges a run of unknown pieces into one unknown token.
    const uint32_t unknown = uint32_t(unknown_id_);
    ids.erase(
        std::unique(ids.begin(), ids.end(),
                    [unknown](uint32_t a, uint32_t b) { return a == unknown && b == unknown; }),
        ids.end());
  }
  return ids;
}

void BpeEncoder::encode_words(std::string_view normalized, WordCache& cache,
                              std::vector<uint32_t>& ids) const {
  const std::string_view all = normalized;
  std::string key;
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find(space_, start + 1);
    if (end == std::string_view::npos) end = all.size();
    key.assign(all.substr(start, end - start));
    auto it = cache.find(key);
    if (it == cache.end()) {
      std::vector<uint32_t> word;
      encode_span(key, word);
      it = cache.emplace(key, std::move(word)).first;
    }
    ids.insert(ids.end(), it->second.begin(), it->second.end());
    start = end;
  }
}

void BpeEncoder::encode_span(std::string_view span, std::vector<uint32_t>& ids) const {
  std::vector<Symbol> symbols;
  for (size_t at = 0; at < span.size();) {
    Symbol s;
    s.begin = at;
    s.length = user_symbols_.match(span.substr(at));
    s.frozen = s.length > 0;
    if (!s.frozen)
      s.length = std::min(char_length(static_cast<uint8_t>(span[at])), span.size() - at);
    s.prev = int(symbols.size()) - 1;
    at += s.length;
    s.next = at < span.size() ? int(symbols.size()) + 1 : -1;
    symbols.push_back(s);
  }
  std::priority_queue<Candidate, std::vector<Candidate>, LowerPriority> agenda;
  // UNUSED pieces are merged like others, then split back into what formed them.
  std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> formed_from;
  const auto piece_of = [&](const Symbol& s) { return span.substr(s.begin, s.length); };
  const auto consider = [&](int left, int right) {
    if (left < 0 || right < 0 || symbols[left].frozen || symbols[right].frozen) return;
    const std::string_view merged =
        span.substr(symbols[left].begin, symbols[left].length + symbols[right].length);
    const auto it = mergeable_.find(merged);
    if (it == mergeable_.end()) return;
    const SpmPiece& piece = pieces_[it->second];
    agenda.push({piece.score, left, right, merged.size()});
    if (piece.type == PieceType::kUnused) {
      formed_from[merged] = {piece_of(symbols[left]), piece_of(symbols[right])};
    }
  };
  for (size_t i = 1; i < symbols.size(); ++i) consider(int(i) - 1, int(i));

  while (!agenda.empty()) {
    const Candidate top = agenda.top();
    agenda.pop();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    // Stale: one side was merged into something else since this was queued.
    if (left.length == 0 || right.length == 0 || left.length + right.length != top.length) {
      continue;
    }
    left.length += right.length;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    right.length = 0;
    consider(left.prev, top.left);
    consider(top.left, left.next);
  }

  // Depth-first: an UNUSED piece is replaced by the two pieces that formed it.
  std::vector<std::string_view> pending;
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    pending.push_back(piece_of(symbols[i]));
    while (!pending.empty()) {
      const std::string_view piece = pending.back();
      pending.pop_back();
      const auto it = mergeable_.find(piece);
      const auto split = formed_from.find(piece);
      if (it != mergeable_.end() && pieces_[it->second].type == PieceType::kUnused &&
          split != formed_from.end()) {
        pending.push_back(split->second.second);
        pending.push_back(split->second.first);
      } else {
        append_piece(piece, ids);
      }
    }
  }
}

void BpeEncoder::append_piece(std::string_view piece, std::vector<uint32_t>& ids) const {
  // Reserved pieces (control, unknown, bytes) win over mergeable ones, as in
  // SentencePiece's PieceToId; anything else is unknown.
  int id = unknown_id_;
  if (const auto it = reserved_.find(piece); it != reserved_.end()) {
    id = it->second;
  } else if (const auto it2 = mergeable_.find(piece); it2 != mergeable_.end()) {
    id = it2->second;
  }
  if (byte_fallback_ && id == unknown_id_) {
    for (char c : piece) ids.push_back(byte_ids_[static_cast<uint8_t>(c)]);
    return;
  }
  ids.push_back(uint32_t(id));
}

}  // namespace moelab
