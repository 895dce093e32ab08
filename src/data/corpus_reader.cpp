#include "data/corpus_reader.h"

#include <fnmatch.h>
#include <glob.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/input_stream.h"
#include "data/parquet/parquet_text_reader.h"
#include "data/utf8.h"
#include "util/error.h"
#include "util/log.h"

namespace moelab {

namespace fs = std::filesystem;

namespace {

bool has_glob_characters(const std::string& text) {
  return text.find_first_of("*?[") != std::string::npos;
}

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t result{};
  const int status = ::glob(pattern.c_str(), 0, nullptr, &result);
  std::vector<std::string> paths;
  if (status == 0) paths.assign(result.gl_pathv, result.gl_pathv + result.gl_pathc);
  globfree(&result);
  return paths;
}

std::vector<std::string> files_of(const std::string& input) {
  if (fs::is_directory(input)) {
    std::vector<std::string> paths;
    for (const auto& entry : fs::recursive_directory_iterator(input)) {
      if (entry.is_regular_file()) paths.push_back(entry.path().string());
    }
    return paths;
  }
  if (fs::exists(input)) return {input};
  if (has_glob_characters(input)) return glob_files(input);
  throw InputError("input " + input + ": no such file or directory");
}

bool excluded(const std::string& path, const std::vector<std::string>& excludes) {
  const std::string name = fs::path(path).filename().string();
  return std::any_of(excludes.begin(), excludes.end(), [&](const std::string& pattern) {
    return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
  });
}

std::string trim_right(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

bool is_blank(const std::string& text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
}

std::string where(const RawDocument& doc) {
  if (doc.row_group >= 0) {
    return *doc.file + ": row group " + std::to_string(doc.row_group) + ", row " +
           std::to_string(doc.line);
  }
  return *doc.file + ":" + std::to_string(doc.line);
}

constexpr std::pair<CorpusFormat, const char*> kFormatNames[] = {
    {CorpusFormat::kText, "text"},
    {CorpusFormat::kJsonl, "jsonl"},
    {CorpusFormat::kParquet, "parquet"},
    {CorpusFormat::kMegatron, "megatron"},
    {CorpusFormat::kNpy, "npy"}};

std::optional<std::string> reject_json(const RawDocument& doc, const CorpusOptions& options,
                                       const std::string& problem, bool warn_on_skip) {
  const std::string message = where(doc) + ": " + problem;
  if (options.on_bad_json == BadJsonPolicy::kFail) {
    throw InputError(message + " (use --on-bad-json skip to skip such lines)");
  }
  if (warn_on_skip) spdlog::warn("skipping {}", message);
  return std::nullopt;
}

}  // namespace

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs,
                                       const std::vector<std::string>& excludes) {
  if (inputs.empty()) throw InputError("no input files given");
  std::vector<std::string> files;
  for (const auto& input : inputs) {
    std::vector<std::string> matched = files_of(input);
    matched.erase(std::remove_if(matched.begin(), matched.end(),
                                 [&](const std::string& path) { return excluded(path, excludes); }),
                  matched.end());
    if (matched.empty()) throw InputError("input " + input + ": matches no files");
    std::sort(matched.begin(), matched.end());
    for (const auto& path : matched) {
      if (fs::file_size(path) == 0) throw InputError("input " + path + ": file is empty");
    }
    files.insert(files.end(), matched.begin(), matched.end());
  }
  return files;
}

CorpusFormat parse_corpus_format(const std::string& name) {
  std::string choices;
  for (const auto& [format, format_name] : kFormatNames) {
    if (name == format_name) return format;
    choices += std::string(choices.empty() ? "" : ", ") + format_name;
  }
  throw InputError("unknown input format '" + name + "' (expected one of: " + choices + ")");
}

std::string corpus_format_name(CorpusFormat format) {
  for (const auto& [known, name] : kFormatNames) {
    if (known == format) return name;
  }
  return "unknown";
}

bool is_pretokenized(CorpusFormat format) {
  return format == CorpusFormat::kMegatron || format == CorpusFormat::kNpy;
}

RawDocumentReader::RawDocumentReader(std::vector<std::string> files, CorpusOptions options)
    : files_(std::move(files)), options_(std::move(options)) {}

RawDocumentReader::~RawDocumentReader() = default;

void RawDocumentReader::close_file() {
  lines_.reset();
  parquet_.reset();
}

bool RawDocumentReader::open_next_file() {
  close_file();
  if (next_file_ >= files_.size()) return false;
  const std::string& path = files_[next_file_++];
  if (options_.format == CorpusFormat::kParquet) {
    parquet_ = std::make_unique<ParquetTextReader>(path, options_.text_field);
  } else {
    lines_ = std::make_unique<LineReader>(path);
  }
  return true;
}

bool RawDocumentReader::next_in_parquet(RawDocument* doc) {
  while (parquet_->next(&doc->text, &doc->row_group, &doc->line)) {
    if (!is_blank(doc->text)) return true;
  }
  return false;
}

bool RawDocumentReader::next_in_text(RawDocument* doc) {
  std::string line;
  doc->row_group = -1;
  bool separator_seen = true;
  // Separators in a row (or blank runs) give empty documents: not documents at all.
  while (separator_seen) {
    doc->text.clear();
    separator_seen = false;
    while (!separator_seen && lines_->next(&line)) {
      if (options_.format == CorpusFormat::kJsonl) {
        if (is_blank(line)) continue;
        doc->text = std::move(line);
        doc->line = lines_->line_number();
        return true;
      }
      separator_seen =
          options_.blank_line_separator ? is_blank(line) : trim_right(line) == options_.separator;
      if (separator_seen || (doc->text.empty() && is_blank(line))) continue;
      if (doc->text.empty()) {
        doc->line = lines_->line_number();
      } else {
        doc->text += '\n';
      }
      doc->text += line;
    }
    if (!doc->text.empty()) {
      doc->text = trim_right(std::move(doc->text));
      return true;
    }
  }
  return false;
}

bool RawDocumentReader::next(RawDocument* doc) {
  while (file_open() || open_next_file()) {
    doc->file = &files_[next_file_ - 1];
    if (parquet_ ? next_in_parquet(doc) : next_in_text(doc)) return true;
    close_file();
  }
  return false;
}

std::optional<std::string> document_text(const RawDocument& doc, const CorpusOptions& options,
                                         bool warn_on_skip) {
  size_t bad_offset = 0;
  if (!is_valid_utf8(doc.text, &bad_offset)) {
    const std::string problem =
        "not valid UTF-8 text (bad byte at offset " + std::to_string(bad_offset) + ")";
    if (options.format == CorpusFormat::kJsonl)
      return reject_json(doc, options, problem, warn_on_skip);
    throw InputError(where(doc) + ": " + problem);
  }
  if (options.format != CorpusFormat::kJsonl) return doc.text;
  const auto parsed = nlohmann::json::parse(doc.text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return reject_json(doc, options, "invalid JSON", warn_on_skip);
  if (!parsed.is_object())
    return reject_json(doc, options, "JSON line is not an object", warn_on_skip);
  const auto field = parsed.find(options.text_field);
  if (field == parsed.end() || !field->is_string()) {
    return reject_json(doc, options, "no string field \"" + options.text_field + "\"",
                       warn_on_skip);
  }
  return field->get<std::string>();
}

}  // namespace moelab
