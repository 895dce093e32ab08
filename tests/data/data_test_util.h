// Shared helpers for the data tests: temporary folders, small generated
// corpora and synthetic token datasets with known contents.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "data/dataset_info.h"
#include "data/prep.h"
#include "data/shard_reader.h"
#include "data/shard_sink.h"
#include "util/error.h"

namespace moelab::testing {

inline void write_text(const std::string& path, const std::string& contents) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << contents;
}

// Every document of a prepared split, as prep wrote its ids (EOS included), in order.
inline std::vector<std::vector<int64_t>> split_documents(const std::string& dataset,
                                                         const std::string& split) {
  std::vector<std::vector<int64_t>> docs;
  for (const auto& path : read_dataset_info(dataset, split).shards) {
    const ShardReader shard(path);
    const auto offsets = shard.doc_offsets();
    for (size_t d = 0; d + 1 < offsets.size(); ++d) {
      docs.emplace_back(offsets[d + 1] - offsets[d]);
      shard.read_tokens(offsets[d], int64_t(docs.back().size()), docs.back().data());
    }
  }
  return docs;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Sentence-like document `index`: words from a small list, deterministic.
inline std::string make_document(int index) {
  static const char* kWords[] = {"the", "cat", "sat", "on",  "a",     "mat",  "and",  "dog",
                                 "ran", "to",  "big", "red", "house", "with", "tree", "sun"};
  std::string text;
  uint64_t state = 0x9E3779B97F4A7C15ULL * (index + 1);
  const int words = 5 + index % 11;
  for (int w = 0; w < words; ++w) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    if (w > 0) text += ' ';
    text += kWords[state % 16];
  }
  return text + ".";
}

// `count` documents starting at `first`, separated by `separator` lines.
inline std::string make_text_corpus(int first, int count,
                                    const std::string& separator = "<|endoftext|>") {
  std::string corpus;
  for (int i = first; i < first + count; ++i) corpus += make_document(i) + "\n" + separator + "\n";
  return corpus;
}

// Options for a small, fast prep of `inputs` into `out`.
inline PrepOptions small_prep_options(std::vector<std::string> inputs, const std::string& out) {
  PrepOptions options;
  options.inputs = std::move(inputs);
  options.out_dir = out;
  options.tokenizer.vocab_size = 64;
  options.tokenizer.character_coverage = 1.0;
  options.shard_tokens = 500;
  options.block_docs = 16;
  return options;
}

// A split whose token stream is first, first + 1, ... (mod vocab), in documents
// of `doc_tokens` tokens each (the last one an EOS), over several shards.
inline void write_counting_split(const std::string& dataset_dir, const std::string& split,
                                 int64_t total_tokens, int64_t doc_tokens, int64_t shard_tokens,
                                 int64_t vocab_size = 1000, const std::string& checksum = "abc",
                                 int64_t first = 0) {
  ShardHeader header;
  header.vocab_size = vocab_size;
  header.eos_id = vocab_size - 1;
  header.tokenizer_checksum = checksum;
  header.split = split;
  ShardSink sink((std::filesystem::path(dataset_dir) / split).string(), header, shard_tokens);
  std::vector<uint32_t> doc;
  for (int64_t t = 0; t < total_tokens; ++t) {
    doc.push_back(static_cast<uint32_t>((first + t) % vocab_size));
    if (static_cast<int64_t>(doc.size()) == doc_tokens || t + 1 == total_tokens) {
      sink.add_document(doc.data(), static_cast<int64_t>(doc.size()));
      doc.clear();
    }
  }
  sink.finish();
}

// The lines a shell command prints; false if it fails.
inline bool output_lines(const std::string& command, std::vector<std::string>* lines) {
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) output.append(buf, n);
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) lines->push_back(line);
  return pclose(pipe) == 0;
}

// The files of the demo's English corpus, as launch/fortunes-files.sh lists
// them (the one place that knows which files those are); none when Debian's
// fortunes are not installed.
inline std::vector<std::string> fortune_files() {
  std::vector<std::string> files;
  if (!output_lines(MOELAB_SOURCE_DIR "/launch/fortunes-files.sh 2>/dev/null", &files)) return {};
  return files;
}

// The demo's corpus (Debian's fortunes, brought by launch/install-deps.sh):
// documents are separated by "%" lines.
inline std::vector<std::string> fortune_documents() {
  std::vector<std::string> docs;
  for (const std::string& file : fortune_files()) {
    std::istringstream in(read_bytes(file));
    std::string line, doc;
    while (std::getline(in, line)) {
      if (line == "%") {
        docs.push_back(doc);
        doc.clear();
      } else {
        doc += (doc.empty() ? "" : "\n") + line;
      }
    }
    if (!doc.empty()) docs.push_back(doc);
  }
  return docs;
}

// Asserts that `call` throws InputError whose message contains `needle`.
template <typename Call>
void expect_input_error(Call call, const std::string& needle) {
  try {
    call();
    ADD_FAILURE() << "expected InputError mentioning '" << needle << "'";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find(needle), std::string::npos)
        << "message: " << error.what() << "\nexpected to contain: " << needle;
  }
}

}  // namespace moelab::testing
