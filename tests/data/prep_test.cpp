// End-to-end prep on generated corpora: encode -> shard -> read back -> decode.
#include "data/prep.h"

#include <filesystem>
#include <map>

#include "data/checksum.h"
#include "data/dataset_info.h"
#include "data/dataset_inspect.h"
#include "data/shard_reader.h"
#include "data/tokenizer.h"
#include "data/validation_set.h"
#include "data_test_util.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;
using testing::expect_input_error;
using testing::make_document;
using testing::make_text_corpus;
using testing::read_bytes;
using testing::small_prep_options;
using testing::TempDir;
using testing::write_text;

// Every document of a split, decoded, in order.
std::vector<std::string> decode_split(const std::string& dataset, const std::string& split) {
  const DatasetInfo info = read_dataset_info(dataset, split);
  const Tokenizer tokenizer = Tokenizer::from_file(dataset + "/tokenizer.model");
  std::vector<std::string> texts;
  for (const auto& path : info.shards) {
    const ShardReader shard(path);
    const auto offsets = shard.doc_offsets();
    for (size_t d = 0; d + 1 < offsets.size(); ++d) {
      std::vector<int64_t> tokens(offsets[d + 1] - offsets[d]);
      shard.read_tokens(offsets[d], tokens.size(), tokens.data());
      EXPECT_EQ(tokens.back(), info.eos_id) << "document must end with EOS";
      tokens.pop_back();
      texts.push_back(tokenizer.decode(std::vector<int>(tokens.begin(), tokens.end())));
    }
  }
  return texts;
}

std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) {
      files[fs::relative(entry.path(), dir).string()] = read_bytes(entry.path().string());
    }
  }
  return files;
}

class PrepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_text(dir_ / "corpus/part1.txt", make_text_corpus(0, 150));
    write_text(dir_ / "corpus/part2.txt", make_text_corpus(150, 150));
    write_text(dir_ / "valid.txt", make_text_corpus(1000, 40));
  }
  TempDir dir_;
};

TEST_F(PrepTest, RoundTripEncodeShardDecode) {
  PrepOptions options = small_prep_options({dir_ / "corpus"}, dir_ / "out");
  options.val_inputs = {dir_ / "valid.txt"};
  const PrepSummary summary = run_prep(options);
  ASSERT_EQ(summary.splits.size(), 2u);
  EXPECT_EQ(summary.splits[0].docs, 300);
  EXPECT_EQ(summary.splits[1].docs, 40);
  EXPECT_GT(summary.splits[0].shards, 1) << "500-token shards must split this corpus";

  std::vector<std::string> expected_train;
  for (int i = 0; i < 300; ++i) expected_train.push_back(make_document(i));
  EXPECT_EQ(decode_split(dir_ / "out", "train"), expected_train);
  std::vector<std::string> expected_val;
  for (int i = 1000; i < 1040; ++i) expected_val.push_back(make_document(i));
  EXPECT_EQ(decode_split(dir_ / "out", "val"), expected_val);

  const DatasetInfo train = read_dataset_info(dir_ / "out", "train");
  const DatasetInfo val = read_dataset_info(dir_ / "out", "val");
  check_same_tokenizer(train, val);
  EXPECT_EQ(train.vocab_size, 64);
  EXPECT_EQ(train.tokenizer_checksum, checksum_hex(xxhash64_file(dir_ / "out/tokenizer.model")));
  EXPECT_EQ(train.num_tokens, summary.splits[0].tokens);
  verify_shards(train);
  const ShardHeader header = ShardReader(train.shards[0]).header();
  EXPECT_EQ(header.split, "train");
  EXPECT_EQ(header.tokenizer_checksum, train.tokenizer_checksum);

  const std::string report = inspect_dataset(dir_ / "out");
  EXPECT_NE(report.find("train: 300 docs"), std::string::npos) << report;
  EXPECT_NE(report.find("val: 40 docs"), std::string::npos) << report;
  EXPECT_NE(report.find(make_document(0)), std::string::npos) << report;
}

