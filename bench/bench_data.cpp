// Data pipeline figures: prep throughput (MB of text per second, encoding with
// a given tokenizer, one thread per rank; run under mpirun for more ranks) and
// loader throughput (tokens per second delivered by BatchLoader).
//   bench_data --text FILE --tokenizer MODEL [--seq-len 256] [--batch 32] [--batches 300]
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "data/batch_loader.h"
#include "data/corpus_reader.h"
#include "data/prep.h"
#include "data/tokenizer.h"
#include "util/allocator.h"
#include "util/error.h"
#include "util/log.h"
#include "util/mpi_session.h"
#include "util/stopwatch.h"

namespace {

// Tokenizer alone, this process only: the ceiling for prep's encode stage.
double encode_only_mb_per_s(const std::string& text_file, const std::string& model) {
  const moelab::Tokenizer tokenizer = moelab::Tokenizer::from_file(model);
  moelab::RawDocumentReader reader({text_file}, moelab::CorpusOptions{});
  std::vector<std::string> documents;
  moelab::RawDocument doc;
  int64_t bytes = 0;
  while (reader.next(&doc)) {
    bytes += static_cast<int64_t>(doc.text.size());
    documents.push_back(doc.text);
  }
  const moelab::Stopwatch watch;
  int64_t tokens = 0;
  for (const auto& document : tokenizer.encode_documents(documents)) tokens += document.size();
  const double elapsed = watch.seconds();
  std::cout << "encode only: " << documents.size() << " docs, " << tokens << " tokens\n";
  return bytes / 1e6 / elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  moelab::keep_freed_memory();
  moelab::MpiSession session(&argc, &argv);
  moelab::init_logging(moelab::MpiSession::rank(), "warn");
  CLI::App app{"moelab data pipeline benchmark"};
  std::string text_file;
  std::string model;
  int64_t seq_len = 256;
  int64_t batch = 32;
  int64_t batches = 300;
  app.add_option("--text", text_file, "Plain-text corpus (<|endoftext|> separated)")->required();
  app.add_option("--tokenizer", model, "SentencePiece .model")->required();
  app.add_option("--seq-len", seq_len);
  app.add_option("--batch", batch, "Global batch in sequences");
  app.add_option("--batches", batches, "Batches timed for the loader");
  CLI11_PARSE(app, argc, argv);
  const bool root = moelab::MpiSession::rank() == 0;
  try {
    const auto out = std::filesystem::temp_directory_path() / "moelab_bench_data";
    moelab::PrepOptions options;
    options.inputs = {text_file};
    options.out_dir = out.string();
    options.tokenizer_model = model;
    options.force = true;
    const moelab::Stopwatch prep_watch;
    const moelab::PrepSummary summary = moelab::run_prep(options);
    const double prep_seconds = prep_watch.seconds();
    if (!root) return 0;
    const double mb = summary.input_bytes / 1e6;
    std::cout << "prep (" << moelab::MpiSession::size() << " rank(s), 1 thread each): " << mb
              << " MB in " << prep_seconds << " s = " << mb / prep_seconds << " MB/s\n";
    std::cout << "encode only (1 thread): " << encode_only_mb_per_s(text_file, model) << " MB/s\n";

    moelab::BatchLoader loader(out.string(), "train", seq_len, batch, 0, 1, 0, 4);
    const moelab::Stopwatch load_watch;
    for (int64_t b = 0; b < batches; ++b) loader.next();
    const double load_seconds = load_watch.seconds();
    std::cout << "loader: " << batches << " batches of " << batch << "x" << seq_len + 1 << " = "
              << batches * batch * seq_len / load_seconds << " tokens/s\n";
    std::filesystem::remove_all(out);
  } catch (const moelab::InputError& error) {
    std::cerr << "error: " << error.what() << "\n";
    return 2;
  }
  return 0;
}
