#include "data/prep.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "data/checksum.h"
#include "data/corpus_encoder.h"
#include "data/document_selection.h"
#include "data/rank_group.h"
#include "data/shard_format.h"
#include "data/shard_sink.h"
#include "data/token_import.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/log.h"

namespace moelab {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kTrain = 0;
constexpr size_t kVal = 1;

// Token ids need the vocabulary they index, from a tokenizer or the options.
void validate_import(const PrepOptions& options) {
  const std::string format = corpus_format_name(options.corpus.format);
  if (options.tokenizer_model.empty() && !options.vocab_size_given) {
    throw InputError("prep: --format " + format + " needs --tokenizer or --vocab-size");
  }
  if (options.tokenizer_model.empty() && options.eos_id < 0) {
    throw InputError("prep: --format " + format +
                     " needs --eos-id (or a --tokenizer that has one)");
  }
}

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
  if (is_pretokenized(options.corpus.format)) {
    validate_import(options);
  } else if (options.eos_id >= 0) {
    throw InputError(
        "prep: --eos-id is for --format megatron or npy (a text tokenizer has its own)");
  } else if (options.tokenizer_model.empty() &&
             (options.tokenizer.vocab_size < 8 ||
              options.tokenizer.vocab_size > (int64_t{1} << 31))) {
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
      {"format", corpus_format_name(corpus.format)},
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
  if (is_pretokenized(corpus.format)) record["eos_id"] = options.eos_id;
  if (!options.add_special_tokens) record["no_bos"] = true;
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

// The tokenizer file given with --tokenizer: the one place prep loads one.
Tokenizer existing_tokenizer(const PrepOptions& options) {
  return Tokenizer::from_file(options.tokenizer_model, options.tokenizer_settings);
}

// The tokenizer trained on `sample`; a refusal names the inputs it came from.
std::string trained_tokenizer(const std::vector<std::string>& sample, const PrepOptions& options) {
  try {
    return train_tokenizer(sample, options.tokenizer);
  } catch (const InputError& refusal) {
    std::string inputs;
    for (const auto& input : options.inputs) inputs += (inputs.empty() ? "" : ", ") + input;
    throw InputError("prep: training a tokenizer on " + inputs + ": " + refusal.what());
  }
}

Tokenizer make_tokenizer(const PrepOptions& options, const RankGroup& group,
                         const std::vector<std::string>& train_files,
                         const std::vector<bool>& is_validation) {
  // Text is encoded with the file's template (imported ids are kept as they are).
  if (!options.tokenizer_model.empty()) {
    return existing_tokenizer(options).with_special_tokens(options.add_special_tokens);
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
    model = trained_tokenizer(sample, options);
  });
  group.broadcast(&model);
  return Tokenizer(model, "trained tokenizer");
}

int64_t total_bytes(const std::vector<std::string>& files) {
  int64_t total = 0;
  for (const auto& path : files) total += static_cast<int64_t>(fs::file_size(path));
  return total;
}

// What the dataset records about its tokenizer; no tokenizer for an import
// without one, whose tokens cannot be decoded.
struct DatasetTokenizer {
  std::optional<Tokenizer> tokenizer;
  int64_t vocab_size = 0;
  int64_t eos_id = -1;
  std::string checksum() const { return tokenizer ? tokenizer->checksum() : kNoTokenizer; }
};

DatasetTokenizer import_tokenizer(const PrepOptions& options) {
  DatasetTokenizer result{std::nullopt, options.tokenizer.vocab_size, options.eos_id};
  if (!options.tokenizer_model.empty()) {
    const Tokenizer tokenizer = existing_tokenizer(options);
    if (options.eos_id >= 0 && options.eos_id != tokenizer.eos_id()) {
      throw InputError("prep: --eos-id " + std::to_string(options.eos_id) + " differs from " +
                       options.tokenizer_model + "'s end-of-document id " +
                       std::to_string(tokenizer.eos_id()));
    }
    result = {tokenizer, tokenizer.vocab_size(), tokenizer.eos_id()};
  }
  if (result.eos_id < 0 || result.eos_id >= result.vocab_size) {
    throw InputError("prep: --eos-id " + std::to_string(result.eos_id) +
                     " is outside the vocabulary [0, " + std::to_string(result.vocab_size) + ")");
  }
  return result;
}

// The inputs' sources: files, or for Megatron the PREFIX of each .idx/.bin pair.
struct PrepSources {
  std::vector<std::string> train;
  std::vector<std::string> val;
};

PrepSources resolve_sources(const PrepOptions& options) {
  const CorpusFormat format = options.corpus.format;
  const auto resolve = [&](const std::vector<std::string>& inputs) {
    if (inputs.empty()) return std::vector<std::string>();
    return is_pretokenized(format) ? token_sources(inputs, options.excludes, format)
                                   : expand_inputs(inputs, options.excludes);
  };
  if (options.inputs.empty()) throw InputError("prep: --input is required");
  return {resolve(options.inputs), resolve(options.val_inputs)};
}

std::vector<std::string> files_read(const PrepOptions& options,
                                    const std::vector<std::string>& sources) {
  const CorpusFormat format = options.corpus.format;
  return is_pretokenized(format) ? token_source_files(sources, format) : sources;
}

std::vector<bool> choose_validation(const PrepOptions& options,
                                    const std::function<int64_t()>& count_documents) {
  if (options.val_fraction <= 0.0 && options.val_count <= 0) return {};
  return choose_validation_documents(count_documents(), options.val_fraction, options.val_count,
                                     options.seed);
}

// Rank 0's writers of the two splits (null elsewhere).
struct SplitSinks {
  std::unique_ptr<ShardSink> train;
  std::unique_ptr<ShardSink> val;
  std::vector<ShardSink*> pointers() const { return {train.get(), val.get()}; }
};

// Rank 0: writes the tokenizer file (when there is one) and opens the sinks.
SplitSinks open_sinks(const PrepOptions& options, const DatasetTokenizer& tokenizer) {
  const fs::path out(options.out_dir);
  ShardHeader header;
  header.vocab_size = tokenizer.vocab_size;
  header.eos_id = tokenizer.eos_id;
  header.tokenizer_checksum = tokenizer.checksum();
  if (tokenizer.tokenizer) tokenizer.tokenizer->save_to_dataset(out.string());
  SplitSinks sinks;
  header.split = "train";
  sinks.train = std::make_unique<ShardSink>((out / "train").string(), header, options.shard_tokens);
  header.split = "val";
  sinks.val = std::make_unique<ShardSink>((out / "val").string(), header, options.shard_tokens);
  return sinks;
}

// Rank 0: the manifests (only once every document is in) and prep.json.
void finish_splits(const PrepOptions& options, const SplitSinks& sinks, bool want_val,
                   const json& record, PrepSummary* summary) {
  if (sinks.train->num_docs() == 0) throw InputError("prep: the inputs hold no training documents");
  if (want_val && sinks.val->num_docs() == 0) {
    throw InputError("prep: the validation inputs hold no documents");
  }
  for (ShardSink* sink : sinks.pointers()) {
    if (sink->num_docs() == 0) continue;
    const Manifest manifest = sink->finish();
    summary->splits.push_back({manifest.split, manifest.num_docs(), manifest.num_tokens(),
                               static_cast<int64_t>(manifest.shards.size())});
  }
  if (!want_val) spdlog::warn("prep: no validation split (give --val-input or --val-fraction)");
  write_file_atomically((fs::path(options.out_dir) / "prep.json").string(), record.dump(2) + "\n");
}

PrepSummary summary_of(const DatasetTokenizer& tokenizer, int64_t input_bytes) {
  PrepSummary summary;
  summary.tokenizer_checksum = tokenizer.checksum();
  summary.vocab_size = tokenizer.vocab_size;
  summary.input_bytes = input_bytes;
  return summary;
}

// Megatron / .npy: the tokens go to the shards as they are, on rank 0.
void import_splits(const PrepOptions& options, const PrepSources& sources,
                   const DatasetTokenizer& tokenizer, const json& record, PrepSummary* summary) {
  const TokenImportSettings settings{options.corpus.format, tokenizer.vocab_size, tokenizer.eos_id};
  const std::vector<bool> is_validation =
      choose_validation(options, [&] { return count_token_documents(sources.train, settings); });
  const SplitSinks sinks = open_sinks(options, tokenizer);
  import_token_documents(
      sources.train, settings,
      [&](int64_t index) { return !is_validation.empty() && is_validation[index] ? kVal : kTrain; },
      sinks.pointers());
  import_token_documents(
      sources.val, settings, [](int64_t) { return kVal; }, sinks.pointers());
  finish_splits(options, sinks, !is_validation.empty() || !sources.val.empty(), record, summary);
}

// Text: trains or loads the tokenizer, then encodes across the ranks.
void encode_splits(const PrepOptions& options, const RankGroup& group, const PrepSources& sources,
                   const json& record, PrepSummary* summary) {
  // Every rank reads the same files, so every rank computes the same choice.
  const std::vector<bool> is_validation =
      choose_validation(options, [&] { return count_documents(sources.train, options.corpus); });
  const Tokenizer tokenizer = make_tokenizer(options, group, sources.train, is_validation);
  const DatasetTokenizer recorded{tokenizer, tokenizer.vocab_size(), tokenizer.eos_id()};
  *summary = summary_of(recorded, summary->input_bytes);

  SplitSinks sinks;
  on_root(group, [&] { sinks = open_sinks(options, recorded); });
  const EncodeSettings settings{options.threads, options.block_docs};
  encode_corpus(
      sources.train, options.corpus, tokenizer, group, settings,
      [&](int64_t index) { return !is_validation.empty() && is_validation[index] ? kVal : kTrain; },
      sinks.pointers());
  if (!sources.val.empty()) {
    encode_corpus(
        sources.val, options.corpus, tokenizer, group, settings, [](int64_t) { return kVal; },
        sinks.pointers());
  }
  on_root(group, [&] {
    finish_splits(options, sinks, !is_validation.empty() || !sources.val.empty(), record, summary);
  });
}

}  // namespace

PrepSummary run_prep(const PrepOptions& options, MPI_Comm comm) {
  const RankGroup group(comm);
  validate(options);
  const PrepSources sources = resolve_sources(options);
  const std::vector<std::string> train_files = files_read(options, sources.train);
  const std::vector<std::string> val_files = files_read(options, sources.val);
  const json record = prep_record(options, train_files, val_files);
  on_root(group, [&] { prepare_output_dir(options, record); });
  const int64_t input_bytes = total_bytes(train_files) + total_bytes(val_files);

  if (!is_pretokenized(options.corpus.format)) {
    PrepSummary summary;
    summary.input_bytes = input_bytes;
    encode_splits(options, group, sources, record, &summary);
    return summary;
  }
  const DatasetTokenizer tokenizer = import_tokenizer(options);
  PrepSummary summary = summary_of(tokenizer, input_bytes);
  on_root(group, [&] { import_splits(options, sources, tokenizer, record, &summary); });
  return summary;
}

}  // namespace moelab
