// Reading corpora: plain text with a document separator line (or blank lines),
// or JSON Lines with a text field; either may be gzip-compressed (detected from
// the content, so no naming convention is needed).
#pragma once

#include <zlib.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moelab {

enum class CorpusFormat { kText, kJsonl };
enum class BadJsonPolicy { kSkip, kFail };

struct CorpusOptions {
  CorpusFormat format = CorpusFormat::kText;
  std::string separator = "<|endoftext|>";  // a line equal to this ends a text document
  bool blank_line_separator = false;        // blank lines end text documents instead
  std::string text_field = "text";          // JSONL field holding the document
  BadJsonPolicy on_bad_json = BadJsonPolicy::kFail;
};

// Expands each input (a file, a directory searched recursively, or a glob
// pattern) into a sorted list of regular files, dropping names whose file name
// matches one of the `excludes` glob patterns. InputError naming the input when
// one is missing, matches nothing or is an empty file.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs,
                                       const std::vector<std::string>& excludes);

// A document as found in the file, before JSON parsing and UTF-8 checks; `line`
// is its first line (1-based), for messages.
struct RawDocument {
  std::string text;
  const std::string* file = nullptr;
  int64_t line = 0;
};

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
  bool read_line(std::string* line);  // without the newline; false at end of file
  void close_file();

  std::vector<std::string> files_;
  CorpusOptions options_;
  size_t next_file_ = 0;
  gzFile current_ = nullptr;
  int64_t line_number_ = 0;
};

// The document's text: the JSON field for JSONL, validated as UTF-8. Returns
// nullopt for a bad JSON line under BadJsonPolicy::kSkip (after a warning if
// `warn_on_skip`); throws InputError "file:line: ..." otherwise.
std::optional<std::string> document_text(const RawDocument& doc, const CorpusOptions& options,
                                         bool warn_on_skip = true);

}  // namespace moelab
