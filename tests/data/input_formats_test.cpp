// Input formats of `moelab prep`: compressed text (gzip, zstd), Parquet string
// columns, and pre-tokenized Megatron / .npy token arrays imported as they are.
#include <zlib.h>
#include <zstd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/corpus_reader.h"
#include "data/dataset_info.h"
#include "data/dataset_inspect.h"
#include "data/prep.h"
#include "data/shard_reader.h"
#include "data/tokenizer.h"
#include "data_test_util.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::expect_input_error;
using testing::make_document;
using testing::read_bytes;
using testing::small_prep_options;
using testing::split_documents;
using testing::TempDir;
using testing::write_text;

// zstd with a content checksum, so any corrupted byte is detected.
void write_zstd(const std::string& path, const std::string& contents) {
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
  std::string out(ZSTD_compressBound(contents.size()), '\0');
  const size_t size =
      ZSTD_compress2(context, out.data(), out.size(), contents.data(), contents.size());
  ZSTD_freeCCtx(context);
  ASSERT_FALSE(ZSTD_isError(size));
  write_text(path, out.substr(0, size));
}

void write_gzip(const std::string& path, const std::string& contents) {
  gzFile file = gzopen(path.c_str(), "wb");
  gzwrite(file, contents.data(), static_cast<unsigned>(contents.size()));
  gzclose(file);
}

// Runs tests/data/write_inputs.py (numpy, pyarrow from the project's Python).
void write_inputs(const TempDir& dir, const json& spec) {
  const std::string spec_path = dir / "spec.json";
  write_text(spec_path, spec.dump());
  const std::string command = std::string(MOELAB_TORCH_PYTHON) + " " + MOELAB_SOURCE_DIR +
                              "/tests/data/write_inputs.py " + spec_path;
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

std::vector<RawDocument> raw_documents(const std::vector<std::string>& files,
                                       const CorpusOptions& options) {
  RawDocumentReader reader(files, options);
  std::vector<RawDocument> docs;
  RawDocument doc;
  while (reader.next(&doc)) docs.push_back(doc);
  return docs;
}

std::vector<std::string> texts_of(const std::vector<std::string>& files,
                                  const CorpusOptions& options) {
  std::vector<std::string> texts;
  for (const RawDocument& doc : raw_documents(files, options)) {
    texts.push_back(*document_text(doc, options));
  }
  return texts;
}

// Enough JSON lines to cross the reader's 256 KiB buffer several times.
std::string jsonl_corpus(int count) {
  std::string lines;
  for (int i = 0; i < count; ++i) lines += json{{"text", make_document(i)}}.dump() + "\n";
  return lines;
}

CorpusOptions jsonl_options() {
  CorpusOptions options;
  options.format = CorpusFormat::kJsonl;
  return options;
}

TEST(CompressedInput, ZstdJsonlAndTextReadLikePlain) {
  TempDir dir;
  const std::string lines = jsonl_corpus(20000);
  write_text(dir / "plain.jsonl", lines);
  write_zstd(dir / "docs.jsonl.zst", lines);
  write_gzip(dir / "docs.json.gz", lines);
  const auto plain = texts_of({dir / "plain.jsonl"}, jsonl_options());
  ASSERT_EQ(plain.size(), 20000u);
  EXPECT_EQ(texts_of({dir / "docs.jsonl.zst"}, jsonl_options()), plain);
  EXPECT_EQ(texts_of({dir / "docs.json.gz"}, jsonl_options()), plain);

  write_zstd(dir / "corpus.txt.zst", testing::make_text_corpus(0, 50));
  write_text(dir / "corpus.txt", testing::make_text_corpus(0, 50));
  EXPECT_EQ(texts_of({dir / "corpus.txt.zst"}, CorpusOptions{}),
            texts_of({dir / "corpus.txt"}, CorpusOptions{}));
}

TEST(CompressedInput, TruncatedZstdNamesFileLineAndOffset) {
  TempDir dir;
  write_zstd(dir / "full.zst", jsonl_corpus(20000));
  const std::string bytes = read_bytes(dir / "full.zst");
  const std::string path = dir / "cut.jsonl.zst";
  write_text(path, bytes.substr(0, bytes.size() / 2));
  expect_input_error([&] { texts_of({path}, jsonl_options()); }, path + ": after line ");
  expect_input_error([&] { texts_of({path}, jsonl_options()); }, "truncated zstd");
  expect_input_error([&] { texts_of({path}, jsonl_options()); }, "compressed byte ");
}

TEST(CompressedInput, CorruptZstdAndGzipAreLocated) {
  TempDir dir;
  write_zstd(dir / "full.zst", jsonl_corpus(2000));
  std::string bytes = read_bytes(dir / "full.zst");
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 16; ++i) bytes[i] ^= 0x5A;
  const std::string zst = dir / "bad.jsonl.zst";
  write_text(zst, bytes);
  expect_input_error([&] { texts_of({zst}, jsonl_options()); }, zst + ": after line ");
  expect_input_error([&] { texts_of({zst}, jsonl_options()); }, "corrupt zstd");

  write_gzip(dir / "full.gz", jsonl_corpus(20000));
  bytes = read_bytes(dir / "full.gz");
  const std::string gz = dir / "cut.jsonl.gz";
  write_text(gz, bytes.substr(0, bytes.size() / 2));
  expect_input_error([&] { texts_of({gz}, jsonl_options()); }, gz + ": after line ");
  expect_input_error([&] { texts_of({gz}, jsonl_options()); }, "truncated or corrupt gzip");
  try {
    texts_of({gz}, jsonl_options());
  } catch (const InputError& error) {  // the intact lines before the cut are counted
    EXPECT_EQ(std::string(error.what()).find("after line 0 "), std::string::npos) << error.what();
  }
}

