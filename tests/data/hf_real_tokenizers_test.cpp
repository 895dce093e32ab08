// The tokenizer files models are published with (../shared/data/tokenizers,
// zstd-compressed; its README gives sources and hashes), each decompressed
// into a temporary folder: moelab's ids must equal the pinned `tokenizers`'
// (tiktoken's for the .tiktoken files) on the hard cases of Unicode text, on
// text around each kind of added token the file has, on every valid fortune
// and on the adversarial texts; with the post-processor template too; and
// decode must give what `tokenizers` decodes. One Python call per file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "common/shared_data.h"
#include "data/input_stream.h"
#include "data/tokenizer.h"
#include "data/utf8.h"
#include "data_test_util.h"
#include "tokenizer_texts.h"

namespace moelab::testing {
namespace {

using nlohmann::json;

struct RealFile {
  const char* name;
  const char* path;  // under <shared data>/tokenizers
  const char* eos_token;
  const char* tiktoken_pattern;
};

const RealFile kRealFiles[] = {
    {"gpt2", "gpt2/tokenizer.json.zst", "", ""},
    {"llama2", "llama2/tokenizer.json.zst", "", ""},
    {"mistral_v0_1", "mistral-7b-v0.1/tokenizer.json.zst", "", ""},
    {"llama3_1", "llama3.1-8b-instruct/tokenizer.json.zst", "", ""},
    {"qwen2_5", "qwen2.5/tokenizer.json.zst", "", ""},
    {"qwen3", "qwen3/tokenizer.json.zst", "", ""},
    {"olmo_olmoe", "olmo-gpt-neox-dolma-v1_5/tokenizer.json.zst", "", ""},
    {"olmo2", "olmo2-dolma2/tokenizer.json.zst", "", ""},
    {"deepseek_v3", "deepseek-v3/tokenizer.json.zst",
     "<\xEF\xBD\x9C"
     "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
     ""},
    {"phi3", "phi-3-mini/tokenizer.json.zst", "", ""},
    {"falcon", "falcon-7b/tokenizer.json.zst", "", ""},
    {"cl100k", "cl100k_base.tiktoken.zst", "<|endoftext|>", "cl100k"},
    {"o200k", "o200k_base.tiktoken.zst", "<|endoftext|>", "o200k"},
};

void PrintTo(const RealFile& file, std::ostream* out) {
  *out << file.name;
}

// Text around up to three added tokens of each kind (special or not,
// normalized or not, lstrip, rstrip, single_word) the file has.
std::vector<std::string> added_token_texts(const std::string& tokenizer_json) {
  std::map<std::tuple<bool, bool, bool, bool, bool>, int> taken;
  std::vector<std::string> texts;
  for (const json& token : json::parse(tokenizer_json).value("added_tokens", json::array())) {
    const auto kind = std::make_tuple(token["special"].get<bool>(), token["normalized"].get<bool>(),
                                      token["lstrip"].get<bool>(), token["rstrip"].get<bool>(),
                                      token["single_word"].get<bool>());
    if (++taken[kind] > 3) continue;
    const std::string t = token["content"];
    for (const std::string& text :
         {t, " " + t + " ", "  " + t + "  x", "a" + t + "b", "x " + t + "\n", t + " " + t,
          "\t" + t + "\n\ny", "word " + t + ".", t + t, "caf\xC3\xA9" + t + "\xE2\x80\x83z"}) {
      texts.push_back(text);
    }
  }
  return texts;
}

struct Documents {
  std::vector<std::string> texts;
  size_t hard = 0;  // the first `hard` are the hard cases and added-token texts
};

Documents documents_for(const std::string& tokenizer_json) {
  Documents docs;
  docs.texts = tokenizer_hard_case_texts();
  for (const std::string& text : added_token_texts(tokenizer_json)) docs.texts.push_back(text);
  docs.hard = docs.texts.size();
  const auto fortunes = fortune_documents();
  EXPECT_GT(fortunes.size(), 1000u) << "Debian's fortunes (launch/install-deps.sh) are missing";
  for (const std::string& doc : fortunes) {
    if (is_valid_utf8(doc)) docs.texts.push_back(doc);
  }
  for (const std::string& doc : tokenizer_adversarial_texts()) docs.texts.push_back(doc);
  return docs;
}

json reference_output(const std::string& file, const Documents& docs,
                      const std::string& tiktoken_pattern, const TempDir& dir) {
  write_text(dir / "docs.json", json(docs.texts).dump());
  std::string command = std::string(MOELAB_TORCH_PYTHON) + " " + MOELAB_SOURCE_DIR +
                        "/tests/reference/tokenizer_files_reference.py " + file + " " +
                        (dir / "docs.json") + " " + (dir / "reference.json") + " --template-docs " +
                        std::to_string(docs.hard);
  if (!tiktoken_pattern.empty()) command += " --tiktoken " + tiktoken_pattern;
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return json::parse(read_bytes(dir / "reference.json"));
}

// Documents whose ids differ from `expected` plus EOS; the first few are reported.
size_t count_different(const std::vector<std::vector<uint32_t>>& ours, const json& expected,
                       uint32_t eos, const std::vector<std::string>& docs,
                       const std::string& what) {
  size_t different = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    std::vector<uint32_t> theirs = expected[i].get<std::vector<uint32_t>>();
    theirs.push_back(eos);
    if (ours[i] != theirs && ++different <= 3) {
      ADD_FAILURE() << what << ": document " << i << " differs: '" << docs[i].substr(0, 80) << "' ("
                    << ours[i].size() << " vs " << theirs.size() << " ids)";
    }
  }
  return different;
}

class RealTokenizerFile : public ::testing::TestWithParam<RealFile> {};

TEST_P(RealTokenizerFile, SameIdsAndTextAsTheReference) {
  const RealFile& real = GetParam();
  TempDir dir;
  const std::string file = dir / std::filesystem::path(real.path).stem().string();
  ASSERT_NO_FATAL_FAILURE(decompress_shared_data(std::string("tokenizers/") + real.path, file));
  TokenizerSettings settings;
  settings.eos_token = real.eos_token;
  settings.tiktoken_pattern = real.tiktoken_pattern;
  const Tokenizer tokenizer = Tokenizer::from_file(file, settings);
  const bool is_json = tokenizer.kind() == TokenizerKind::kHfBpe;
  const Documents docs = documents_for(is_json ? read_bytes(file) : "{}");
  const json reference = reference_output(file, docs, real.tiktoken_pattern, dir);
  const auto ours = tokenizer.encode_documents(docs.texts);
  const uint32_t eos = uint32_t(tokenizer.eos_id());
  const size_t different = count_different(ours, reference["ids"], eos, docs.texts, real.name);
  EXPECT_EQ(different, 0u);
  std::cout << real.name << ": documents identical " << docs.texts.size() - different << " / "
            << docs.texts.size() << "\n";
  if (is_json) {  // the template's ids (Llama's BOS) around the hard cases
    const std::vector<std::string> hard(docs.texts.begin(), docs.texts.begin() + docs.hard);
    const Tokenizer with_template = tokenizer.with_special_tokens(true);
    EXPECT_EQ(count_different(with_template.encode_documents(hard), reference["template_ids"], eos,
                              hard, std::string(real.name) + " with its template"),
              0u);
  }
  size_t decoded_differently = 0, restored = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    const std::string decoded =
        tokenizer.decode(std::vector<int>(ours[i].begin(), ours[i].end() - 1));
    restored += decoded == docs.texts[i];
    if (decoded != reference["decoded"][i].get<std::string>() && ++decoded_differently <= 3) {
      ADD_FAILURE() << real.name << ": document " << i << " decodes to '" << decoded.substr(0, 80)
                    << "', the reference to '"
                    << reference["decoded"][i].get<std::string>().substr(0, 80) << "'";
    }
  }
  EXPECT_EQ(decoded_differently, 0u);
  std::cout << real.name << ": decoded as the reference " << ours.size() - decoded_differently
            << " / " << ours.size() << ", back to the text " << restored << "\n";
}

INSTANTIATE_TEST_SUITE_P(Published, RealTokenizerFile, ::testing::ValuesIn(kRealFiles),
                         [](const ::testing::TestParamInfo<RealFile>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace moelab::testing
