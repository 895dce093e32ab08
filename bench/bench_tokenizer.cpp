// Single-thread encoding speed of a tokenizer file (any kind prep reads), in
// blocks of 2048 documents as prep encodes them. bench/tokenizer_speed.sh
// runs it against `tokenizers` and tiktoken on the same documents.
//   bench_tokenizer --text FILE --tokenizer PATH [--eos-token S] [--tiktoken-pattern P]
//                   [--repeats N] [--docs-out JSON] [--ids-out JSON]
// Prints one "seconds <s>" line per repeat and "bytes <n>".
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "data/corpus_reader.h"
#include "data/tokenizer.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/stopwatch.h"

namespace {

constexpr size_t kBlockDocs = 2048;  // prep's default --block-docs

std::vector<std::string> read_documents(const std::string& text_file, int64_t* bytes) {
  moelab::RawDocumentReader reader({text_file}, moelab::CorpusOptions{});
  std::vector<std::string> documents;
  moelab::RawDocument doc;
  while (reader.next(&doc)) {
    *bytes += static_cast<int64_t>(doc.text.size());
    documents.push_back(doc.text);
  }
  return documents;
}

std::vector<std::vector<uint32_t>> encode_in_blocks(const moelab::Tokenizer& tokenizer,
                                                    const std::vector<std::string>& documents) {
  std::vector<std::vector<uint32_t>> ids;
  for (size_t begin = 0; begin < documents.size(); begin += kBlockDocs) {
    const size_t end = std::min(documents.size(), begin + kBlockDocs);
    auto block = tokenizer.encode_documents(
        std::vector<std::string>(documents.begin() + begin, documents.begin() + end));
    for (auto& doc : block) ids.push_back(std::move(doc));
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"moelab tokenizer speed"};
  std::string text_file, path, docs_out, ids_out;
  moelab::TokenizerSettings settings;
  int repeats = 1;
  app.add_option("--text", text_file, "Corpus (<|endoftext|> separated)")->required();
  app.add_option("--tokenizer", path, "Tokenizer file")->required();
  app.add_option("--eos-token", settings.eos_token);
  app.add_option("--tiktoken-pattern", settings.tiktoken_pattern);
  app.add_option("--repeats", repeats);
  app.add_option("--docs-out", docs_out, "Write the documents as a JSON list");
  app.add_option("--ids-out", ids_out, "Write the ids as a JSON list of lists");
  CLI11_PARSE(app, argc, argv);
  try {
    const moelab::Tokenizer tokenizer = moelab::Tokenizer::from_file(path, settings);
    int64_t bytes = 0;
    const std::vector<std::string> documents = read_documents(text_file, &bytes);
    if (!docs_out.empty()) {
      moelab::write_file_atomically(docs_out, nlohmann::json(documents).dump());
    }
    std::vector<std::vector<uint32_t>> ids;
    for (int r = 0; r < repeats; ++r) {
      const moelab::Stopwatch watch;
      ids = encode_in_blocks(tokenizer, documents);
      std::cout << "seconds " << watch.seconds() << "\n";
    }
    std::cout << "bytes " << bytes << "\n";
    if (!ids_out.empty()) moelab::write_file_atomically(ids_out, nlohmann::json(ids).dump());
  } catch (const std::exception& error) {
    std::cerr << "bench_tokenizer: " << error.what() << "\n";
    return moelab::exit_code_of(error);
  }
  return 0;
}
