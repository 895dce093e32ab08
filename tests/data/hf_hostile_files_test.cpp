// tokenizer.json files made to break a reader: each is refused with an
// InputError naming the file and the field, before anything is sized by a
// number the file states (an id of 10^12 would otherwise end in
// std::bad_alloc), never a crash or a JSON library error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "data/byte_alphabet.h"
#include "data/tokenizer.h"
#include "data_test_util.h"

namespace moelab::testing {
namespace {

using nlohmann::json;

// A small valid byte-level file: the 256 byte tokens, "ab" from one merge,
// <|endoftext|> added.
json small_tokenizer() {
  json vocab = json::object();
  for (int byte = 0; byte < 256; ++byte) vocab[byte_alphabet_char(uint8_t(byte))] = byte;
  vocab["ab"] = 256;
  const json added = {
      {"id", 257},       {"content", "<|endoftext|>"}, {"single_word", false}, {"lstrip", false},
      {"rstrip", false}, {"normalized", false},        {"special", true}};
  return {{"version", "1.0"},
          {"added_tokens", {added}},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}}};
}

// Refused with a message naming the file and holding `needle`.
void expect_refused_text(const std::string& text, const std::string& needle) {
  TempDir dir;
  const std::string path = dir / "tokenizer.json";
  write_text(path, text);
  expect_input_error([&] { Tokenizer::from_file(path); }, path + ": ");
  expect_input_error([&] { Tokenizer::from_file(path); }, needle);
}

void expect_refused(const std::string& pointer, const json& value, const std::string& needle) {
  json changed = small_tokenizer();
  changed[json::json_pointer(pointer)] = value;
  expect_refused_text(changed.dump(), needle);
}

TEST(HfHostileFiles, TheSmallFileIsValid) {
  TempDir dir;
  write_text(dir / "tokenizer.json", small_tokenizer().dump());
  const Tokenizer tokenizer = Tokenizer::from_file(dir / "tokenizer.json");
  EXPECT_EQ(tokenizer.vocab_size(), 258);
  EXPECT_EQ(tokenizer.encode_documents({"abc<|endoftext|>"})[0],
            (std::vector<uint32_t>{256, 'c', 257, 257}));
}

TEST(HfHostileFiles, IdsOutOfRangeAreRefusedBeforeAnythingIsSizedByThem) {
  const std::string range = "is out of range: a file of 257 vocabulary entries and 1 added";
  expect_refused("/model/vocab/ab", 1000000000000ULL, "model.vocab.ab: 1000000000000 " + range);
  expect_refused("/added_tokens/0/id", 1000000000000ULL,
                 "added_tokens[0].id: 1000000000000 " + range);
  expect_refused("/model/vocab/ab", 258, "model.vocab.ab: 258 is out of range");
  expect_refused("/model/vocab/ab", -1, "model.vocab.ab: expected a non-negative integer, not -1");
  expect_refused("/model/vocab/ab", "7", "model.vocab.ab: expected a non-negative integer");
  expect_refused("/model/vocab/ab", 2.5, "model.vocab.ab: expected a non-negative integer");
  expect_refused("/post_processor",
                 {{"type", "TemplateProcessing"},
                  {"single",
                   {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                  {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {4000000000ULL}}}}}}},
                 "post_processor.special_tokens[\"<s>\"].ids[0]: 4000000000 is out of range");
}

TEST(HfHostileFiles, TwoTokensOnOneIdOrOneTokenTwiceAreRefused) {
  expect_refused("/model/vocab/ab", 97, "model.vocab.ab: 97 is also the id of \"a\"");
  json twice = small_tokenizer();
  twice["added_tokens"].push_back(twice["added_tokens"][0]);
  twice["added_tokens"][1]["id"] = 258;
  expect_refused_text(twice.dump(), "added_tokens[1].content: repeats added_tokens[0]");
  // tokenizers gives an added token outside the vocabulary the next free id.
  expect_refused("/added_tokens/0/id", 3,
                 "added_tokens[0].id: 3, but `tokenizers` numbers this token 257");
  expect_refused("/model/merges/1", "a b", "model.merges[1]: 'a b' repeats an earlier merge");
  expect_refused("/model/merges/1", "a zz", "names a token that is not in the vocabulary");
}

TEST(HfHostileFiles, WrongTypesAndMissingFieldsAreNamed) {
  expect_refused("/model/vocab", json::array(), "model.vocab: expected an object, not array");
  expect_refused("/model/merges", "a b", "model.merges: expected an array of merges");
  expect_refused("/model/merges/0", 5, "model.merges[0]: expected \"a b\" or [\"a\", \"b\"]");
  expect_refused("/added_tokens", json::object(), "added_tokens: expected an array, not object");
  expect_refused("/added_tokens/0/content", 5, "added_tokens[0].content: expected a string");
  expect_refused("/added_tokens/0/content", "", "added_tokens[0].content: is empty");
  expect_refused("/added_tokens/0/special", "yes",
                 "added_tokens[0].special: expected true or false");
  json no_flag = small_tokenizer();
  no_flag["added_tokens"][0].erase("normalized");
  expect_refused_text(no_flag.dump(), "added_tokens[0]: lacks \"normalized\"");
  expect_refused("/normalizer", {{"kind", "NFC"}}, "normalizer: has no \"type\"");
  expect_refused("/pre_tokenizer/add_prefix_space", 1,
                 "pre_tokenizer.add_prefix_space: expected true or false");
  expect_refused("/normalizer",
                 {{"type", "Replace"}, {"pattern", {{"Regex", "("}}}, {"content", ""}},
                 "normalizer.pattern: regex does not compile");
  expect_refused_text("{}", "the document: not a Hugging Face tokenizer.json");
}

TEST(HfHostileFiles, TruncatedNestedAndRepeatedKeyJsonAreRefused) {
  const std::string whole = small_tokenizer().dump();
  for (size_t cut : {size_t(1), whole.size() / 3, whole.size() - 1}) {
    expect_refused_text(whole.substr(0, cut), "not valid JSON");
  }
  expect_refused_text("{\"model\": " + std::string(100000, '[') + std::string(100000, ']') + "}",
                      "nested deeper than 32 levels");
  json deep = small_tokenizer();
  json nested = json::array();
  for (int i = 0; i < 40; ++i) nested = json::array({nested});
  deep["decoder"] = nested;
  expect_refused_text(deep.dump(), "decoder[0][0][0]");
  std::string repeated = whole;
  repeated.insert(repeated.find("\"ab\":256") + 1, "ab\":3,\"");
  expect_refused_text(repeated, "model.vocab: an object repeats a key");
}

}  // namespace
}  // namespace moelab::testing
