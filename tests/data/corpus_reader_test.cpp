#include "data/corpus_reader.h"

#include <zlib.h>

#include "data/utf8.h"
#include "data_test_util.h"

namespace moelab {
namespace {

using testing::expect_input_error;
using testing::TempDir;
using testing::write_text;

std::vector<std::string> texts_of(const std::vector<std::string>& files,
                                  const CorpusOptions& options) {
  RawDocumentReader reader(files, options);
  RawDocument doc;
  std::vector<std::string> texts;
  while (reader.next(&doc)) {
    auto text = document_text(doc, options);
    if (text) texts.push_back(*text);
  }
  return texts;
}

void write_gzip(const std::string& path, const std::string& contents) {
  gzFile file = gzopen(path.c_str(), "wb");
  gzwrite(file, contents.data(), static_cast<unsigned>(contents.size()));
  gzclose(file);
}

TEST(Utf8, AcceptsValidAndRejectsInvalid) {
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  size_t offset = 0;
  EXPECT_FALSE(is_valid_utf8("ab\xFF", &offset));
  EXPECT_EQ(offset, 2u);
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));            // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));        // surrogate
  EXPECT_FALSE(is_valid_utf8("x\xE2\x82", &offset));  // truncated sequence
  EXPECT_EQ(offset, 1u);
}

TEST(CorpusReader, SplitsOnSeparatorLines) {
  TempDir dir;
  write_text(dir / "a.txt",
             "first line\nsecond line\n<|endoftext|>\n\n<|endoftext|>\nthird\r\n"
             "<|endoftext|>  \nlast without separator\n");
  const auto texts = texts_of({dir / "a.txt"}, CorpusOptions{});
  EXPECT_EQ(texts, (std::vector<std::string>{"first line\nsecond line", "third",
                                             "last without separator"}));
}

TEST(CorpusReader, FortuneStyleAndBlankLineSeparators) {
  TempDir dir;
  write_text(dir / "fortunes", "A fortune.\n%\nAnother\n  one.\n%\n");
  CorpusOptions percent;
  percent.separator = "%";
  EXPECT_EQ(texts_of({dir / "fortunes"}, percent),
            (std::vector<std::string>{"A fortune.", "Another\n  one."}));

  write_text(dir / "paragraphs", "para one\ncontinues\n\n\n  \npara two\n");
  CorpusOptions blank;
  blank.blank_line_separator = true;
  EXPECT_EQ(texts_of({dir / "paragraphs"}, blank),
            (std::vector<std::string>{"para one\ncontinues", "para two"}));
}

TEST(CorpusReader, JsonLinesWithFieldAndGzip) {
  TempDir dir;
  const std::string lines = "{\"body\": \"caf\\u00e9 one\", \"id\": 1}\n\n{\"body\": \"two\"}\n";
  write_gzip(dir / "docs.jsonl.gz", lines);
  CorpusOptions options;
  options.format = CorpusFormat::kJsonl;
  options.text_field = "body";
  EXPECT_EQ(texts_of({dir / "docs.jsonl.gz"}, options),
            (std::vector<std::string>{"caf\xC3\xA9 one", "two"}));

  write_gzip(dir / "text.gz", "gz doc\n<|endoftext|>\n");
  EXPECT_EQ(texts_of({dir / "text.gz"}, CorpusOptions{}), (std::vector<std::string>{"gz doc"}));
}

TEST(CorpusReader, BadJsonFailsWithFileAndLineOrIsSkipped) {
  TempDir dir;
  const std::string path = dir / "bad.jsonl";
  write_text(path, "{\"text\": \"ok\"}\n{\"text\": broken\n{\"other\": 1}\n{\"text\": \"fine\"}\n");
  CorpusOptions options;
  options.format = CorpusFormat::kJsonl;
  expect_input_error([&] { texts_of({path}, options); }, path + ":2: invalid JSON");
  options.on_bad_json = BadJsonPolicy::kSkip;
  EXPECT_EQ(texts_of({path}, options), (std::vector<std::string>{"ok", "fine"}));

  write_text(path, "{\"text\": \"ok\"}\n{\"other\": 1}\n");
  options.on_bad_json = BadJsonPolicy::kFail;
  expect_input_error([&] { texts_of({path}, options); }, path + ":2: no string field \"text\"");
}

TEST(CorpusReader, NonUtf8TextNamesFileAndLine) {
  TempDir dir;
  const std::string path = dir / "latin1.txt";
  write_text(path, "good\n<|endoftext|>\nna\xEFve caf\xE9\n");
  expect_input_error([&] { texts_of({path}, CorpusOptions{}); }, path + ":3: not valid UTF-8");
}

TEST(CorpusReader, TruncatedGzipIsAnError) {
  TempDir dir;
  write_gzip(dir / "full.gz", testing::make_text_corpus(0, 200));
  const std::string bytes = testing::read_bytes(dir / "full.gz");
  const std::string path = dir / "cut.gz";
  write_text(path, bytes.substr(0, bytes.size() / 2));
  expect_input_error([&] { texts_of({path}, CorpusOptions{}); }, path);
}

TEST(ExpandInputs, FilesFoldersGlobsAndExcludes) {
  TempDir dir;
  write_text(dir / "corpus/b.txt", "b");
  write_text(dir / "corpus/a.txt", "a");
  write_text(dir / "corpus/a.dat", "binary");
  write_text(dir / "corpus/sub/c.txt", "c");
  EXPECT_EQ(expand_inputs({dir / "corpus"}, {"*.dat"}),
            (std::vector<std::string>{dir / "corpus/a.txt", dir / "corpus/b.txt",
                                      dir / "corpus/sub/c.txt"}));
  EXPECT_EQ(expand_inputs({dir / "corpus/*.txt"}, {}),
            (std::vector<std::string>{dir / "corpus/a.txt", dir / "corpus/b.txt"}));
  EXPECT_EQ(expand_inputs({dir / "corpus/b.txt"}, {}),
            (std::vector<std::string>{dir / "corpus/b.txt"}));
}

TEST(ExpandInputs, MissingAndEmptyInputsAreErrors) {
  TempDir dir;
  expect_input_error([&] { expand_inputs({dir / "nope.txt"}, {}); }, dir / "nope.txt");
  expect_input_error([&] { expand_inputs({dir / "*.none"}, {}); }, dir / "*.none");
  write_text(dir / "empty.txt", "");
  expect_input_error([&] { expand_inputs({dir / "empty.txt"}, {}); }, dir / "empty.txt");
  expect_input_error([&] { expand_inputs({}, {}); }, "no input");
}

}  // namespace
}  // namespace moelab