TEST(ParquetInput, ReadsTheTextColumnRowGroupByRowGroup) {
  TempDir dir;
  const std::string path = dir / "docs.parquet";
  json texts = json::array();
  json ids = json::array();
  for (int i = 0; i < 10; ++i) {
    texts.push_back(i == 4 ? json(nullptr) : json(make_document(i)));
    ids.push_back(i);
  }
  write_inputs(dir, {{"kind", "parquet"},
                     {"path", path},
                     {"row_group_size", 3},
                     {"columns", {{"id", ids}, {"body", texts}}}});
  CorpusOptions options;
  options.format = CorpusFormat::kParquet;
  options.text_field = "body";
  const std::vector<RawDocument> docs = raw_documents({path}, options);
  ASSERT_EQ(docs.size(), 9u);  // the null is no document
  EXPECT_EQ(docs[0].text, make_document(0));
  EXPECT_EQ(docs[4].text, make_document(5));
  EXPECT_EQ(docs[4].row_group, 1);
  EXPECT_EQ(docs[4].line, 2);
  EXPECT_EQ(docs[8].text, make_document(9));
  EXPECT_EQ(docs[8].row_group, 3);
}

TEST(ParquetInput, MissingOrNonStringColumnAndCorruptFileAreLocated) {
  TempDir dir;
  const std::string path = dir / "docs.parquet";
  write_inputs(
      dir,
      {{"kind", "parquet"}, {"path", path}, {"columns", {{"id", {1, 2}}, {"text", {"a", "b"}}}}});
  CorpusOptions options;
  options.format = CorpusFormat::kParquet;
  options.text_field = "body";
  expect_input_error([&] { raw_documents({path}, options); },
                     path + ": no column \"body\" (columns: id, text");
  options.text_field = "id";
  expect_input_error([&] { raw_documents({path}, options); },
                     path + ": column \"id\" holds int64, not strings");

  const std::string bytes = read_bytes(path);
  const std::string cut = dir / "cut.parquet";
  write_text(cut, bytes.substr(0, bytes.size() - 10));  // footer gone
  options.text_field = "text";
  expect_input_error([&] { raw_documents({cut}, options); }, cut + ": not a readable Parquet file");
}

TEST(ParquetInput, PrepGivesTheSameDatasetAsJsonl) {
  TempDir dir;
  json texts = json::array();
  std::string lines;
  for (int i = 0; i < 300; ++i) {
    texts.push_back(make_document(i));
    lines += json{{"text", make_document(i)}}.dump() + "\n";
  }
  write_inputs(dir, {{"kind", "parquet"},
                     {"path", dir / "docs.parquet"},
                     {"row_group_size", 64},
                     {"columns", {{"text", texts}}}});
  write_zstd(dir / "docs.jsonl.zst", lines);
  PrepOptions options = small_prep_options({dir / "docs.jsonl.zst"}, dir / "from_jsonl");
  options.corpus.format = CorpusFormat::kJsonl;
  options.val_count = 20;
  run_prep(options);
  options.inputs = {dir / "docs.parquet"};
  options.out_dir = dir / "from_parquet";
  options.corpus.format = CorpusFormat::kParquet;
  run_prep(options);
  for (const char* split : {"train", "val"}) {
    const auto from_jsonl = split_documents(dir / "from_jsonl", split);
    EXPECT_FALSE(from_jsonl.empty());
    EXPECT_EQ(split_documents(dir / "from_parquet", split), from_jsonl) << split;
  }
}

