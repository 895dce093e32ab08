// tokenizer.json and tiktoken tokenizers against their reference libraries:
// tests/reference/tokenizer_reference.py trains a small byte-level BPE with
// `tokenizers`, writes it in the shapes real models ship (GPT-2, Llama 3,
// Llama 2 / Mistral, tiktoken) and encodes the same documents; moelab's ids
// must be identical on generated text, Debian's fortunes and adversarial text.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "data/dataset_info.h"
#include "data/dataset_inspect.h"
#include "data/tokenizer.h"
#include "data/utf8.h"
#include "data_test_util.h"
#include "tokenizer_texts.h"

namespace moelab::testing {
namespace {

using nlohmann::json;

std::vector<std::string> test_documents() {
  std::vector<std::string> docs;
  for (int i = 0; i < 300; ++i) docs.push_back(make_document(i));
  for (const std::string& doc : fortune_documents()) {
    if (is_valid_utf8(doc)) docs.push_back(doc);
  }
  for (const std::string& doc : tokenizer_adversarial_texts()) docs.push_back(doc);
  for (const std::string& doc : tokenizer_hard_case_texts()) docs.push_back(doc);
  // Around the added tokens of composite.json and characters.json, whose
  // options (lstrip, rstrip, single_word, normalized) decide where they match.
  for (const char* doc :
       {"HELLO world [MASK] x", "a  [MASK]  b", "[MASK]", " [MASK]x[MASK] ",
        "sword wor word wor. (wor)", "x<sep>  y <SEP> <sep>", "hello  Hello  ",
        "state-of-the-art 12345 3.14!! -x- --", " <mask> Hello <mask>x", "a\t\t  b   c",
        "Caf\xC3\xA9 CAFE\xCC\x81 \xEF\xAC\x81",
        "\xE6\x9C\xAC\xE6\x97\xA5\xE6\x9C\xAC x\xE6\x9C\xAC\xE6\x97\xA5\xE6\x97\xA5"
        "\xE6\x9C\xAC"
        "y"}) {
    docs.push_back(doc);
  }
  return docs;
}

void write_json(const std::string& path, const json& value) {
  write_text(path, value.dump());
}

// The reference files, each made once per test process when first asked for.
class Reference {
 public:
  Reference() : docs_(test_documents()) {
    std::vector<std::string> train;
    for (int i = 0; i < 300; ++i) train.push_back(make_document(i));
    const auto fortunes = fortune_documents();
    EXPECT_FALSE(fortunes.empty()) << "Debian's fortunes (launch/install-deps.sh) are missing";
    for (size_t i = 0; i < fortunes.size() && i < 1000; ++i) {
      if (is_valid_utf8(fortunes[i])) train.push_back(fortunes[i]);
    }
    for (const std::string& doc : tokenizer_adversarial_texts())
      train.push_back(doc.substr(0, 500));
    write_json(dir_ / "train.json", train);
    write_json(dir_ / "docs.json", docs_);
  }
  const std::vector<std::string>& docs() const { return docs_; }
  // `file` of the reference `name` (see tokenizer_reference.py).
  std::string path(const std::string& name, const std::string& file) {
    if (made_.insert(name).second) {
      const std::string command = std::string(MOELAB_TORCH_PYTHON) + " " + MOELAB_SOURCE_DIR +
                                  "/tests/reference/tokenizer_reference.py " + dir_.str() + " " +
                                  name;
      EXPECT_EQ(std::system(command.c_str()), 0) << command;
    }
    return dir_ / file;
  }
  std::vector<std::vector<uint32_t>> ids(const std::string& name, const std::string& kind = "ids") {
    return json::parse(read_bytes(path(name, name + "." + kind + ".json")))
        .get<std::vector<std::vector<uint32_t>>>();
  }

