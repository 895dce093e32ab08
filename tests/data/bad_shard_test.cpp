// A damaged or mismatched dataset is refused with an error naming the file.
#include <filesystem>
#include <fstream>

#include "data/batch_loader.h"
#include "data/dataset_info.h"
#include "data/manifest.h"
#include "data/shard_reader.h"
#include "data/validation_set.h"
#include "data_test_util.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;
using testing::expect_input_error;
using testing::read_bytes;
using testing::TempDir;
using testing::write_counting_split;
using testing::write_text;

class BadShardTest : public ::testing::Test {
 protected:
  void SetUp() override { write_counting_split(dir_.str(), "train", 2000, 10, 800); }
  std::string shard(int i) const { return dir_ / ("train/shard_0000" + std::to_string(i) + ".h5"); }
  BatchLoader open_loader() const { return BatchLoader(dir_.str(), "train", 15, 4, 0, 1, 0, 1); }
  TempDir dir_;
};

TEST_F(BadShardTest, IntactDatasetOpens) {
  EXPECT_EQ(open_loader().windows_per_epoch(), 2000 / 16);
  EXPECT_EQ(read_dataset_info(dir_.str(), "train").shards.size(), 3u);
}

TEST_F(BadShardTest, TruncatedShard) {
  const std::string bytes = read_bytes(shard(1));
  write_text(shard(1), bytes.substr(0, bytes.size() / 2));
  expect_input_error([&] { open_loader(); }, shard(1));
  expect_input_error([&] { ShardReader reader(shard(1)); }, shard(1));
}

TEST_F(BadShardTest, ChangedBytesFailTheChecksum) {
  std::string bytes = read_bytes(shard(2));
  bytes[bytes.size() - 3] ^= 0x5A;
  write_text(shard(2), bytes);
  expect_input_error([&] { open_loader(); }, shard(2) + ": checksum");
}

TEST_F(BadShardTest, OtherFormatVersion) {
  ShardHeader header;
  header.format_version = kShardFormatVersion + 1;
  header.vocab_size = 1000;
  header.split = "train";
  header.token_count = 3;
  const std::string path = dir_ / "future.h5";
  write_shard(path, header, {1, 2, 3}, {0, 3});
  expect_input_error([&] { ShardReader reader(path); }, path + ": shard format version 2");

  const std::string manifest_path = dir_ / "train/manifest.json";
  std::string manifest = read_bytes(manifest_path);
  manifest.replace(manifest.find("\"format_version\": 1"), 19, "\"format_version\": 9");
  write_text(manifest_path, manifest);
  expect_input_error([&] { read_dataset_info(dir_.str(), "train"); }, manifest_path);
}

TEST_F(BadShardTest, ShardFromAnotherTokenizer) {
  // Same tokens, other tokenizer checksum, swapped in with a matching file checksum.
  TempDir other;
  write_counting_split(other.str(), "train", 2000, 10, 800, 1000, "other-tokenizer");
  fs::copy_file(other / "train/shard_00001.h5", shard(1), fs::copy_options::overwrite_existing);
  Manifest manifest = read_manifest(dir_ / "train/manifest.json");
  manifest.shards[1].checksum = read_manifest(other / "train/manifest.json").shards[1].checksum;
  write_text(dir_ / "train/manifest.json", manifest_to_json(manifest));
  expect_input_error([&] { open_loader(); }, shard(1) + ": tokenizer");
}

TEST_F(BadShardTest, TokenizerMismatchBetweenSplitsAndWithTheModel) {
  write_counting_split(dir_.str(), "val", 500, 10, 800, 1000, "other-tokenizer");
  const DatasetInfo train = read_dataset_info(dir_.str(), "train");
  const DatasetInfo val = read_dataset_info(dir_.str(), "val");
  expect_input_error([&] { check_same_tokenizer(train, val); }, train.manifest_path);
  expect_input_error([&] { check_vocab_matches(train, 999); }, train.manifest_path);
  check_vocab_matches(train, 1000);
  check_vocab_matches(train, 1024);  // a padded embedding
}

TEST_F(BadShardTest, MissingOrBrokenManifestAndMissingShard) {
  expect_input_error([&] { read_dataset_info(dir_.str(), "nosplit"); },
                     dir_ / "nosplit/manifest.json");
  fs::remove(shard(0));
  expect_input_error([&] { read_dataset_info(dir_.str(), "train"); }, shard(0));
  write_text(dir_ / "train/manifest.json", "{not json");
  expect_input_error([&] { read_dataset_info(dir_.str(), "train"); }, dir_ / "train/manifest.json");
}

TEST_F(BadShardTest, TooShortForOneValidationWindow) {
  expect_input_error([&] { ValidationSet set(dir_.str(), "train", 5000, 0); },
                     dir_ / "train/manifest.json");
}

}  // namespace
}  // namespace moelab
