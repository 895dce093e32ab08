#include "data/tokenizer.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "data/bpe_encoder.h"
#include "data/checksum.h"
#include "data/hf_bpe_encoder.h"
#include "data/spm_model.h"
#include "data/text_encoder.h"
#include "data/tiktoken_encoder.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {

namespace fs = std::filesystem;

namespace {

// A unique temporary file, removed with the object.
class TempFile {
 public:
  TempFile() {
    std::string pattern = (fs::temp_directory_path() / "moelab_spm_XXXXXX").string();
    const int fd = mkstemp(pattern.data());
    if (fd < 0) throw InputError("cannot create a temporary file in " + pattern);
    close(fd);
    path_ = pattern;
  }
  ~TempFile() {
    std::error_code ignored;
    fs::remove(path_, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A unique temporary folder, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "moelab_spm_XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw InputError("cannot create a temporary folder " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string trimmed(std::string text) {
  const size_t end = text.find_last_not_of(" \t\r\n");
  text.erase(end == std::string::npos ? 0 : end + 1);
  return text;
}

// Runs a SentencePiece tool; a failure says why in the tool's own words (its
// stderr: e.g. spm_train's "Vocabulary size is smaller than required_chars"),
// and a missing tool which package brings it.
void run_tool(const std::string& command, const std::string& what) {
  TempFile errors;
  const int status = std::system(("( " + command + " ) 2>" + shell_quoted(errors.path())).c_str());
  if (status == 0) return;
  const bool not_found = WIFEXITED(status) && WEXITSTATUS(status) == 127;
  const std::string reason = trimmed(read_file(errors.path()));
  throw InputError(what + " failed: " + (reason.empty() ? command : reason) +
                   (not_found ? " (is the Debian package 'sentencepiece' installed?)" : ""));
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw InputError(path + ": cannot write temporary file");
}

// A document as one line: the tools are line based.
std::string as_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\r', ' ');
  return text;
}

std::string one_per_line(const std::vector<std::string>& texts) {
  std::string lines;
  for (const auto& text : texts) lines += as_line(text) + "\n";
  return lines;
}

// SentencePiece: native encoding, decoding by spm_decode on a private copy of the model.
class SentencePieceEncoder : public TextEncoder {
 public:
  SentencePieceEncoder(const std::string& serialized, const std::string& origin) : origin_(origin) {
    const SpmModel model = parse_spm_model(serialized, origin);
    vocab_size_ = static_cast<int64_t>(model.pieces.size());
    for (size_t id = 0; id < model.pieces.size(); ++id) {
      if (model.pieces[id].text == "</s>") eos_id_ = static_cast<int64_t>(id);
    }
    if (eos_id_ < 0) throw InputError(origin + ": tokenizer has no EOS piece </s>");
    encoder_ = std::make_unique<const BpeEncoder>(model, origin);
    write_file(model_file_.path(), serialized);
  }

  int64_t vocab_size() const override { return vocab_size_; }
  int64_t eos_id() const override { return eos_id_; }

  std::vector<std::vector<uint32_t>> encode_documents(
      const std::vector<std::string>& texts) const override {
    std::vector<std::vector<uint32_t>> encoded;
    encoded.reserve(texts.size());
    BpeEncoder::WordCache words;
    for (const auto& text : texts) {
      std::vector<uint32_t> tokens = encoder_->encode(as_line(text), words);
      tokens.push_back(static_cast<uint32_t>(eos_id_));
      encoded.push_back(std::move(tokens));
    }
    return encoded;
  }