 private:
  TempDir dir_;
  std::vector<std::string> docs_;
  std::set<std::string> made_;
};

Reference& reference() {
  static Reference made;
  return made;
}

void expect_same_ids(const Tokenizer& tokenizer, const std::string& name) {
  Reference& ref = reference();
  const auto ours = tokenizer.encode_documents(ref.docs());
  const auto theirs = ref.ids(name);
  ASSERT_EQ(ours.size(), theirs.size()) << name;
  size_t mismatches = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    if (ours[i] != theirs[i] && ++mismatches <= 3) {
      ADD_FAILURE() << name << ": document " << i << " differs: '" << ref.docs()[i].substr(0, 80)
                    << "' (" << ours[i].size() << " vs " << theirs[i].size() << " ids)";
    }
  }
  EXPECT_EQ(mismatches, 0u) << name << " (" << ours.size() << " documents)";
}

Tokenizer hf_tokenizer(const std::string& name, const std::string& eos = "") {
  TokenizerSettings settings;
  settings.eos_token = eos;
  return Tokenizer::from_file(reference().path(name, name + ".json"), settings);
}

Tokenizer tiktoken_tokenizer(const std::string& pattern) {
  TokenizerSettings settings;
  settings.eos_token = "<|endoftext|>";
  settings.tiktoken_pattern = pattern;
  return Tokenizer::from_file(reference().path("tiktoken_" + pattern, "ranks.tiktoken"), settings);
}

class HfTokenizerIds : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTokenizerIds, SameIdsAsTokenizers) {
  const Tokenizer tokenizer = hf_tokenizer(GetParam());
  EXPECT_EQ(tokenizer.kind(), TokenizerKind::kHfBpe);
  expect_same_ids(tokenizer, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Files, HfTokenizerIds,
                         ::testing::Values("gpt2", "prefix", "llama3", "llama2", "metaspace",
                                           "composite", "characters"));

// The template "<bos> $A <|endoftext|>" ends with the EOS: documents get
// <bos> in front and keep one EOS, exactly `tokenizers`' ids with
// add_special_tokens=True.
TEST(HfTokenizer, TemplateTokensGoAroundDocumentsAsTokenizersPutsThem) {
  const Tokenizer plain = hf_tokenizer("composite");
  ASSERT_TRUE(plain.has_document_template());
  const Tokenizer with_template = plain.with_special_tokens(true);
  EXPECT_EQ(with_template.settings().add_special_tokens, std::optional<bool>(true));
  const auto ours = with_template.encode_documents(reference().docs());
  const auto theirs = reference().ids("composite", "template_ids");
  ASSERT_EQ(ours.size(), theirs.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < ours.size(); ++i) mismatches += ours[i] != theirs[i];
  EXPECT_EQ(mismatches, 0u) << "of " << ours.size();
  // Off, or a file without a template: the ids of add_special_tokens=False.
  EXPECT_EQ(plain.with_special_tokens(false).encode_documents(reference().docs()),
            reference().ids("composite"));
  EXPECT_FALSE(hf_tokenizer("llama3").has_document_template());
  EXPECT_EQ(hf_tokenizer("llama3").with_special_tokens(true).settings().add_special_tokens,
            std::nullopt);
}

class TiktokenIds : public ::testing::TestWithParam<std::string> {};

TEST_P(TiktokenIds, SameIdsAsTiktoken) {
  const Tokenizer tokenizer = tiktoken_tokenizer(GetParam());
  EXPECT_EQ(tokenizer.kind(), TokenizerKind::kTiktoken);
  expect_same_ids(tokenizer, "tiktoken_" + GetParam());
}

INSTANTIATE_TEST_SUITE_P(Patterns, TiktokenIds, ::testing::Values("gpt2", "cl100k", "o200k"));

TEST(HfTokenizer, EosIsTheFilesOwnOrTheOneGiven) {
  const json gpt2 = json::parse(read_bytes(reference().path("gpt2", "gpt2.json")));
  const json llama3 = json::parse(read_bytes(reference().path("llama3", "llama3.json")));
  EXPECT_EQ(hf_tokenizer("gpt2").eos_id(), gpt2["added_tokens"][0]["id"].get<int64_t>());
  EXPECT_EQ(hf_tokenizer("llama3").eos_id(), llama3["added_tokens"][1]["id"].get<int64_t>());
  EXPECT_EQ(hf_tokenizer("llama3", "<|begin_of_text|>").eos_id(),
            llama3["added_tokens"][0]["id"].get<int64_t>());
  expect_input_error([] { hf_tokenizer("llama3", "<|nope|>"); }, "<|nope|>");
  json no_eos = gpt2;
  no_eos["added_tokens"] = json::array();
  TempDir dir;
  write_text(dir / "tokenizer.json", no_eos.dump());
  expect_input_error([&] { Tokenizer::from_file(dir / "tokenizer.json"); }, "--eos-token");
}

// Whatever the file names and moelab does not implement is refused by name
// (the component and the field that holds it, in the file).
TEST(HfTokenizer, RefusesUnsupportedComponentsByName) {
  const json gpt2 = json::parse(read_bytes(reference().path("gpt2", "gpt2.json")));
  const json llama3 = json::parse(read_bytes(reference().path("llama3", "llama3.json")));
  const auto expect_refused_in = [&](const json& base, const std::string& pointer,
                                     const json& value, const std::string& name) {
    json changed = base;
    changed[json::json_pointer(pointer)] = value;
    TempDir dir;
    write_text(dir / "tokenizer.json", changed.dump());
    expect_input_error([&] { Tokenizer::from_file(dir / "tokenizer.json"); }, name);
    expect_input_error([&] { Tokenizer::from_file(dir / "tokenizer.json"); },
                       dir / "tokenizer.json");
  };
  const auto refused = [](const std::string& what, const std::string& at) {
    return what + " is not supported by moelab's tokenizer.json reader (at " + at + ";";
  };
  const auto expect_refused = [&](const std::string& pointer, const json& value,
                                  const std::string& name) {
    expect_refused_in(gpt2, pointer, value, name);
  };
  for (const char* type : {"BertNormalizer", "Precompiled", "StripAccents", "Nmt", "ByteLevel"}) {
    expect_refused("/normalizer", {{"type", type}},
                   refused("normalizer " + std::string(type), "normalizer"));
  }
  expect_refused("/normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Nmt"}}}}},
                 refused("normalizer Nmt", "normalizer.normalizers[0]"));
  for (const char* type : {"BertPreTokenizer", "UnicodeScripts", "CharDelimiterSplit"}) {
    expect_refused("/pre_tokenizer", {{"type", type}},
                   refused("pre-tokenizer " + std::string(type), "pre_tokenizer"));
  }
  const json metaspace = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}};
  expect_refused(
      "/pre_tokenizer",
      {{"type", "Sequence"}, {"pretokenizers", {gpt2["pre_tokenizer"], metaspace}}},
      refused("pre-tokenizer Metaspace after ByteLevel", "pre_tokenizer.pretokenizers[1]"));
  expect_refused(
      "/pre_tokenizer",
      {{"type", "Sequence"}, {"pretokenizers", {metaspace, gpt2["pre_tokenizer"]}}},
      refused("pre-tokenizer ByteLevel after Metaspace", "pre_tokenizer.pretokenizers[1]"));
  expect_refused("/pre_tokenizer",
                 {{"type", "Split"},
                  {"pattern", {{"Regex", "x"}}},
                  {"behavior", "Sideways"},
                  {"invert", false}},
                 "pre_tokenizer.behavior: expected Removed, Isolated");
  for (const char* type : {"WordPiece", "Unigram", "WordLevel"}) {
    expect_refused("/model/type", type, refused("model " + std::string(type), "model"));
  }
  expect_refused("/model/dropout", 0.1, refused("BPE dropout", "model.dropout"));
  expect_refused("/model/continuing_subword_prefix", "##",
                 refused("BPE continuing_subword_prefix", "model.continuing_subword_prefix"));
  expect_refused("/model/end_of_word_suffix", "</w>",
                 refused("BPE end_of_word_suffix", "model.end_of_word_suffix"));
  expect_refused("/decoder", {{"type", "BPEDecoder"}, {"suffix", "</w>"}},
                 refused("decoder BPEDecoder", "decoder"));
  expect_refused("/decoder", {{"type", "Replace"}, {"pattern", {{"Regex", "x"}}}, {"content", "y"}},
                 refused("decoder Replace of a regex or \"\"", "decoder"));
  expect_refused("/post_processor", {{"type", "RobertaProcessing"}},
                 refused("post-processor RobertaProcessing", "post_processor"));
  expect_refused("/post_processor", {{"type", "BertProcessing"}},
                 refused("post-processor BertProcessing", "post_processor"));
  for (const char* type : {"WordPiece", "CTC"}) {
    expect_refused("/decoder", {{"type", type}},
                   refused("decoder " + std::string(type), "decoder"));
  }
  expect_refused("/truncation", {{"max_length", 512}},
                 refused("truncation (moelab encodes whole documents)", "truncation"));
  expect_refused("/padding", {{"strategy", "BatchLongest"}},
                 refused("padding (moelab encodes whole documents)", "padding"));
  json first = llama3;
  first["normalizer"] = {{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}};
  expect_refused_in(
      first, "/pre_tokenizer",
      {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"}},
      refused("Metaspace prepend_scheme \"first\" after a Strip or Replace normalizer",
              "pre_tokenizer"));
}

