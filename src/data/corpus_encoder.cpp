#include "data/corpus_encoder.h"

#include <algorithm>
#include <optional>
#include <thread>

#include "util/error.h"

namespace moelab {

namespace {

// One rank's share of a block: per document its token count (-1 = skipped),
// and all tokens back to back.
struct EncodedShare {
  std::vector<int64_t> lengths;
  std::vector<uint32_t> tokens;
};

struct ThreadResult {
  std::vector<std::optional<std::vector<uint32_t>>> documents;
  std::optional<std::string> error;
};

void encode_range(const std::vector<RawDocument*>& docs, size_t begin, size_t end,
                  const CorpusOptions& corpus, const Tokenizer& tokenizer, ThreadResult* result) {
  try {
    std::vector<std::string> texts;
    std::vector<bool> kept;
    for (size_t i = begin; i < end; ++i) {
      std::optional<std::string> text = document_text(*docs[i], corpus);
      kept.push_back(text.has_value());
      if (text) texts.push_back(std::move(*text));
    }
    std::vector<std::vector<uint32_t>> encoded = tokenizer.encode_documents(texts);
    size_t next = 0;
    for (bool keep : kept) {
      result->documents.push_back(keep ? std::make_optional(std::move(encoded[next++]))
                                       : std::nullopt);
    }
  } catch (const InputError& error) {
    result->error = error.what();
  }
}

// Encodes `docs` with up to `threads` threads; contiguous ranges keep the order.
EncodedShare encode_share(const std::vector<RawDocument*>& docs, const CorpusOptions& corpus,
                          const Tokenizer& tokenizer, int threads,
                          std::optional<std::string>* error) {
  const size_t workers = std::max<size_t>(1, std::min<size_t>(threads, docs.size()));
  std::vector<ThreadResult> results(workers);
  std::vector<std::thread> pool;
  const size_t per_worker = (docs.size() + workers - 1) / std::max<size_t>(workers, 1);
  for (size_t w = 0; w < workers; ++w) {
    const size_t begin = std::min(docs.size(), w * per_worker);
    const size_t end = std::min(docs.size(), begin + per_worker);
    if (w + 1 == workers) {
      encode_range(docs, begin, end, corpus, tokenizer, &results[w]);
    } else {
      pool.emplace_back(encode_range, std::cref(docs), begin, end, std::cref(corpus),
                        std::cref(tokenizer), &results[w]);
    }
  }
  for (auto& thread : pool) thread.join();
  EncodedShare share;
  for (const auto& result : results) {
    if (result.error && !*error) *error = result.error;
    for (const auto& document : result.documents) {
      share.lengths.push_back(document ? static_cast<int64_t>(document->size()) : -1);
      if (document) share.tokens.insert(share.tokens.end(), document->begin(), document->end());
    }
  }
  return share;
}

// Rank 0: walks the block in document order, taking document j from rank j % size.
void deliver_block(int64_t first_index, size_t block_size, int ranks,
                   const std::vector<int64_t>& lengths, const std::vector<uint32_t>& tokens,
                   const std::function<size_t(int64_t)>& split_of,
                   const std::vector<ShardSink*>& sinks) {
  // Where each rank's lengths and tokens start in the gathered arrays.
  std::vector<size_t> length_cursor(ranks);
  std::vector<size_t> token_cursor(ranks);
  size_t length_start = 0;
  size_t token_start = 0;
  for (int r = 0; r < ranks; ++r) {
    length_cursor[r] = length_start;
    token_cursor[r] = token_start;
    const size_t owned = block_size / ranks + (static_cast<size_t>(r) < block_size % ranks);
    for (size_t k = 0; k < owned; ++k) {
      token_start += std::max<int64_t>(0, lengths[length_start + k]);
    }
    length_start += owned;
  }
  for (size_t j = 0; j < block_size; ++j) {
    const int r = static_cast<int>(j % ranks);
    const int64_t length = lengths[length_cursor[r]++];
    if (length < 0) continue;
    sinks[split_of(first_index + static_cast<int64_t>(j))]->add_document(
        tokens.data() + token_cursor[r], length);
    token_cursor[r] += length;
  }
}

}  // namespace

void encode_corpus(const std::vector<std::string>& files, const CorpusOptions& corpus,
                   const Tokenizer& tokenizer, const RankGroup& group,
                   const EncodeSettings& settings, const std::function<size_t(int64_t)>& split_of,
                   const std::vector<ShardSink*>& sinks) {
  RawDocumentReader reader(files, corpus);
  const size_t block_capacity = static_cast<size_t>(settings.block_docs) * group.size();
  std::vector<RawDocument> block(block_capacity);
  int64_t first_index = 0;
  while (true) {
    // Every rank reads the same documents, so all agree on the block without talking.
    size_t block_size = 0;
    std::optional<std::string> error;
    try {
      while (block_size < block_capacity && reader.next(&block[block_size])) ++block_size;
    } catch (const InputError& read_error) {
      error = read_error.what();
    }
    group.throw_if_any_failed(error);
    if (block_size == 0) break;
    std::vector<RawDocument*> owned;
    for (size_t j = group.rank(); j < block_size; j += group.size()) owned.push_back(&block[j]);
    EncodedShare share = encode_share(owned, corpus, tokenizer, settings.threads, &error);
    group.throw_if_any_failed(error);
    const std::vector<int64_t> lengths = group.gather_to_root(share.lengths);
    const std::vector<uint32_t> tokens = group.gather_to_root(share.tokens);
    if (group.is_root()) {
      try {
        deliver_block(first_index, block_size, group.size(), lengths, tokens, split_of, sinks);
      } catch (const std::exception& write_error) {
        error = write_error.what();
      }
    }
    group.throw_if_any_failed(error);  // rank 0's write errors end every rank
    first_index += static_cast<int64_t>(block_size);
  }
}

}  // namespace moelab
