// The native BPE encoder against the reference, spm_encode itself: identical
// ids on the corpora the tests and examples prepare and on adversarial text,
// for models with and without byte fallback.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/bpe_encoder.h"
#include "data/spm_model.h"
#include "data/tokenizer.h"
#include "data_test_util.h"

namespace moelab::testing {
namespace {

namespace fs = std::filesystem;

// spm_encode's ids for each text (one line each, newlines as spaces, as prep writes them).
std::vector<std::vector<uint32_t>> spm_encode(const Tokenizer& tokenizer,
                                              const std::vector<std::string>& texts) {
  TempDir dir;
  write_text(dir / "m.model", tokenizer.file_bytes());
  std::string lines;
  for (std::string text : texts) {
    for (char& c : text) c = (c == '\n' || c == '\r') ? ' ' : c;
    lines += text + "\n";
  }
  write_text(dir / "in.txt", lines);
  const std::string command = "spm_encode --model=" + (dir / "m.model") + " --output_format=id < " +
                              (dir / "in.txt") + " > " + (dir / "out.txt");
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::vector<std::vector<uint32_t>> ids;
  std::istringstream out(read_bytes(dir / "out.txt"));
  std::string line;
  while (std::getline(out, line)) {
    std::istringstream numbers(line);
    std::vector<uint32_t> row;
    uint32_t id;
    while (numbers >> id) row.push_back(id);
    row.push_back(uint32_t(tokenizer.eos_id()));
    ids.push_back(row);
  }
  return ids;
}

void expect_same_ids(const Tokenizer& tokenizer, const std::vector<std::string>& texts,
                     const std::string& what) {
  const auto ours = tokenizer.encode_documents(texts);
  const auto reference = spm_encode(tokenizer, texts);
  ASSERT_EQ(ours.size(), reference.size()) << what;
  size_t mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (ours[i] != reference[i] && ++mismatches <= 3) {
      ADD_FAILURE() << what << ": document " << i << " differs: '" << texts[i].substr(0, 80)
                    << "' (" << ours[i].size() << " vs " << reference[i].size() << " ids)";
    }
  }
  EXPECT_EQ(mismatches, 0u) << what;
}

std::vector<std::string> generated_documents(int count) {
  std::vector<std::string> docs;
  for (int i = 0; i < count; ++i) docs.push_back(make_document(i));
  return docs;
}

// Text chosen to break an encoder: whitespace of every kind, NFKC rewrites,
// characters the model never saw, invalid UTF-8, every byte value.
std::vector<std::string> adversarial_texts() {
  std::vector<std::string> texts = {
      "",
      " ",
      "   \t  ",
      "  leading and trailing  ",
      "many     spaces\t\ttabs",
      "the cat sat on the mat",
      "ＦＵＬＬ　ｗｉｄｔｈ ﬁne ① ㍻ Å Ω ½",
      "caf\xC3\xA9 cafe\xCC\x81 na\xC3\xAFve",
      "emoji \xF0\x9F\x98\x80\xF0\x9F\x90\x88 and \xE2\x98\x83 snowman",
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E "
      "\xD0\xA0\xD1\x83\xD1\x81\xD1\x81\xD0\xBA\xD0\xB8\xD0\xB9",
      "zero\xE2\x80\x8Bwidth\xE2\x80\x8D joiner \xC2\xA0nbsp",
      "invalid \xFF\xFE bytes \xC3 truncated \xE2\x82 and \xED\xA0\x80 surrogate \xF4\x90\x80\x80",
      "overlong \xC0\xAF \xE0\x80\xAF",
      "\xE2\x96\x81"
      "already"
      "\xE2\x96\x81"
      "escaped \xE2\x96\x81",
      "<s> </s> <unk> <0x41> control-looking",
  };
  std::string every_byte;
  for (int b = 1; b < 256; ++b) every_byte += char(b);
  texts.push_back(every_byte);
  texts.push_back(std::string("nul\0inside", 10));
  std::string long_line;
  for (int i = 0; i < 4000; ++i) long_line += make_document(i) + (i % 7 ? " " : "\t");
  texts.push_back(long_line);
  texts.push_back(std::string(20000, 'a'));
  return texts;
}

class BpeEncoderTest : public ::testing::TestWithParam<bool> {};

TEST_P(BpeEncoderTest, SameIdsAsSpmEncode) {
  TokenizerTrainOptions options;
  options.vocab_size = 400;
  options.byte_fallback = GetParam();
  std::vector<std::string> training = generated_documents(300);
  const auto fortunes = fortune_documents();
  training.insert(training.end(), fortunes.begin(),
                  fortunes.begin() + std::min<size_t>(2000, fortunes.size()));
  const Tokenizer tokenizer(train_tokenizer(training, options), "test.model");

  expect_same_ids(tokenizer, generated_documents(2000), "generated documents");
  expect_same_ids(tokenizer, adversarial_texts(), "adversarial text");
  if (fortunes.empty()) {
    GTEST_SKIP() << "Debian's fortunes are not installed (launch/install-deps.sh brings them)";
  }
  expect_same_ids(tokenizer, fortunes, "fortunes");
}

INSTANTIATE_TEST_SUITE_P(ByteFallback, BpeEncoderTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "On" : "Off"; });