// SentencePiece-style files cannot give back a "▁" of the text (it decodes
// as a space) nor the text around a special token (each segment after one
// gets its own "▁" prefix, as in `tokenizers`), so those documents are left out there.
bool sentencepiece_can_restore(const std::string& doc) {
  return doc.find("\xE2\x96\x81") == std::string::npos && doc.find('<') == std::string::npos;
}

void expect_decodes_to_documents(const Tokenizer& tokenizer, bool sentencepiece_style) {
  const Reference& ref = reference();
  const auto encoded = tokenizer.encode_documents(ref.docs());
  size_t mismatches = 0, checked = 0;
  for (size_t i = 0; i < encoded.size(); ++i) {
    if (sentencepiece_style && !sentencepiece_can_restore(ref.docs()[i])) continue;
    ++checked;
    const std::vector<int> ids(encoded[i].begin(), encoded[i].end() - 1);
    if (tokenizer.decode(ids) != ref.docs()[i] && ++mismatches <= 3) {
      ADD_FAILURE() << tokenizer_kind_name(tokenizer.kind()) << ": document " << i
                    << " does not decode to itself: '" << ref.docs()[i].substr(0, 80) << "'";
    }
  }
  EXPECT_GT(checked, ref.docs().size() / 2);
  EXPECT_EQ(mismatches, 0u);
}

