// Each tokenizer.json normalizer and pre-tokenizer moelab reads against the
// pinned `tokenizers` (tests/reference/tokenizer_components_reference.py):
// the same normalised text and the same pieces, on every code point and on
// texts chosen for each behaviour. All cases go to Python in one call.
#include <gtest/gtest.h>

#include <unicode/uchar.h>

#include <nlohmann/json.hpp>

#include "data/byte_alphabet.h"
#include "data/hf_normalizer.h"
#include "data/hf_pre_tokenizer.h"
#include "data/utf8.h"
#include "data_test_util.h"

namespace moelab::testing {
namespace {

using nlohmann::json;

bool assigned_in_icu(char32_t c) {
  UVersionInfo age;
  u_charAge(UChar32(c), age);
  return age[0] != 0;
}

// Each code point `keep` takes, between `before` and `after` (not the
// surrogates, nor the newline some texts use as a separator).
std::string code_points(bool (*keep)(char32_t), const char* before, const char* after) {
  std::string text;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if ((c >= 0xD800 && c < 0xE000) || c == '\n' || !keep(c)) continue;
    text += before;
    append_utf8(c, text);
    text += after;
  }
  return text;
}

// Every combining mark beside marks of other classes, in both orders, and
// after a letter it may compose with.
std::string combining_sequences() {
  std::string text;
  for (char32_t mark = 0x300; mark < 0x110000; ++mark) {
    if ((mark >= 0xD800 && mark < 0xE000) || u_getCombiningClass(UChar32(mark)) == 0) continue;
    for (const char* other : {"\xCC\x96", "\xCC\xB4", "\xCC\x81", "\xD6\xB0"}) {
      for (const char* base : {"a", "e"}) {
        text += base;
        append_utf8(mark, text);
        text += other;
        text += '\n';
        text += base;
        text += other;
        append_utf8(mark, text);
        text += '\n';
      }
    }
  }
  return text;
}

// Assigned code points other than the ideographs and syllables that make up
// most of them (every one a letter).
bool class_candidate(char32_t c) {
  return c > 0 && assigned_in_icu(c) && !u_hasBinaryProperty(UChar32(c), UCHAR_IDEOGRAPHIC) &&
         !(c >= 0xAC00 && c <= 0xD7A3);
}

json split(const char* pattern_kind, const char* pattern, const char* behavior, bool invert) {
  return {{"type", "Split"},
          {"pattern", {{pattern_kind, pattern}}},
          {"behavior", behavior},
          {"invert", invert}};
}

json byte_level(bool prefix, bool regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", prefix},
          {"trim_offsets", true},
          {"use_regex", regex}};
}

const std::vector<std::string> kSplitTexts = {
    "the-final--countdown", "--a--b-", "-", "a", "x--", "a - b -- c", "\xC3\xA9-\xE2\x80\x94-z"};
const std::vector<std::string> kSpaceTexts = {" hello world",
                                              "hello  world ",
                                              "\xE2\x96\x81x y",
                                              "a",
                                              "  ",
                                              "a\tb\nc  d",
                                              "l\xC3\xA9gume \xF0\x9F\x98\x80 x",
                                              "12 345 6789 \xD9\xA1\xD9\xA2"};