// Three documents: one of two sequences (Megatron's --split-sentences), one
// already ending in eos (--append-eod), one without.
json megatron_spec(const std::string& prefix, const std::string& dtype) {
  return {{"kind", "megatron"},
          {"prefix", prefix},
          {"dtype", dtype},
          {"documents", json::parse("[[[5, 6], [7]], [[8, 9, 99]], [[10]]]")}};
}

PrepOptions import_options(const std::string& input, const std::string& out, CorpusFormat format) {
  PrepOptions options = small_prep_options({input}, out);
  options.corpus.format = format;
  options.tokenizer.vocab_size = 100;
  options.vocab_size_given = true;
  options.eos_id = 99;
  return options;
}

TEST(TokenImport, MegatronDocumentsKeepTheirBoundaries) {
  for (const char* dtype : {"uint16", "int32"}) {
    TempDir dir;
    write_inputs(dir, megatron_spec(dir / "corpus_text_document", dtype));
    run_prep(import_options(dir / "corpus_text_document", dir / "out", CorpusFormat::kMegatron));
    const std::vector<std::vector<int64_t>> expected = {{5, 6, 7, 99}, {8, 9, 99}, {10, 99}};
    EXPECT_EQ(split_documents(dir / "out", "train"), expected) << dtype;
    const DatasetInfo info = read_dataset_info(dir / "out", "train");
    EXPECT_EQ(info.vocab_size, 100);
    EXPECT_EQ(info.eos_id, 99);
    EXPECT_FALSE(fs::exists(dir / "out/tokenizer.model"));
    EXPECT_NE(inspect_dataset(dir / "out").find("decode is unavailable for this dataset"),
              std::string::npos);
  }
}

TEST(TokenImport, NpySplitsAtEosAndCarvesValidation) {
  for (const char* dtype : {"uint16", "int32", "int64"}) {
    TempDir dir;
    json tokens = json::array();
    for (int doc = 0; doc < 40; ++doc) {
      for (int t = 0; t <= doc % 5; ++t) tokens.push_back(doc);
      tokens.push_back(99);
    }
    tokens.push_back(7);  // a last document without eos
    write_inputs(
        dir, {{"kind", "npy"}, {"path", dir / "tokens.npy"}, {"dtype", dtype}, {"tokens", tokens}});
    PrepOptions options = import_options(dir / "tokens.npy", dir / "out", CorpusFormat::kNpy);
    options.val_count = 5;
    run_prep(options);
    auto train = split_documents(dir / "out", "train");
    const auto val = split_documents(dir / "out", "val");
    EXPECT_EQ(train.size(), 36u) << dtype;
    EXPECT_EQ(val.size(), 5u) << dtype;
    train.insert(train.end(), val.begin(), val.end());
    std::sort(train.begin(), train.end());
    EXPECT_EQ(train.front(), (std::vector<int64_t>{0, 99}));
    EXPECT_EQ(train.back(), (std::vector<int64_t>{39, 39, 39, 39, 39, 99}));
    EXPECT_NE(std::find(train.begin(), train.end(), std::vector<int64_t>{7, 99}), train.end());
  }
}

TEST(TokenImport, TokenizerIsRecordedWhenGiven) {
  TempDir dir;
  write_text(dir / "corpus.txt", testing::make_text_corpus(0, 100));
  run_prep(small_prep_options({dir / "corpus.txt"}, dir / "text"));
  const Tokenizer tokenizer = Tokenizer::from_file(dir / "text/tokenizer.model");
  json tokens = json::array();
  const auto encoded =
      tokenizer.encode_documents({make_document(0), make_document(1), make_document(2)});
  for (const auto& document : encoded) {
    for (uint32_t id : document) tokens.push_back(id);
  }
  write_inputs(
      dir, {{"kind", "npy"}, {"path", dir / "tokens.npy"}, {"dtype", "int32"}, {"tokens", tokens}});
  PrepOptions options = small_prep_options({dir / "tokens.npy"}, dir / "out");
  options.corpus.format = CorpusFormat::kNpy;
  options.tokenizer_model = dir / "text/tokenizer.model";
  run_prep(options);
  EXPECT_EQ(read_bytes(dir / "out/tokenizer.model"), read_bytes(dir / "text/tokenizer.model"));
  EXPECT_EQ(split_documents(dir / "out", "train").size(), 3u);
  EXPECT_NE(inspect_dataset(dir / "out").find(make_document(0)), std::string::npos);
}