TEST(HfTokenizer, DecodesWhatItEncodes) {
  expect_decodes_to_documents(hf_tokenizer("gpt2"), false);
  expect_decodes_to_documents(hf_tokenizer("llama3"), false);
  expect_decodes_to_documents(tiktoken_tokenizer("cl100k"), false);
  // Byte fallback pieces (<0xNN>) and "▁" become bytes and spaces again.
  expect_decodes_to_documents(hf_tokenizer("llama2"), true);
}

TEST(HfTokenizer, RefusesInvalidUtf8WithItsOffset) {
  for (const Tokenizer& tokenizer : {hf_tokenizer("gpt2"), tiktoken_tokenizer("cl100k")}) {
    expect_input_error(
        [&] {
          tokenizer.encode_documents({"fine", "bad \xFF byte"});
        },
        "not valid UTF-8 at byte 4");
  }
}

TEST(Tiktoken, RefusesMissingSettingsAndBadLines) {
  const std::string path = reference().path("tiktoken_cl100k", "ranks.tiktoken");
  TokenizerSettings no_pattern;
  no_pattern.eos_token = "<|endoftext|>";
  expect_input_error([&] { Tokenizer::from_file(path, no_pattern); }, "--tiktoken-pattern");
  TokenizerSettings no_eos;
  no_eos.tiktoken_pattern = "cl100k";
  expect_input_error([&] { Tokenizer::from_file(path, no_eos); }, "--eos-token");
  TempDir dir;
  write_text(dir / "bad.tiktoken", "IQ== 0\nnot-base64! 1\n");
  TokenizerSettings settings;
  settings.eos_token = "<|endoftext|>";
  settings.tiktoken_pattern = "cl100k";
  expect_input_error([&] { Tokenizer::from_file(dir / "bad.tiktoken", settings); },
                     "bad.tiktoken:2");
}