json normalizer_cases() {
  json cases = json::array();
  const auto add = [&](json normalizer, std::vector<std::string> texts) {
    cases.push_back({{"normalizer", normalizer}, {"texts", texts}});
  };
  // Joined by "\n", a starter, so no two of them combine.
  const std::string everything = code_points([](char32_t) { return true; }, "", "\n");
  const std::string marks = combining_sequences();
  for (const char* form : {"NFC", "NFD", "NFKC", "NFKD"})
    add({{"type", form}}, {everything, marks});
  add({{"type", "Lowercase"}},
      {code_points(assigned_in_icu, "", "\n"), "\xC4\xB0I\xCE\xA3\xCE\xA3 ABC"});
  std::string spaces;
  for (char32_t c : {0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x85, 0xA0, 0x1680, 0x2000, 0x200A, 0x2028,
                     0x2029, 0x202F, 0x205F, 0x3000, 0x200B, 0xFEFF}) {
    append_utf8(c, spaces);
  }
  const std::vector<std::string> padded = {spaces + "x y" + spaces, "x", "", spaces};
  for (bool left : {false, true}) {
    for (bool right : {false, true}) {
      add({{"type", "Strip"}, {"strip_left", left}, {"strip_right", right}}, padded);
    }
  }
  const std::vector<std::string> replace_texts = {"a  b\t\tc ", "aaab", "", "abab a b", "x"};
  for (const json& pattern :
       {json{{"Regex", "\\s+"}}, json{{"Regex", "a*"}}, json{{"String", "ab"}},
        json{{"String", ""}}, json{{"String", " "}}}) {
    add({{"type", "Replace"}, {"pattern", pattern}, {"content", "\xE2\x96\x81"}}, replace_texts);
  }
  add({{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}, {"", "x", " y"});
  add({{"type", "Sequence"}, {"normalizers", json::array()}}, {"Caf\xC3\xA9 X"});
  add({{"type", "Sequence"},
       {"normalizers",
        {{{"type", "NFKD"}},
         {{"type", "Lowercase"}},
         {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}},
         {{"type", "Replace"}, {"pattern", {{"Regex", "[0-9]+"}}}, {"content", "#"}},
         {{"type", "Prepend"}, {"prepend", "^"}}}}},
      {"  \xEF\xAC\x81NAL 123 Caf\xC3\x89\xE2\x91\xA0  ", "", " "});
  return cases;
}

json pre_tokenizer_cases() {
  json cases = json::array();
  const auto add = [&](json pre_tokenizer, std::vector<std::string> texts) {
    cases.push_back({{"pre_tokenizer", pre_tokenizer}, {"texts", texts}});
  };
  const std::string classes = code_points(class_candidate, "x", "");
  for (const char* behavior :
       {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"}) {
    add({{"type", "Punctuation"}, {"behavior", behavior}}, {classes, "a.,b!!c?"});
    for (bool invert : {false, true}) {
      for (const auto& [kind, pattern] : std::vector<std::pair<const char*, const char*>>{
               {"String", "-"}, {"Regex", "-+"}, {"Regex", "-*"}, {"Regex", "\\s+"}}) {
        add(split(kind, pattern, behavior, invert), kSplitTexts);
      }
    }
  }
  for (bool individual : {false, true}) {
    add({{"type", "Digits"}, {"individual_digits", individual}},
        {classes, "a123b4\xD9\xA1\xD9\xA2"});
  }
  add({{"type", "Whitespace"}}, {classes, "Hey, you!  it's\t\xC3\xA9t\xC3\xA9 ..."});
  add({{"type", "WhitespaceSplit"}}, {classes, " a  b\tc\n"});
  for (const char* scheme : {"always", "first", "never"}) {
    for (bool split_words : {false, true}) {
      add({{"type", "Metaspace"},
           {"replacement", "\xE2\x96\x81"},
           {"prepend_scheme", scheme},
           {"split", split_words}},
          kSpaceTexts);
    }
  }
  for (bool prefix : {false, true}) {
    for (bool regex : {false, true}) add(byte_level(prefix, regex), kSpaceTexts);
  }
  // ByteLevel's prefix goes in front of every piece of the step before it.
  add({{"type", "Sequence"},
       {"pretokenizers", {split("Regex", "\\s+", "Removed", false), byte_level(true, false)}}},
      kSpaceTexts);
  // Steps after ByteLevel see the byte alphabet ("\xC3\xB2" is \u00C3\u00B2 there, a digit).
  add({{"type", "Sequence"},
       {"pretokenizers",
        {{{"type", "Punctuation"}, {"behavior", "Contiguous"}},
         byte_level(false, true),
         {{"type", "Digits"}, {"individual_digits", false}},
         split("Regex", "[0-9][0-9][0-9]", "Isolated", false)}}},
      {"1234567 \xC3\xB2\xC2\xB2 x,y!! 12.5% \xD9\xA1\xD9\xA2\xD9\xA3", "caf\xC3\xA9 1\xC2\xB9"});
  return cases;
}

json run_reference(const json& cases) {
  TempDir dir;
  write_text(dir / "cases.json", cases.dump());
  const std::string command = std::string(MOELAB_TORCH_PYTHON) + " " + MOELAB_SOURCE_DIR +
                              "/tests/reference/tokenizer_components_reference.py " +
                              (dir / "cases.json") + " " + (dir / "out.json");
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return json::parse(read_bytes(dir / "out.json"));
}

std::vector<std::string> our_pieces(const HfPreTokenizer& pre, const ScratchLayout& layout,
                                    const std::string& text) {
  TextScratch scratch = layout.make();
  std::vector<std::string> pieces;
  pre.run(text, true, scratch, [&](std::string_view word) {
    std::string piece;
    if (pre.byte_level() && !pre.words_in_byte_alphabet()) {
      append_in_byte_alphabet(word, piece);  // `tokenizers` shows them in the alphabet
    } else {
      piece.assign(word);
    }
    pieces.push_back(piece);
  });
  return pieces;
}

// The first line where two normalised texts differ, for the message.
std::string first_difference(const std::string& ours, const std::string& theirs) {
  size_t at = 0;
  while (at < ours.size() && at < theirs.size() && ours[at] == theirs[at]) ++at;
  const size_t line = ours.rfind('\n', at == 0 ? 0 : at - 1);
  const size_t begin = line == std::string::npos ? 0 : line + 1;
  return "ours '" + ours.substr(begin, 24) + "' theirs '" + theirs.substr(begin, 24) + "'";
}

std::string normalized_by_line(const HfNormalizer& normalizer, const std::string& text,
                               TextScratch& scratch) {
  std::string normalized;
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    normalized += normalizer.apply(std::string_view(text).substr(begin, end - begin), scratch);
    if (end < text.size()) normalized += '\n';
    begin = end + 1;
  }
  return normalized;
}