TEST(TokenImport, BadIndexAndOutOfVocabularyIdsAreLocated) {
  TempDir dir;
  const std::string prefix = dir / "corpus";
  write_inputs(dir, megatron_spec(prefix, "uint16"));
  PrepOptions options = import_options(prefix, dir / "out", CorpusFormat::kMegatron);
  options.tokenizer.vocab_size = 10;
  options.eos_id = 9;
  expect_input_error([&] { run_prep(options); },
                     prefix + ".bin: document 1 (byte offset 6), token 2: id 99");
  expect_input_error([&] { run_prep(options); }, "outside the vocabulary [0, 10)");

  options = import_options(prefix, dir / "out", CorpusFormat::kMegatron);
  const std::string data = read_bytes(prefix + ".bin");
  write_text(prefix + ".bin", data.substr(0, data.size() - 2));
  expect_input_error([&] { run_prep(options); },
                     prefix + ".bin: 12 bytes, but " + prefix + ".idx describes 14");
  write_text(prefix + ".bin", data);

  std::string index = read_bytes(prefix + ".idx");
  index[17] = 7;  // float32
  write_text(prefix + ".idx", index);
  expect_input_error([&] { run_prep(options); }, prefix + ".idx: token dtype code 7");
  index[0] = 'X';
  write_text(prefix + ".idx", index);
  expect_input_error([&] { run_prep(options); }, prefix + ".idx: not a Megatron index");
}

TEST(TokenImport, FailedPrepLeavesNoDataset) {
  TempDir dir;
  json tokens = json::array();
  for (int doc = 0; doc < 200; ++doc) {
    for (int t = 0; t < 10; ++t) tokens.push_back(doc == 150 ? 500 : 3);
    tokens.push_back(99);
  }
  write_inputs(
      dir, {{"kind", "npy"}, {"path", dir / "tokens.npy"}, {"dtype", "int32"}, {"tokens", tokens}});
  PrepOptions options = import_options(dir / "tokens.npy", dir / "out", CorpusFormat::kNpy);
  options.shard_tokens = 100;  // shards are written before the bad document
  expect_input_error([&] { run_prep(options); }, dir / "tokens.npy: document 150");
  EXPECT_TRUE(fs::exists(dir / "out/train/shard_00000.h5"));
  EXPECT_FALSE(fs::exists(dir / "out/train/manifest.json"));
  EXPECT_FALSE(fs::exists(dir / "out/prep.json"));
  expect_input_error([&] { read_dataset_info(dir / "out", "train"); }, "manifest");

  write_zstd(dir / "good.jsonl.zst", jsonl_corpus(300));
  std::string cut = read_bytes(dir / "good.jsonl.zst");
  write_text(dir / "z_cut.jsonl.zst", cut.substr(0, cut.size() / 2));
  PrepOptions text =
      small_prep_options({dir / "good.jsonl.zst", dir / "z_cut.jsonl.zst"}, dir / "text_out");
  text.corpus.format = CorpusFormat::kJsonl;
  text.shard_tokens = 100;
  expect_input_error([&] { run_prep(text); }, dir / "z_cut.jsonl.zst: after line");
  EXPECT_FALSE(fs::exists(dir / "text_out/train/manifest.json"));
}

TEST(TokenImport, MissingOptionsAreInputErrors) {
  TempDir dir;
  write_inputs(dir, megatron_spec(dir / "corpus", "uint16"));
  PrepOptions options = small_prep_options({dir / "corpus"}, dir / "out");
  options.corpus.format = CorpusFormat::kMegatron;
  expect_input_error([&] { run_prep(options); }, "needs --tokenizer or --vocab-size");
  options.vocab_size_given = true;
  expect_input_error([&] { run_prep(options); }, "needs --eos-id");
  options.inputs = {dir / "nothing"};
  options.eos_id = 3;
  expect_input_error([&] { run_prep(options); }, "no " + dir / "nothing.idx");
  options.corpus.format = CorpusFormat::kText;
  expect_input_error([&] { run_prep(options); }, "--eos-id is for --format megatron or npy");
}

}  // namespace
}  // namespace moelab