// prep with a tokenizer.json: the dataset records the file and its kind, and
// whatever reads the dataset gets the same tokenizer back.
TEST(HfTokenizer, PrepRecordsTheFileAndItsKind) {
  TempDir dir;
  write_text(dir / "corpus.txt", make_text_corpus(0, 40));
  PrepOptions options = small_prep_options({dir / "corpus.txt"}, dir / "out");
  options.tokenizer_model = reference().path("llama3", "llama3.json");
  const PrepSummary summary = run_prep(options);
  const Tokenizer original = hf_tokenizer("llama3");
  EXPECT_EQ(summary.tokenizer_checksum, original.checksum());
  EXPECT_EQ(summary.vocab_size, original.vocab_size());
  const Tokenizer recorded = Tokenizer::from_dataset(dir / "out");
  EXPECT_EQ(recorded.kind(), TokenizerKind::kHfBpe);
  EXPECT_EQ(recorded.file_bytes(), read_bytes(reference().path("llama3", "llama3.json")));
  const DatasetInfo info = read_dataset_info(dir / "out", "train");
  EXPECT_EQ(info.eos_id, original.eos_id());
  EXPECT_NE(inspect_dataset(dir / "out").find(make_document(0)), std::string::npos);
  // A tokenizer file that does not match the shards is caught.
  write_text(dir / "out/tokenizer.json", read_bytes(reference().path("gpt2", "gpt2.json")));
  expect_input_error([&] { read_dataset_info(dir / "out", "train"); }, "checksum");
}

// prep puts the template's tokens (composite.json: <bos> ... <|endoftext|>)
// around each document unless told not to, and the dataset records which, so
// whatever reads its tokenizer back encodes the same way.
TEST(HfTokenizer, PrepAppliesTheTemplateUnlessNoBosAndRecordsIt) {
  TempDir dir;
  write_text(dir / "corpus.txt", make_text_corpus(0, 20));
  const Tokenizer plain = hf_tokenizer("composite");
  const json file = json::parse(plain.file_bytes());
  const int64_t bos = file["post_processor"]["special_tokens"]["<bos>"]["ids"][0];
  std::map<bool, std::string> checksums;
  for (bool add : {true, false}) {
    const std::string out = dir / (add ? "with" : "without");
    PrepOptions options = small_prep_options({dir / "corpus.txt"}, out);
    options.tokenizer_model = reference().path("composite", "composite.json");
    options.add_special_tokens = add;
    checksums[add] = run_prep(options).tokenizer_checksum;
    const auto docs = split_documents(out, "train");
    ASSERT_EQ(docs.size(), 20u);
    for (const auto& doc : docs) {
      EXPECT_EQ(doc.front() == bos, add);
      EXPECT_EQ(doc.back(), plain.eos_id());
      EXPECT_NE(doc[doc.size() - 2], plain.eos_id());  // the template's EOS is the one EOS
    }
    const json settings = json::parse(read_bytes(out + "/tokenizer_settings.json"));
    EXPECT_EQ(settings["add_special_tokens"], add);
    const Tokenizer recorded = Tokenizer::from_dataset(out);
    EXPECT_EQ(recorded.settings().add_special_tokens, std::optional<bool>(add));
    const std::vector<int64_t> first = docs[0];
    const auto again = recorded.encode_documents({make_document(0)})[0];
    EXPECT_EQ(std::vector<int64_t>(again.begin(), again.end()), first);
    EXPECT_EQ(json::parse(read_bytes(out + "/prep.json")).contains("no_bos"), !add);
  }
  EXPECT_NE(checksums[true], checksums[false]);
}

// Files without a template keep the settings record (and so the checksums)
// datasets had before templates were read; a dataset whose record has no
// add_special_tokens is read without the template.
TEST(HfTokenizer, SettingsRecordMentionsTemplatesOnlyForFilesWithOne) {
  TempDir dir;
  write_text(dir / "corpus.txt", make_text_corpus(0, 5));
  PrepOptions options = small_prep_options({dir / "corpus.txt"}, dir / "out");
  options.tokenizer_model = reference().path("llama3", "llama3.json");
  run_prep(options);
  EXPECT_EQ(
      read_bytes(dir / "out/tokenizer_settings.json"),
      json({{"kind", "tokenizer.json"}, {"eos_token", ""}, {"tiktoken_pattern", ""}}).dump(2) +
          "\n");
  write_text(dir / "old/tokenizer.json", hf_tokenizer("composite").file_bytes());
  write_text(
      dir / "old/tokenizer_settings.json",
      json({{"kind", "tokenizer.json"}, {"eos_token", ""}, {"tiktoken_pattern", ""}}).dump());
  const Tokenizer old = Tokenizer::from_dataset(dir / "old");
  EXPECT_EQ(old.settings().add_special_tokens, std::nullopt);
  EXPECT_EQ(old.encode_documents({"x"}), hf_tokenizer("composite").encode_documents({"x"}));
}

}  // namespace
}  // namespace moelab::testing