TEST(HfTokenizerUnicode, NormalizersMatchTokenizersOnEveryCodePoint) {
  const json cases = normalizer_cases();
  const json expected = run_reference(cases);
  const std::string origin = "test";
  for (size_t c = 0; c < cases.size(); ++c) {
    ScratchLayout layout;
    const HfNormalizer normalizer(JsonNode(cases[c]["normalizer"], "normalizer", origin), layout);
    TextScratch scratch = layout.make();
    for (size_t t = 0; t < cases[c]["texts"].size(); ++t) {
      const std::string text = cases[c]["texts"][t].get<std::string>();
      const std::string theirs = expected[c][t].get<std::string>();
      std::string ours(normalizer.apply(text, scratch));
      EXPECT_TRUE(ours == theirs) << cases[c]["normalizer"].dump() << " text " << t << ": "
                                  << first_difference(ours, theirs);
      // The forms line by line too: most lines are already in the form,
      // which takes the quick check's way.
      if (cases[c]["normalizer"]["type"].get<std::string>().rfind("NF", 0) != 0) continue;
      ours = normalized_by_line(normalizer, text, scratch);
      EXPECT_TRUE(ours == theirs) << cases[c]["normalizer"].dump() << " text " << t
                                  << " line by line: " << first_difference(ours, theirs);
    }
  }
}

TEST(HfTokenizerUnicode, PreTokenizersCutLikeTokenizers) {
  const json cases = pre_tokenizer_cases();
  const json expected = run_reference(cases);
  const std::string origin = "test";
  for (size_t c = 0; c < cases.size(); ++c) {
    ScratchLayout layout;
    const HfPreTokenizer pre(JsonNode(cases[c]["pre_tokenizer"], "pre_tokenizer", origin), layout);
    for (size_t t = 0; t < cases[c]["texts"].size(); ++t) {
      const auto ours = our_pieces(pre, layout, cases[c]["texts"][t].get<std::string>());
      const auto theirs = expected[c][t].get<std::vector<std::string>>();
      size_t same = 0;
      while (same < ours.size() && same < theirs.size() && ours[same] == theirs[same]) ++same;
      EXPECT_TRUE(ours.size() == theirs.size() && same == ours.size())
          << cases[c]["pre_tokenizer"].dump() << " text " << t << ": " << ours.size() << " vs "
          << theirs.size() << " pieces, first difference at piece " << same << ": '"
          << (same < ours.size() ? ours[same] : "") << "' vs '"
          << (same < theirs.size() ? theirs[same] : "") << "'";
    }
  }
}

}  // namespace
}  // namespace moelab::testing
