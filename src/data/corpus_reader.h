// Reading corpora: plain text with a document separator line (or blank lines),
// JSON Lines with a text field (either may be gzip- or zstd-compressed, detected
// from the content: see data/input_stream.h), or a Parquet string column.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moelab {

// kMegatron and kNpy are token arrays, imported without a tokenizer
// (data/token_import.h); the others are text.
enum class CorpusFormat { kText, kJsonl, kParquet, kMegatron, kNpy };
enum class BadJsonPolicy { kSkip, kFail };

// InputError listing the choices for an unknown name.
CorpusFormat parse_corpus_format(const std::string& name);
std::string corpus_format_name(CorpusFormat format);
bool is_pretokenized(CorpusFormat format);

struct CorpusOptions {
  CorpusFormat format = CorpusFormat::kText;
  std::string separator = "<|endoftext|>";  // a line equal to this ends a text document
  bool blank_line_separator = false;        // blank lines end text documents instead
  std::string text_field = "text";          // JSONL field or Parquet column holding the document
  BadJsonPolicy on_bad_json = BadJsonPolicy::kFail;
};

// Expands each input (a file, a directory searched recursively, or a glob
// pattern) into a sorted list of regular files, dropping names whose file name
// matches one of the `excludes` glob patterns. InputError naming the input when
// one is missing, matches nothing or is an empty file.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs,
                                       const std::vector<std::string>& excludes);

// A document as found in the file, before JSON parsing and UTF-8 checks; for
// messages, `line` is its first line (1-based), or for Parquet its row (0-based)
// within row group `row_group`.
struct RawDocument {
  std::string text;
  const std::string* file = nullptr;
  int64_t line = 0;
  int64_t row_group = -1;
};

class LineReader;
class ParquetTextReader;

// Streams the raw documents of `files` in order. Whitespace-only documents are
// skipped here, so every rank enumerates exactly the same sequence.
class RawDocumentReader {
 public:
  RawDocumentReader(std::vector<std::string> files, CorpusOptions options);
  ~RawDocumentReader();
  RawDocumentReader(const RawDocumentReader&) = delete;
  RawDocumentReader& operator=(const RawDocumentReader&) = delete;

  bool next(RawDocument* doc);  // false after the last document

 private:
  bool open_next_file();
  bool file_open() const { return lines_ || parquet_; }
  void close_file();
  // Reads the next document of the open file; false at its end.
  bool next_in_text(RawDocument* doc);
  bool next_in_parquet(RawDocument* doc);

  std::vector<std::string> files_;
  CorpusOptions options_;
  size_t next_file_ = 0;
  std::unique_ptr<LineReader> lines_;
  std::unique_ptr<ParquetTextReader> parquet_;
};

// The document's text: the JSON field for JSONL, validated as UTF-8. Returns
// nullopt for a bad JSON line under BadJsonPolicy::kSkip (after a warning if
// `warn_on_skip`); throws InputError "file:line: ..." otherwise.
std::optional<std::string> document_text(const RawDocument& doc, const CorpusOptions& options,
                                         bool warn_on_skip = true);

}  // namespace moelab