// A BPE model trained by spm_train with extra flags, for the settings prep's
// own training never uses.
std::string train_with_flags(const std::vector<std::string>& documents, const std::string& flags) {
  TempDir dir;
  std::string lines;
  for (const auto& doc : documents) lines += doc + "\n";
  write_text(dir / "corpus.txt", lines);
  const std::string command =
      "cd " + dir.str() +
      " && spm_train --input=corpus.txt --model_prefix=m "
      "--model_type=bpe --vocab_size=300 --hard_vocab_limit=false --minloglevel=2 " +
      flags + " > /dev/null 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return read_bytes(dir / "m.model");
}

TEST(BpeEncoder, UnusualModelSettingsMatchSpmEncode) {
  std::vector<std::string> training = generated_documents(300);
  training.push_back("  spaced   out\ttext  with ＦＵＬＬ width ");
  for (const std::string flags :
       {"--split_by_whitespace=false", "--user_defined_symbols='cat,<sep>,▁dog'",
        "--treat_whitespace_as_suffix=true", "--add_dummy_prefix=false",
        "--remove_extra_whitespaces=false", "--normalization_rule_name=identity",
        "--byte_fallback=true --split_by_whitespace=false"}) {
    const Tokenizer tokenizer(train_with_flags(training, flags), "m.model");
    std::vector<std::string> texts = generated_documents(300);
    const auto hard = adversarial_texts();
    texts.insert(texts.end(), hard.begin(), hard.end());
    texts.push_back("the cat<sep>sat catcat ▁dog dog");
    expect_same_ids(tokenizer, texts, flags);
  }
}

TEST(SpmModel, ReadsPiecesAndSettings) {
  TokenizerTrainOptions options;
  options.vocab_size = 300;
  options.byte_fallback = true;
  const SpmModel model = parse_spm_model(train_tokenizer(generated_documents(200), options), "m");
  ASSERT_EQ(model.pieces.size(), 300u);
  EXPECT_EQ(model.pieces[0].text, "<unk>");
  EXPECT_EQ(model.pieces[0].type, PieceType::kUnknown);
  EXPECT_EQ(model.pieces[2].text, "</s>");
  EXPECT_EQ(model.pieces[2].type, PieceType::kControl);
  EXPECT_EQ(model.pieces[3].text, "<0x00>");
  EXPECT_EQ(model.pieces[3].type, PieceType::kByte);
  EXPECT_EQ(model.model_type, 2);
  EXPECT_TRUE(model.byte_fallback);
  EXPECT_EQ(model.normalizer_name, "nmt_nfkc");
  EXPECT_FALSE(model.precompiled_charsmap.empty());
}

TEST(SpmModel, GarbageIsAnInputErrorNamingTheFile) {
  expect_input_error([] { parse_spm_model("\xFF\xFF\xFF", "bad.model"); }, "bad.model");
  expect_input_error([] { parse_spm_model("", "empty.model"); }, "empty.model");
  expect_input_error([] { Tokenizer("not a model at all", "x.model"); }, "x.model");
}

}  // namespace
}  // namespace moelab::testing