TEST_F(PrepTest, OutputIsByteIdenticalForAnyThreadCountAndBlockSize) {
  PrepOptions options = small_prep_options({dir_ / "corpus"}, dir_ / "a");
  options.val_fraction = 0.1;
  run_prep(options);
  options.out_dir = dir_ / "b";
  options.threads = 3;
  options.block_docs = 7;
  run_prep(options);
  const auto a = files_of(dir_ / "a");
  const auto b = files_of(dir_ / "b");
  ASSERT_GE(a.size(), 5u);
  EXPECT_TRUE(a == b) << "datasets differ";
}

TEST_F(PrepTest, CarvesValidationDeterministicallyByCount) {
  PrepOptions options = small_prep_options({dir_ / "corpus"}, dir_ / "out");
  options.val_count = 30;
  options.seed = 7;
  run_prep(options);
  const auto val = decode_split(dir_ / "out", "val");
  const auto train = decode_split(dir_ / "out", "train");
  EXPECT_EQ(val.size(), 30u);
  EXPECT_EQ(train.size(), 270u);
  // Every document lands in exactly one split, in corpus order.
  std::vector<std::string> merged;
  size_t t = 0, v = 0;
  for (int i = 0; i < 300; ++i) {
    const std::string doc = make_document(i);
    if (v < val.size() && val[v] == doc) {
      ++v;
    } else {
      ASSERT_LT(t, train.size());
      EXPECT_EQ(train[t++], doc);
    }
  }
  EXPECT_EQ(v, val.size());
  // A different seed picks different documents.
  options.out_dir = dir_ / "other";
  options.seed = 8;
  run_prep(options);
  EXPECT_NE(decode_split(dir_ / "other", "val"), val);
}

TEST_F(PrepTest, ExistingTokenizerIsReusedAndRecorded) {
  PrepOptions options = small_prep_options({dir_ / "corpus"}, dir_ / "first");
  run_prep(options);
  options.out_dir = dir_ / "second";
  options.inputs = {dir_ / "valid.txt"};
  options.tokenizer_model = dir_ / "first/tokenizer.model";
  run_prep(options);
  check_same_tokenizer(read_dataset_info(dir_ / "first", "train"),
                       read_dataset_info(dir_ / "second", "train"));
  EXPECT_FALSE(fs::exists(dir_ / "second/val")) << "no validation was asked for";
}

TEST_F(PrepTest, RefusesToOverwriteADifferentDatasetWithoutForce) {
  PrepOptions options = small_prep_options({dir_ / "corpus"}, dir_ / "out");
  run_prep(options);
  run_prep(options);  // same preparation: allowed, same result
  options.inputs = {dir_ / "valid.txt"};
  expect_input_error([&] { run_prep(options); }, dir_ / "out");
  options.force = true;
  run_prep(options);
  EXPECT_EQ(read_dataset_info(dir_ / "out", "train").num_docs, 40);
}

TEST_F(PrepTest, BadOptionsAndEmptyCorpusAreInputErrors) {
  PrepOptions options = small_prep_options({dir_ / "corpus"}, dir_ / "out");
  options.val_fraction = 0.1;
  options.val_count = 3;
  expect_input_error([&] { run_prep(options); }, "not both");
  options = small_prep_options({dir_ / "corpus"}, dir_ / "out");
  options.val_count = 300;
  expect_input_error([&] { run_prep(options); }, "no training or no validation");
  write_text(dir_ / "blank.txt", "\n\n<|endoftext|>\n");
  options = small_prep_options({dir_ / "blank.txt"}, dir_ / "out2");
  expect_input_error([&] { run_prep(options); }, "no documents");
  options.inputs = {dir_ / "corpus"};
  options.tokenizer_model = dir_ / "valid.txt";
  expect_input_error([&] { run_prep(options); }, dir_ / "valid.txt");
}

}  // namespace
}  // namespace moelab
