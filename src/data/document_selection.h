// Deterministic choices of documents by their index in the reader's order:
// which become validation documents, and which the tokenizer trains on.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/corpus_reader.h"

namespace moelab {

int64_t count_documents(const std::vector<std::string>& files, const CorpusOptions& corpus);

// Marks round(fraction * n) documents, or `count` of them, as validation,
// chosen by a seeded permutation. InputError if that leaves no training or no
// validation document.
std::vector<bool> choose_validation_documents(int64_t num_docs, double fraction, int64_t count,
                                              uint64_t seed);

// Uniform sample (reservoir) of at most `max_docs` texts of the documents for
// which `eligible(index)` holds, in document order. Bad JSON lines are skipped
// silently under BadJsonPolicy::kSkip (the encode pass reports them).
std::vector<std::string> sample_documents(const std::vector<std::string>& files,
                                          const CorpusOptions& corpus,
                                          const std::function<bool(int64_t)>& eligible,
                                          int64_t max_docs, uint64_t seed);

}  // namespace moelab
