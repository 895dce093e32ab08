#include "data/prep.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "data/checksum.h"
#include "data/corpus_encoder.h"
#include "data/document_selection.h"
#include "data/rank_group.h"
#include "data/shard_format.h"
#include "data/shard_sink.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/log.h"

namespace moelab {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kTrain = 0;
constexpr size_t kVal = 1;

void validate(const PrepOptions& options) {
  if (options.out_dir.empty()) throw InputError("prep: --out is required");
  if (options.val_fraction < 0.0 || options.val_fraction >= 1.0) {
    throw InputError("prep: --val-fraction must be in [0, 1), got " +
                     std::to_string(options.val_fraction));
  }
  if (options.val_count < 0) throw InputError("prep: --val-count must be >= 0");
  const bool carve = options.val_fraction > 0.0 || options.val_count > 0;
  if (options.val_fraction > 0.0 && options.val_count > 0) {
    throw InputError("prep: give --val-fraction or --val-count, not both");
  }
  if (carve && !options.val_inputs.empty()) {
    throw InputError(
        "prep: give --val-input or a carve-out (--val-fraction/--val-count), not both");
  }
  if (options.tokenizer_model.empty() &&
      (options.tokenizer.vocab_size < 8 || options.tokenizer.vocab_size > (int64_t{1} << 31))) {
    throw InputError("prep: --vocab-size must be in [8, 2^31]");
  }
  if (options.tokenizer_sample_docs <= 0)
    throw InputError("prep: --tokenizer-sample-docs must be > 0");
  if (options.shard_tokens <= 0) throw InputError("prep: --shard-tokens must be > 0");
  if (options.threads <= 0) throw InputError("prep: --threads must be > 0");
  if (options.block_docs <= 0) throw InputError("prep: block size must be > 0");
  if (options.corpus.format == CorpusFormat::kText && !options.corpus.blank_line_separator &&
      options.corpus.separator.empty()) {
    throw InputError("prep: --separator must not be empty (use --blank-line-separator)");
  }
}

json file_list(const std::vector<std::string>& files) {
  json list = json::array();
  for (const auto& path : files) list.push_back({{"path", path}, {"bytes", fs::file_size(path)}});
  return list;
}

// Everything that determines the dataset's content (not ranks, threads or --force).
json prep_record(const PrepOptions& options, const std::vector<std::string>& train_files,
                 const std::vector<std::string>& val_files) {
  const CorpusOptions& corpus = options.corpus;
  json record = {
      {"format_version", kShardFormatVersion},
      {"inputs", file_list(train_files)},
      {"val_inputs", file_list(val_files)},
      {"val_fraction", options.val_fraction},
      {"val_count", options.val_count},
      {"format", corpus.format == CorpusFormat::kJsonl ? "jsonl" : "text"},
      {"separator", corpus.blank_line_separator ? std::string("<blank line>") : corpus.separator},
      {"text_field", corpus.text_field},
      {"on_bad_json", corpus.on_bad_json == BadJsonPolicy::kSkip ? "skip" : "fail"},
      {"tokenizer_model", options.tokenizer_model},
      {"eos_token", options.tokenizer_settings.eos_token},
      {"tiktoken_pattern", options.tokenizer_settings.tiktoken_pattern},
      {"vocab_size", options.tokenizer.vocab_size},
      {"character_coverage", options.tokenizer.character_coverage},
      {"byte_fallback", options.tokenizer.byte_fallback},
      {"tokenizer_sample_docs", options.tokenizer_sample_docs},
      {"shard_tokens", options.shard_tokens},
      {"seed", options.seed}};
  record["fingerprint"] = checksum_hex(xxhash64_bytes(record.dump()));
  return record;
}

// Rank 0: makes `out` ready for this dataset. A folder holding the same
// preparation may be rewritten (the result is identical); anything else is
// replaced only with --force.
void prepare_output_dir(const PrepOptions& options, const json& record) {
  const fs::path out(options.out_dir);
  const fs::path record_path = out / "prep.json";
  if (fs::exists(out) && !fs::is_directory(out)) {
    throw InputError(options.out_dir + ": --out exists and is not a folder");
  }
  if (fs::exists(out) && !fs::is_empty(out) && !options.force) {
    std::ifstream in(record_path);
    const json existing = in ? json::parse(in, nullptr, false) : json();
    const bool same = existing.is_object() &&
                      existing.value("fingerprint", "") == record["fingerprint"].get<std::string>();
    if (!same) {
      throw InputError(options.out_dir +
                       ": folder already holds a different dataset (or other files); use --force "
                       "to replace it");
    }
  }
  for (const char* entry : {"train", "val", "prep.json"}) fs::remove_all(out / entry);
  for (const std::string& entry : Tokenizer::dataset_file_names()) fs::remove_all(out / entry);
  fs::create_directories(out);
}

// Runs `work` on rank 0 and turns its failure into an InputError on every rank.
template <typename Work>
void on_root(const RankGroup& group, Work work) {
  std::optional<std::string> error;
  if (group.is_root()) {
    try {
      work();
    } catch (const std::exception& failure) {
      error = failure.what();
    }
  }
  group.throw_if_any_failed(error);
}

Tokenizer make_tokenizer(const PrepOptions& options, const RankGroup& group,
                         const std::vector<std::string>& train_files,
                         const std::vector<bool>& is_validation) {
  if (!options.tokenizer_model.empty()) {
    return Tokenizer::from_file(options.tokenizer_model, options.tokenizer_settings);
  }
  std::string model;
  on_root(group, [&] {
    const auto eligible = [&](int64_t index) {
      return is_validation.empty() || !is_validation[index];
    };
    const std::vector<std::string> sample = sample_documents(
        train_files, options.corpus, eligible, options.tokenizer_sample_docs, options.seed);
    spdlog::info("training a {}-piece BPE tokenizer on {} documents", options.tokenizer.vocab_size,
                 sample.size());
    model = train_tokenizer(sample, options.tokenizer);
  });
  group.broadcast(&model);
  return Tokenizer(model, "trained tokenizer");
}

int64_t total_bytes(const std::vector<std::string>& files) {
  int64_t total = 0;
  for (const auto& path : files) total += static_cast<int64_t>(fs::file_size(path));
  return total;
}

}  // namespace

