// Encodes a corpus across the ranks of a group: documents are dealt
// round-robin (document i to rank i % size), split over threads within a rank,
// and gathered in blocks to rank 0, which hands them to the sinks in the
// original document order. The result does not depend on ranks or threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/corpus_reader.h"
#include "data/rank_group.h"
#include "data/shard_sink.h"
#include "data/tokenizer.h"

namespace moelab {

struct EncodeSettings {
  int threads = 1;
  int64_t block_docs = 2048;  // documents per rank per exchange
};

// `split_of(i)` picks the sink of raw document i (its index in the reader's
// order). `sinks` are used on rank 0 only (may be null elsewhere).
void encode_corpus(const std::vector<std::string>& files, const CorpusOptions& corpus,
                   const Tokenizer& tokenizer, const RankGroup& group,
                   const EncodeSettings& settings, const std::function<size_t(int64_t)>& split_of,
                   const std::vector<ShardSink*>& sinks);

}  // namespace moelab
