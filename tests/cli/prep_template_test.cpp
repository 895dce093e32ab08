// `moelab prep --tokenizer` with a tokenizer.json whose template puts a BOS
// before each sequence: prep adds it by default, `--no-bos` leaves it out,
// and tokenizer_settings.json says which.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/run_moelab.h"
#include "data/byte_alphabet.h"

namespace {

using nlohmann::json;

// Byte-level: the 256 byte tokens, <s> and </s> added, template "<s> $A".
json template_tokenizer() {
  json vocab = json::object();
  for (int byte = 0; byte < 256; ++byte) vocab[moelab::byte_alphabet_char(uint8_t(byte))] = byte;
  json added = json::array();
  for (const char* token : {"<s>", "</s>"}) {
    added.push_back({{"id", 256 + added.size()},
                     {"content", token},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  const json single = {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                       {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}};
  return {{"added_tokens", added},
          {"pre_tokenizer",
           {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", single},
            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {256}}}}}}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(CliPrep, TemplateBosByDefaultAndNotWithNoBos) {
  const std::string dir = testing::TempDir() + "/prep_template";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json") << template_tokenizer().dump();
  std::ofstream(dir + "/corpus.txt") << "one\n<|endoftext|>\ntwo\n<|endoftext|>\n";
  for (const std::string flag : {"", "--no-bos"}) {
    const std::string out = dir + "/out" + flag;
    const moelab::testing::MoelabResult r =
        moelab::testing::moelab("prep --input " + dir + "/corpus.txt --tokenizer " + dir +
                                "/tokenizer.json " + flag + " --out " + out);
    ASSERT_EQ(r.code, 0) << r.output;
    const json settings = json::parse(read(out + "/tokenizer_settings.json"));
    EXPECT_EQ(settings["add_special_tokens"], flag.empty()) << flag;
    const std::string inspected = moelab::testing::moelab("prep --inspect " + out).output;
    EXPECT_EQ(inspected.find("<s>") != std::string::npos, flag.empty()) << inspected;
  }
}

}  // namespace
