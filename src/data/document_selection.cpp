#include "data/document_selection.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "data/seeded_permutation.h"
#include "util/error.h"

namespace moelab {

namespace {

// Distinct RNG streams for the different uses of the seed.
constexpr int64_t kValidationStream = -1;
constexpr int64_t kTokenizerSampleStream = -2;

}  // namespace

int64_t count_documents(const std::vector<std::string>& files, const CorpusOptions& corpus) {
  RawDocumentReader reader(files, corpus);
  RawDocument doc;
  int64_t count = 0;
  while (reader.next(&doc)) ++count;
  return count;
}

std::vector<bool> choose_validation_documents(int64_t num_docs, double fraction, int64_t count,
                                              uint64_t seed) {
  const int64_t chosen =
      count > 0 ? count
                : static_cast<int64_t>(std::llround(fraction * static_cast<double>(num_docs)));
  if (chosen <= 0 || chosen >= num_docs) {
    throw InputError("validation carve-out of " + std::to_string(chosen) + " of " +
                     std::to_string(num_docs) +
                     " documents leaves no training or no validation document "
                     "(check --val-fraction / --val-count)");
  }
  const std::vector<int64_t> order = seeded_permutation(num_docs, seed, kValidationStream);
  std::vector<bool> is_validation(num_docs, false);
  for (int64_t i = 0; i < chosen; ++i) is_validation[order[i]] = true;
  return is_validation;
}

std::vector<std::string> sample_documents(const std::vector<std::string>& files,
                                          const CorpusOptions& corpus,
                                          const std::function<bool(int64_t)>& eligible,
                                          int64_t max_docs, uint64_t seed) {
  RawDocumentReader reader(files, corpus);
  RawDocument doc;
  uint64_t state = rng_state(seed, kTokenizerSampleStream);
  // (document index, text): the index restores document order at the end.
  std::vector<std::pair<int64_t, std::string>> reservoir;
  int64_t seen = 0;
  for (int64_t index = 0; reader.next(&doc); ++index) {
    if (!eligible(index)) continue;
    std::optional<std::string> text = document_text(doc, corpus, /*warn_on_skip=*/false);
    if (!text) continue;
    if (static_cast<int64_t>(reservoir.size()) < max_docs) {
      reservoir.emplace_back(index, std::move(*text));
    } else {
      const uint64_t slot = uniform_below(static_cast<uint64_t>(seen) + 1, &state);
      if (slot < static_cast<uint64_t>(max_docs)) reservoir[slot] = {index, std::move(*text)};
    }
    ++seen;
  }
  std::sort(reservoir.begin(), reservoir.end());
  std::vector<std::string> sample;
  for (auto& entry : reservoir) sample.push_back(std::move(entry.second));
  return sample;
}

}  // namespace moelab
