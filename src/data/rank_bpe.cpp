#include "data/rank_bpe.h"

#include <queue>

#include "util/error.h"

namespace moelab {
namespace {

struct Candidate {  // merging symbol `left` with the next one gives `merged`
  uint32_t rank;
  int left;
  uint32_t merged;
};

// Lowest rank first; among equal ranks the leftmost pair.
struct LaterFirst {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

struct Symbol {
  uint32_t id;
  int prev, next;
  bool alive;
};

}  // namespace

bool RankBpe::add_merge(uint32_t left, uint32_t right, uint32_t rank, uint32_t merged) {
  return merges_.emplace(key(left, right), Merge{rank, merged}).second;
}

const RankBpe::Merge* RankBpe::find(uint32_t left, uint32_t right) const {
  const auto it = merges_.find(key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void RankBpe::merge(std::vector<uint32_t>& ids) const {
  if (ids.size() < 2) return;
  const int count = static_cast<int>(ids.size());
  std::vector<Symbol> symbols(ids.size());
  for (int i = 0; i < count; ++i) symbols[i] = {ids[i], i - 1, i + 1 < count ? i + 1 : -1, true};
  std::priority_queue<Candidate, std::vector<Candidate>, LaterFirst> agenda;
  const auto consider = [&](int left) {
    if (left < 0 || symbols[left].next < 0) return;
    if (const Merge* m = find(symbols[left].id, symbols[symbols[left].next].id)) {
      agenda.push({m->rank, left, m->merged});
    }
  };
  for (int i = 0; i + 1 < count; ++i) consider(i);
  while (!agenda.empty()) {
    const Candidate top = agenda.top();
    agenda.pop();
    Symbol& left = symbols[top.left];
    // Stale: a side was merged into something else since this was queued.
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const Merge* current = find(left.id, right.id);
    if (!current || current->merged != top.merged) continue;
    left.id = top.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    consider(left.prev);
    consider(top.left);
  }
  ids.clear();
  for (int i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
}

}  // namespace moelab

namespace moelab {

bool ByteBpe::add_token(const std::string& bytes, uint32_t id) {
  if (bytes.size() == 1) {
    const auto byte = static_cast<uint8_t>(bytes[0]);
    byte_ids_[byte] = id;
    has_byte_[byte] = true;
  }
  return token_ids_.emplace(bytes, id).second;
}

void ByteBpe::check_bytes() const {
  for (int byte = 0; byte < 256; ++byte) {
    if (!has_byte_[byte]) {
      throw InputError(origin_ + ": byte-level vocabulary has no token for byte " +
                       std::to_string(byte) + " (every byte must be a token)");
    }
  }
}

std::vector<int> ByteBpe::missing_bytes() const {
  std::vector<int> missing;
  for (int byte = 0; byte < 256; ++byte) {
    if (!has_byte_[byte]) missing.push_back(byte);
  }
  return missing;
}

const uint32_t* ByteBpe::find(std::string_view bytes) const {
  const auto it = token_ids_.find(std::string(bytes));
  return it == token_ids_.end() ? nullptr : &it->second;
}

void ByteBpe::encode_word(std::string_view word, std::vector<uint32_t>& ids) const {
  if (whole_word_first_) {
    if (const uint32_t* id = find(word)) {
      ids.assign(1, *id);
      return;
    }
  }
  ids.clear();
  for (char c : word) {
    if (has_byte_[static_cast<uint8_t>(c)]) ids.push_back(byte_ids_[static_cast<uint8_t>(c)]);
  }
  bpe_.merge(ids);
}

}  // namespace moelab
