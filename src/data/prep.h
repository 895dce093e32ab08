// `moelab prep`: corpus -> tokenizer -> sharded HDF5 token dataset
//   <out>/tokenizer.model (or tokenizer.json / tokenizer.tiktoken and
//   tokenizer_settings.json, see tokenizer.h; absent for imports without a
//   tokenizer), <out>/prep.json,
//   <out>/train/manifest.json + shard_00000.h5 ..., <out>/val/...
// Documents are dealt round-robin to the ranks of `comm` (and split over
// threads within a rank), encoded, and gathered in order to rank 0, which
// writes; the output is byte-identical for any number of ranks and threads.
// Pre-tokenized inputs (data/token_import.h) are read and written by rank 0.
// Each split's manifest.json is written last, so a failed prep leaves no
// readable dataset behind.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus_reader.h"
#include "data/tokenizer.h"

namespace moelab {

struct PrepOptions {
  std::vector<std::string> inputs;      // files, folders or globs
  std::vector<std::string> val_inputs;  // separate validation corpus (optional)
  std::vector<std::string> excludes;    // file-name globs to skip, e.g. "*.dat"
  std::string out_dir;
  double val_fraction = 0.0;  // carve this fraction of documents out as validation...
  int64_t val_count = 0;      // ...or this many (at most one of the two)
  CorpusOptions corpus;
  TokenizerTrainOptions tokenizer;
  int64_t tokenizer_sample_docs = 20000;  // bounded sample the tokenizer trains on
  std::string tokenizer_model;            // existing tokenizer file instead of training
  TokenizerSettings tokenizer_settings;   // for a tokenizer.json or .tiktoken file
  // A tokenizer.json's post-processor template (Llama's BOS) around each
  // document, as `tokenizers` adds it by default; false: --no-bos.
  bool add_special_tokens = true;
  // Pre-tokenized inputs (corpus.format megatron or npy): the end-of-document
  // id, and whether tokenizer.vocab_size was given (needed without --tokenizer).
  int64_t eos_id = -1;
  bool vocab_size_given = false;
  int64_t shard_tokens = 1 << 24;  // target tokens per shard
  uint64_t seed = 0;
  int threads = 1;            // encoding threads per rank
  bool force = false;         // replace a different dataset in out_dir
  int64_t block_docs = 2048;  // documents per rank per exchange (bounds memory)
};

struct SplitSummary {
  std::string split;
  int64_t docs = 0;
  int64_t tokens = 0;
  int64_t shards = 0;
};

struct PrepSummary {
  std::string tokenizer_checksum;
  int64_t vocab_size = 0;
  std::vector<SplitSummary> splits;  // complete on rank 0 only
  int64_t input_bytes = 0;           // bytes of input files (compressed size for .gz/.zst)
};

// Collective over `comm` when MPI is initialised; a single process otherwise.
// InputError (on every rank) for bad options or input.
PrepSummary run_prep(const PrepOptions& options, MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace moelab
