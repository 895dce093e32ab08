// `moelab prep`: corpus -> tokenizer -> sharded HDF5 dataset (see data/prep.h),
// and `moelab prep --inspect DIR` to summarise one. The work lives in
// moelab_data so tests call it directly; this file only maps flags.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "data/dataset_inspect.h"
#include "data/prep.h"
#include "util/error.h"
#include "util/log.h"
#include "util/mpi_session.h"

namespace moelab {

namespace {

struct PrepCommandOptions {
  PrepOptions prep;
  std::string format = "text";
  std::string on_bad_json = "fail";
  std::string inspect;
  bool no_bos = false;
};

void apply_choices(PrepCommandOptions* options) {
  PrepOptions& prep = options->prep;
  prep.corpus.format = parse_corpus_format(options->format);
  prep.corpus.on_bad_json =
      options->on_bad_json == "skip" ? BadJsonPolicy::kSkip : BadJsonPolicy::kFail;
  prep.add_special_tokens = !options->no_bos;
}

void print_summary(const PrepOptions& prep, const PrepSummary& summary) {
  for (const auto& split : summary.splits) {
    spdlog::info("{}: {} docs, {} tokens, {} shards", split.split, split.docs, split.tokens,
                 split.shards);
  }
  spdlog::info("dataset written to {} (vocab {}, tokenizer {})", prep.out_dir, summary.vocab_size,
               summary.tokenizer_checksum);
}

}  // namespace

void add_prep_command(CLI::App& root) {
  auto* sub = root.add_subcommand(
      "prep",
      "Tokenize corpora into a sharded HDF5 token dataset (run under mpirun to parallelise)");
  auto options = std::make_shared<PrepCommandOptions>();
  PrepOptions& prep = options->prep;
  sub->add_option("--input,inputs", prep.inputs,
                  "Training corpus: files, folders or globs; for megatron, PREFIX of "
                  "PREFIX.idx/.bin (repeatable)");
  sub->add_option("--out", prep.out_dir, "Output dataset folder");
  sub->add_option("--val-input", prep.val_inputs, "Separate validation corpus (repeatable)");
  sub->add_option("--val-fraction", prep.val_fraction,
                  "Carve this fraction of training documents out as validation");
  sub->add_option("--val-count", prep.val_count, "Carve this many documents out as validation");
  sub->add_option("--exclude", prep.excludes, "Skip input files whose name matches (e.g. '*.dat')");
  sub->add_option("--format", options->format,
                  "Input format: text or jsonl (plain, .gz or .zst), parquet, or token ids "
                  "(megatron, npy) imported without retokenizing")
      ->check(CLI::IsMember({"text", "jsonl", "parquet", "megatron", "npy"}))
      ->capture_default_str();
  sub->add_option("--separator", prep.corpus.separator, "Line that ends a text document")
      ->capture_default_str();
  sub->add_flag("--blank-line-separator", prep.corpus.blank_line_separator,
                "Blank lines end text documents");
  sub->add_option("--text-field", prep.corpus.text_field,
                  "JSONL field or Parquet column with the text")
      ->capture_default_str();
  sub->add_option("--eos-id", prep.eos_id,
                  "End-of-document id of megatron/npy token ids (npy documents end after it)");
  sub->add_option("--on-bad-json", options->on_bad_json, "Invalid JSON lines: skip (warn) or fail")
      ->check(CLI::IsMember({"skip", "fail"}))
      ->capture_default_str();
  auto* vocab_size =
      sub->add_option(
             "--vocab-size", prep.tokenizer.vocab_size,
             "Tokenizer vocabulary size (megatron/npy without --tokenizer: ids are below it)")
          ->capture_default_str();
  sub->add_option("--character-coverage", prep.tokenizer.character_coverage,
                  "SentencePiece character coverage")
      ->capture_default_str();
  sub->add_flag("--byte-fallback", prep.tokenizer.byte_fallback,
                "Unknown characters become byte tokens");
  sub->add_option("--tokenizer-sample-docs", prep.tokenizer_sample_docs,
                  "Documents sampled to train the tokenizer")
      ->capture_default_str();
  sub->add_option("--tokenizer", prep.tokenizer_model,
                  "Use this tokenizer instead of training one: a SentencePiece .model, a Hugging "
                  "Face tokenizer.json (BPE) or a .tiktoken file");
  sub->add_option("--eos-token", prep.tokenizer_settings.eos_token,
                  "Token that ends each document (tokenizer.json: overrides the file's own; "
                  ".tiktoken: required, numbered after the last rank)");
  sub->add_option("--tiktoken-pattern", prep.tokenizer_settings.tiktoken_pattern,
                  "Split regex of a .tiktoken file: gpt2, cl100k, o200k or a regex");
  sub->add_flag("--no-bos", options->no_bos,
                "tokenizer.json with a post-processor template: leave out its special tokens "
                "(e.g. Llama's BOS) around each document");
  sub->add_option("--shard-tokens", prep.shard_tokens, "Target tokens per shard")
      ->capture_default_str();
  sub->add_option("--seed", prep.seed, "Seed for the validation carve-out and tokenizer sample")
      ->capture_default_str();
  sub->add_option("--threads", prep.threads, "Encoding threads per rank")->capture_default_str();
  sub->add_flag("--force", prep.force, "Replace a different dataset in --out");
  sub->add_option("--inspect", options->inspect, "Summarise a prepared dataset and exit");
  sub->callback([options, vocab_size] {
    if (!options->inspect.empty()) {
      if (MpiSession::rank() == 0) std::cout << inspect_dataset(options->inspect);
      return;
    }
    if (options->prep.inputs.empty()) throw InputError("prep: --input is required");
    apply_choices(options.get());
    options->prep.vocab_size_given = vocab_size->count() > 0;
    const PrepSummary summary = run_prep(options->prep);
    if (MpiSession::rank() == 0) print_summary(options->prep, summary);
  });
}

}  // namespace moelab