  std::string decode(const std::vector<int>& ids) const override {
    TempFile input;
    TempFile output;
    std::string line;
    for (int id : ids) {
      if (!line.empty()) line += ' ';
      line += std::to_string(id);
    }
    write_file(input.path(), line + "\n");
    run_tool("spm_decode --model=" + shell_quoted(model_file_.path()) + " --input_format=id < " +
                 shell_quoted(input.path()) + " > " + shell_quoted(output.path()),
             origin_ + ": decoding");
    std::string text = read_file(output.path());
    if (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }

 private:
  std::string origin_;
  TempFile model_file_;  // the copy spm_decode reads
  std::unique_ptr<const BpeEncoder> encoder_;
  int64_t vocab_size_ = 0;
  int64_t eos_id_ = -1;
};

constexpr const char* kSettingsFile = "tokenizer_settings.json";

const char* dataset_file_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::kSentencePiece:
      return "tokenizer.model";
    case TokenizerKind::kHfBpe:
      return "tokenizer.json";
    case TokenizerKind::kTiktoken:
      return "tokenizer.tiktoken";
  }
  return "";
}

// Everything besides the file that decides the ids, as tokenizer_settings.json
// holds it (add_special_tokens only where the file has a template, so records
// of files without one keep their bytes and checksums).
std::string settings_record(TokenizerKind kind, const TokenizerSettings& settings) {
  nlohmann::json record = {{"kind", tokenizer_kind_name(kind)},
                           {"eos_token", settings.eos_token},
                           {"tiktoken_pattern", settings.tiktoken_pattern}};
  if (settings.add_special_tokens) record["add_special_tokens"] = *settings.add_special_tokens;
  return record.dump(2) + "\n";
}

// A document's ids (text ids, then EOS) with the template around them; EOS
// stays last, once.
void apply_template(const DocumentTemplate& made, uint32_t eos, std::vector<uint32_t>& ids) {
  ids.pop_back();
  ids.insert(ids.begin(), made.before.begin(), made.before.end());
  ids.insert(ids.end(), made.after.begin(), made.after.end());
  if (made.after.empty() || made.after.back() != eos) ids.push_back(eos);
}

// The one checksum rule: a SentencePiece model's bytes; for the other kinds
// the file's bytes and the settings record.
std::string checksum_of(TokenizerKind kind, const std::string& file_bytes,
                        const TokenizerSettings& settings) {
  if (kind == TokenizerKind::kSentencePiece) return checksum_hex(xxhash64_bytes(file_bytes));
  return checksum_hex(xxhash64_bytes(file_bytes + '\0' + settings_record(kind, settings)));
}

TokenizerKind kind_named(const std::string& name, const std::string& origin) {
  for (TokenizerKind kind :
       {TokenizerKind::kSentencePiece, TokenizerKind::kHfBpe, TokenizerKind::kTiktoken}) {
    if (name == tokenizer_kind_name(kind)) return kind;
  }
  throw InputError(origin + ": unknown tokenizer kind '" + name + "'");
}

// The kind and settings a dataset folder records; SentencePiece when it has no settings file.
std::pair<TokenizerKind, TokenizerSettings> dataset_settings(const fs::path& dir) {
  const fs::path path = dir / kSettingsFile;
  if (!fs::exists(path)) return {TokenizerKind::kSentencePiece, {}};
  const nlohmann::json record = nlohmann::json::parse(read_file(path.string()), nullptr, false);
  if (!record.is_object() || !record.contains("kind") || !record["kind"].is_string()) {
    throw InputError(path.string() + ": expected a JSON object with a string \"kind\"");
  }
  TokenizerSettings settings;
  const auto text = [&](const char* key) {
    if (record.contains(key) && !record[key].is_string()) {
      throw InputError(path.string() + ": \"" + key + "\" must be a string");
    }
    return record.value(key, "");
  };
  settings.eos_token = text("eos_token");
  settings.tiktoken_pattern = text("tiktoken_pattern");
  if (record.contains("add_special_tokens")) {
    if (!record["add_special_tokens"].is_boolean()) {
      throw InputError(path.string() + ": \"add_special_tokens\" must be true or false");
    }
    settings.add_special_tokens = record["add_special_tokens"].get<bool>();
  }
  return {kind_named(record["kind"].get<std::string>(), path.string()), settings};
}

}  // namespace

std::string train_tokenizer(const std::vector<std::string>& documents,
                            const TokenizerTrainOptions& options) {
  if (documents.empty()) throw InputError("tokenizer training: no documents to train on");
  // spm_train records its input and output names inside the model, so it runs
  // in a private folder with fixed relative names: same documents, same bytes.
  TempDir dir;
  write_file(dir.path() + "/corpus.txt", one_per_line(documents));
  std::ostringstream command;
  // The sample is already bounded by prep, so SentencePiece must not resample it;
  // one thread, because spm_train's result depends on its thread count.
  command << "cd " << shell_quoted(dir.path()) << " && spm_train --input=corpus.txt"
          << " --model_prefix=tokenizer --model_type=bpe"
          << " --vocab_size=" << options.vocab_size
          << " --character_coverage=" << options.character_coverage
          << " --byte_fallback=" << (options.byte_fallback ? "true" : "false") << " --num_threads=1"
          << " --input_sentence_size=0 --shuffle_input_sentence=false"
          << " --max_sentence_length=65536 --minloglevel=2"
          << " --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 >/dev/null";
  run_tool(command.str(),
           "tokenizer training (vocab_size " + std::to_string(options.vocab_size) + ")");
  return read_file(dir.path() + "/tokenizer.model");
}

