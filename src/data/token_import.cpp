#include "data/token_import.h"

#include <filesystem>

#include "data/token_documents.h"
#include "util/error.h"

namespace moelab {

namespace fs = std::filesystem;

namespace {

std::string megatron_prefix(const std::string& input) {
  for (const char* suffix : {".idx", ".bin"}) {
    const std::string ending(suffix);
    if (input.size() > ending.size() &&
        input.compare(input.size() - ending.size(), ending.size(), ending) == 0) {
      return input.substr(0, input.size() - ending.size());
    }
  }
  return input;
}

std::unique_ptr<TokenDocumentReader> open_source(const std::string& source,
                                                 const TokenImportSettings& settings) {
  if (settings.format == CorpusFormat::kMegatron) return open_megatron_documents(source);
  return open_npy_documents(source, settings.eos_id);
}

// Checks the ids and ends the document with eos; the result is what the shard holds.
std::vector<uint32_t> shard_tokens(const std::vector<int64_t>& tokens,
                                   const TokenImportSettings& settings,
                                   const TokenDocumentReader& reader) {
  std::vector<uint32_t> out;
  out.reserve(tokens.size() + 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= settings.vocab_size) {
      throw InputError(reader.where() + ", token " + std::to_string(i) + ": id " +
                       std::to_string(tokens[i]) + " is outside the vocabulary [0, " +
                       std::to_string(settings.vocab_size) + ")");
    }
    out.push_back(static_cast<uint32_t>(tokens[i]));
  }
  if (out.back() != settings.eos_id) out.push_back(static_cast<uint32_t>(settings.eos_id));
  return out;
}

}  // namespace

std::vector<std::string> token_sources(const std::vector<std::string>& inputs,
                                       const std::vector<std::string>& excludes,
                                       CorpusFormat format) {
  if (format == CorpusFormat::kNpy) return expand_inputs(inputs, excludes);
  if (inputs.empty()) throw InputError("no input files given");
  std::vector<std::string> prefixes;
  for (const auto& input : inputs) {
    const std::string prefix = megatron_prefix(input);
    for (const char* suffix : {".idx", ".bin"}) {
      if (!fs::is_regular_file(prefix + suffix)) {
        throw InputError("input " + input + ": no " + prefix + suffix +
                         " (a Megatron dataset is PREFIX.idx + PREFIX.bin)");
      }
    }
    prefixes.push_back(prefix);
  }
  return prefixes;
}

std::vector<std::string> token_source_files(const std::vector<std::string>& sources,
                                            CorpusFormat format) {
  if (format == CorpusFormat::kNpy) return sources;
  std::vector<std::string> files;
  for (const auto& prefix : sources) {
    files.push_back(prefix + ".idx");
    files.push_back(prefix + ".bin");
  }
  return files;
}

int64_t count_token_documents(const std::vector<std::string>& sources,
                              const TokenImportSettings& settings) {
  int64_t count = 0;
  std::vector<int64_t> tokens;
  for (const auto& source : sources) {
    const auto reader = open_source(source, settings);
    while (reader->next(&tokens)) ++count;
  }
  return count;
}

void import_token_documents(const std::vector<std::string>& sources,
                            const TokenImportSettings& settings,
                            const std::function<size_t(int64_t)>& split_of,
                            const std::vector<ShardSink*>& sinks) {
  int64_t index = 0;
  std::vector<int64_t> tokens;
  for (const auto& source : sources) {
    const auto reader = open_source(source, settings);
    while (reader->next(&tokens)) {
      const std::vector<uint32_t> document = shard_tokens(tokens, settings, *reader);
      sinks[split_of(index++)]->add_document(document.data(),
                                             static_cast<int64_t>(document.size()));
    }
  }
}

}  // namespace moelab
