// `moelab prep --format megatron|npy`: pre-tokenized documents become shards
// as they are, without a tokenizer. Each document ends with the end-of-document
// id (appended where the source has none), as prep's encoder ends its documents.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/corpus_reader.h"
#include "data/shard_sink.h"

namespace moelab {

struct TokenImportSettings {
  CorpusFormat format = CorpusFormat::kMegatron;
  int64_t vocab_size = 0;
  int64_t eos_id = -1;
};

// The inputs' sources: for Megatron the PREFIX of each PREFIX.idx/.bin pair
// (given as PREFIX, PREFIX.idx or PREFIX.bin), for .npy the files `expand_inputs` finds.
std::vector<std::string> token_sources(const std::vector<std::string>& inputs,
                                       const std::vector<std::string>& excludes,
                                       CorpusFormat format);

// The files a source reads (both halves of a Megatron pair), for the prep record.
std::vector<std::string> token_source_files(const std::vector<std::string>& sources,
                                            CorpusFormat format);

int64_t count_token_documents(const std::vector<std::string>& sources,
                              const TokenImportSettings& settings);

// Hands document i (in source order) to sinks[split_of(i)]. InputError naming
// the file, document and offset for an id outside [0, vocab_size).
void import_token_documents(const std::vector<std::string>& sources,
                            const TokenImportSettings& settings,
                            const std::function<size_t(int64_t)>& split_of,
                            const std::vector<ShardSink*>& sinks);

}  // namespace moelab