const char* tokenizer_kind_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::kSentencePiece:
      return "sentencepiece";
    case TokenizerKind::kHfBpe:
      return "tokenizer.json";
    case TokenizerKind::kTiktoken:
      return "tiktoken";
  }
  return "";
}

Tokenizer::Tokenizer(const std::string& serialized_model, const std::string& origin)
    : Tokenizer(TokenizerKind::kSentencePiece, serialized_model, {}, origin) {}

Tokenizer::Tokenizer(TokenizerKind kind, const std::string& file_bytes,
                     const TokenizerSettings& settings, const std::string& origin)
    : kind_(kind), file_bytes_(file_bytes), settings_(settings) {
  switch (kind) {
    case TokenizerKind::kSentencePiece:
      encoder_ = std::make_shared<const SentencePieceEncoder>(file_bytes, origin);
      break;
    case TokenizerKind::kHfBpe:
      encoder_ = std::make_shared<const HfBpeEncoder>(file_bytes, settings.eos_token, origin);
      break;
    case TokenizerKind::kTiktoken:
      encoder_ = std::make_shared<const TiktokenEncoder>(file_bytes, settings.tiktoken_pattern,
                                                         settings.eos_token, origin);
      break;
  }
}

Tokenizer Tokenizer::from_file(const std::string& path, const TokenizerSettings& settings) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open tokenizer file");
  std::ostringstream read;
  read << in.rdbuf();
  const std::string bytes = read.str();
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  TokenizerKind kind = TokenizerKind::kSentencePiece;
  if (fs::path(path).extension() == ".tiktoken") {
    kind = TokenizerKind::kTiktoken;
  } else if (first != std::string::npos && bytes[first] == '{') {
    kind = TokenizerKind::kHfBpe;
  }
  if (kind == TokenizerKind::kSentencePiece &&
      (!settings.eos_token.empty() || !settings.tiktoken_pattern.empty())) {
    throw InputError(path +
                     ": --eos-token and --tiktoken-pattern apply to tokenizer.json and "
                     ".tiktoken files, not to a SentencePiece model");
  }
  return Tokenizer(kind, bytes, settings, path);
}

int64_t Tokenizer::vocab_size() const {
  return encoder_->vocab_size();
}

int64_t Tokenizer::eos_id() const {
  return encoder_->eos_id();
}

bool Tokenizer::has_document_template() const {
  return !encoder_->document_template().empty();
}

Tokenizer Tokenizer::with_special_tokens(bool add) const {
  Tokenizer changed = *this;
  if (has_document_template()) changed.settings_.add_special_tokens = add;
  return changed;
}

std::vector<std::vector<uint32_t>> Tokenizer::encode_documents(
    const std::vector<std::string>& texts) const {
  std::vector<std::vector<uint32_t>> encoded = encoder_->encode_documents(texts);
  if (settings_.add_special_tokens.value_or(false)) {
    const DocumentTemplate made = encoder_->document_template();
    for (auto& ids : encoded) apply_template(made, uint32_t(encoder_->eos_id()), ids);
  }
  return encoded;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  return encoder_->decode(ids);
}

std::string Tokenizer::checksum() const {
  return checksum_of(kind_, file_bytes_, settings_);
}

void Tokenizer::save_to_dataset(const std::string& dataset_dir) const {
  const fs::path dir(dataset_dir);
  write_file_atomically((dir / dataset_file_name(kind_)).string(), file_bytes_);
  if (kind_ != TokenizerKind::kSentencePiece) {
    write_file_atomically((dir / kSettingsFile).string(), settings_record(kind_, settings_));
  }
}

Tokenizer Tokenizer::from_dataset(const std::string& dataset_dir) {
  const auto [kind, settings] = dataset_settings(dataset_dir);
  const fs::path path = fs::path(dataset_dir) / dataset_file_name(kind);
  if (!fs::exists(path)) throw InputError(path.string() + ": the dataset's tokenizer is missing");
  return Tokenizer(kind, read_file(path.string()), settings, path.string());
}

std::optional<std::string> Tokenizer::dataset_checksum(const std::string& dataset_dir) {
  const auto [kind, settings] = dataset_settings(dataset_dir);
  const fs::path path = fs::path(dataset_dir) / dataset_file_name(kind);
  if (!fs::exists(path)) return std::nullopt;
  return checksum_of(kind, read_file(path.string()), settings);
}

std::vector<std::string> Tokenizer::dataset_file_names() {
  return {dataset_file_name(TokenizerKind::kSentencePiece),
          dataset_file_name(TokenizerKind::kHfBpe), dataset_file_name(TokenizerKind::kTiktoken),
          kSettingsFile};
}

}  // namespace moelab