PrepSummary run_prep(const PrepOptions& options, MPI_Comm comm) {
  const RankGroup group(comm);
  validate(options);
  const std::vector<std::string> train_files = expand_inputs(options.inputs, options.excludes);
  const std::vector<std::string> val_files =
      options.val_inputs.empty() ? std::vector<std::string>()
                                 : expand_inputs(options.val_inputs, options.excludes);
  const json record = prep_record(options, train_files, val_files);
  on_root(group, [&] { prepare_output_dir(options, record); });

  // Every rank reads the same files, so every rank computes the same choice.
  std::vector<bool> is_validation;
  if (options.val_fraction > 0.0 || options.val_count > 0) {
    is_validation =
        choose_validation_documents(count_documents(train_files, options.corpus),
                                    options.val_fraction, options.val_count, options.seed);
  }
  const Tokenizer tokenizer = make_tokenizer(options, group, train_files, is_validation);
  const fs::path out(options.out_dir);
  ShardHeader header;
  header.vocab_size = tokenizer.vocab_size();
  header.eos_id = tokenizer.eos_id();
  header.tokenizer_checksum = tokenizer.checksum();

  std::unique_ptr<ShardSink> train_sink;
  std::unique_ptr<ShardSink> val_sink;
  on_root(group, [&] {
    tokenizer.save_to_dataset(out.string());
    header.split = "train";
    train_sink =
        std::make_unique<ShardSink>((out / "train").string(), header, options.shard_tokens);
    header.split = "val";
    val_sink = std::make_unique<ShardSink>((out / "val").string(), header, options.shard_tokens);
  });
  const std::vector<ShardSink*> sinks = {train_sink.get(), val_sink.get()};
  const EncodeSettings settings{options.threads, options.block_docs};
  encode_corpus(
      train_files, options.corpus, tokenizer, group, settings,
      [&](int64_t index) { return !is_validation.empty() && is_validation[index] ? kVal : kTrain; },
      sinks);
  if (!val_files.empty()) {
    encode_corpus(
        val_files, options.corpus, tokenizer, group, settings, [](int64_t) { return kVal; }, sinks);
  }

  PrepSummary summary;
  summary.tokenizer_checksum = header.tokenizer_checksum;
  summary.vocab_size = header.vocab_size;
  summary.input_bytes = total_bytes(train_files) + total_bytes(val_files);
  on_root(group, [&] {
    if (train_sink->num_docs() == 0) {
      throw InputError("prep: the inputs hold no training documents");
    }
    const bool want_val = !is_validation.empty() || !val_files.empty();
    if (want_val && val_sink->num_docs() == 0) {
      throw InputError("prep: the validation inputs hold no documents");
    }
    for (ShardSink* sink : {train_sink.get(), val_sink.get()}) {
      if (sink->num_docs() == 0) continue;
      const Manifest manifest = sink->finish();
      summary.splits.push_back({manifest.split, manifest.num_docs(), manifest.num_tokens(),
                                static_cast<int64_t>(manifest.shards.size())});
    }
    if (!want_val) spdlog::warn("prep: no validation split (give --val-input or --val-fraction)");
    write_file_atomically((out / "prep.json").string(), record.dump(2) + "\n");
  });
  return summary;
}

}  // namespace moelab
