#include "data/dataset_inspect.h"

#include <filesystem>
#include <sstream>
#include <vector>

#include "data/dataset_info.h"
#include "data/shard_format.h"
#include "data/shard_reader.h"
#include "data/tokenizer.h"
#include "util/error.h"

namespace moelab {

namespace fs = std::filesystem;

namespace {

constexpr size_t kSampleChars = 400;

std::string first_document_text(const DatasetInfo& info, const Tokenizer& tokenizer) {
  const ShardReader shard(info.shards.front());
  const std::vector<uint64_t> offsets = shard.doc_offsets();
  if (offsets.size() < 2) throw InputError(shard.path() + ": shard has no document offsets");
  std::vector<int64_t> tokens(offsets[1] - offsets[0]);
  shard.read_tokens(static_cast<int64_t>(offsets[0]), static_cast<int64_t>(tokens.size()),
                    tokens.data());
  if (!tokens.empty() && tokens.back() == info.eos_id) tokens.pop_back();
  std::string text = tokenizer.decode(std::vector<int>(tokens.begin(), tokens.end()));
  if (text.size() > kSampleChars) text = text.substr(0, kSampleChars) + " ...";
  return text;
}

}  // namespace

std::string inspect_dataset(const std::string& dataset_dir) {
  std::ostringstream report;
  report << "dataset " << dataset_dir << "\n";
  std::vector<DatasetInfo> splits;
  for (const char* split : {"train", "val"}) {
    if (!fs::exists(fs::path(dataset_dir) / split / "manifest.json")) continue;
    DatasetInfo info = read_dataset_info(dataset_dir, split);
    verify_shards(info);
    if (!splits.empty()) check_same_tokenizer(splits.front(), info);
    report << "  " << split << ": " << info.num_docs << " docs, " << info.num_tokens << " tokens, "
           << info.shards.size() << " shards (checksums ok)\n";
    splits.push_back(std::move(info));
  }
  if (splits.empty()) {
    throw InputError(dataset_dir +
                     ": no train/manifest.json or val/manifest.json (not a prepared dataset)");
  }
  const DatasetInfo& first = splits.front();
  report << "  vocab size " << first.vocab_size << ", eos id " << first.eos_id
         << ", tokenizer checksum " << first.tokenizer_checksum << "\n";
  if (first.tokenizer_checksum == kNoTokenizer) {
    report << "  decode is unavailable for this dataset (imported from token ids without "
              "--tokenizer)\n";
    return report.str();
  }
  const Tokenizer tokenizer = Tokenizer::from_dataset(dataset_dir);
  report << "  first " << first.split << " document:\n"
         << first_document_text(first, tokenizer) << "\n";
  return report.str();
}

}  // namespace moelab
