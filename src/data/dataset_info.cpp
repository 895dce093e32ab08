#include "data/dataset_info.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "data/checksum.h"
#include "data/manifest.h"
#include "data/shard_format.h"
#include "data/shard_reader.h"
#include "data/tokenizer.h"
#include "util/error.h"

namespace moelab {

namespace fs = std::filesystem;

DatasetInfo read_dataset_info(const std::string& dataset_dir, const std::string& split) {
  const fs::path split_dir = fs::path(dataset_dir) / split;
  DatasetInfo info;
  info.split = split;
  info.manifest_path = (split_dir / "manifest.json").string();
  const Manifest manifest = read_manifest(info.manifest_path);
  const std::string& path = info.manifest_path;
  if (manifest.format_version != kShardFormatVersion) {
    throw InputError(path + ": format version " + std::to_string(manifest.format_version) +
                     ", this moelab reads version " + std::to_string(kShardFormatVersion) +
                     " (re-run moelab prep)");
  }
  if (manifest.shards.empty()) throw InputError(path + ": manifest lists no shards");
  if (manifest.vocab_size <= 0 || manifest.eos_id < 0 || manifest.eos_id >= manifest.vocab_size) {
    throw InputError(path + ": vocab_size/eos_id are not a valid pair");
  }
  const std::optional<std::string> tokenizer = Tokenizer::dataset_checksum(dataset_dir);
  if (tokenizer && *tokenizer != manifest.tokenizer_checksum) {
    throw InputError(dataset_dir +
                     ": the tokenizer's checksum differs from the tokenizer_checksum in " + path +
                     " (dataset folder mixes two preparations?)");
  }
  info.vocab_size = manifest.vocab_size;
  info.eos_id = manifest.eos_id;
  info.tokenizer_checksum = manifest.tokenizer_checksum;
  info.num_tokens = manifest.num_tokens();
  info.num_docs = manifest.num_docs();
  for (const auto& shard : manifest.shards) {
    const fs::path shard_path = split_dir / shard.name;
    if (shard.name.empty() || shard.name.find('/') != std::string::npos) {
      throw InputError(path + ": shard name '" + shard.name + "' must be a plain file name");
    }
    if (!fs::is_regular_file(shard_path)) {
      throw InputError(shard_path.string() + ": shard listed in " + path + " is missing");
    }
    info.shards.push_back(shard_path.string());
    info.shard_tokens.push_back(shard.tokens);
    info.shard_checksums.push_back(shard.checksum);
  }
  return info;
}

void verify_shards(const DatasetInfo& info) {
  for (size_t i = 0; i < info.shards.size(); ++i) {
    const std::string& path = info.shards[i];
    const std::string actual = checksum_hex(xxhash64_file(path));
    if (actual != info.shard_checksums[i]) {
      throw InputError(path + ": checksum " + actual + " differs from " + info.shard_checksums[i] +
                       " in " + info.manifest_path + " (file changed or damaged)");
    }
    const ShardReader reader(path);
    const ShardHeader& header = reader.header();
    if (header.vocab_size != info.vocab_size || header.eos_id != info.eos_id ||
        header.tokenizer_checksum != info.tokenizer_checksum) {
      throw InputError(path + ": tokenizer (vocab " + std::to_string(header.vocab_size) +
                       ", checksum " + header.tokenizer_checksum + ") differs from " +
                       info.manifest_path);
    }
    if (header.token_count != info.shard_tokens[i]) {
      throw InputError(path + ": holds " + std::to_string(header.token_count) + " tokens, " +
                       info.manifest_path + " says " + std::to_string(info.shard_tokens[i]));
    }
  }
}

void check_same_tokenizer(const DatasetInfo& a, const DatasetInfo& b) {
  if (a.tokenizer_checksum != b.tokenizer_checksum || a.vocab_size != b.vocab_size ||
      a.eos_id != b.eos_id) {
    throw InputError(a.manifest_path + " and " + b.manifest_path +
                     " were encoded with different tokenizers (" + a.tokenizer_checksum + " vs " +
                     b.tokenizer_checksum + ")");
  }
}

void check_vocab_matches(const DatasetInfo& info, int64_t model_vocab_size) {
  if (info.vocab_size > model_vocab_size) {
    throw InputError(info.manifest_path + ": dataset vocab_size " +
                     std::to_string(info.vocab_size) + " but model.vocab_size is " +
                     std::to_string(model_vocab_size) + " (the model must hold every id)");
  }
  if (info.vocab_size < model_vocab_size) {
    spdlog::info("{}: model.vocab_size {} pads the dataset's {} ids ({} rows no id reaches)",
                 info.manifest_path, model_vocab_size, info.vocab_size,
                 model_vocab_size - info.vocab_size);
  }
}

}  // namespace moelab
