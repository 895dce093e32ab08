#include "data/tokenizer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/bpe_encoder.h"
#include "data/spm_model.h"
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

void run_tool(const std::string& command, const std::string& what) {
  const int status = std::system((command + " 2>/dev/null").c_str());
  if (status != 0) {
    throw InputError(what +
                     " failed (is the Debian package 'sentencepiece' installed?): " + command);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
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

Tokenizer::Tokenizer(const std::string& serialized_model, const std::string& origin)
    : serialized_(serialized_model), origin_(origin) {
  const SpmModel model = parse_spm_model(serialized_, origin);
  vocab_size_ = static_cast<int64_t>(model.pieces.size());
  for (size_t id = 0; id < model.pieces.size(); ++id) {
    if (model.pieces[id].text == "</s>") eos_id_ = static_cast<int64_t>(id);
  }
  if (eos_id_ < 0) throw InputError(origin + ": tokenizer has no EOS piece </s>");
  encoder_ = std::make_shared<const BpeEncoder>(model, origin);
  TempFile file;
  model_path_ = file.path() + ".model";
  write_file(model_path_, serialized_);
}

Tokenizer::~Tokenizer() {
  if (model_path_.empty()) return;
  std::error_code ignored;
  fs::remove(model_path_, ignored);
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open tokenizer model");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return Tokenizer(bytes.str(), path);
}

std::vector<std::vector<uint32_t>> Tokenizer::encode_documents(
    const std::vector<std::string>& texts) const {
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

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  TempFile input;
  TempFile output;
  std::string line;
  for (int id : ids) {
    if (!line.empty()) line += ' ';
    line += std::to_string(id);
  }
  write_file(input.path(), line + "\n");
  run_tool("spm_decode --model=" + shell_quoted(model_path_) + " --input_format=id < " +
               shell_quoted(input.path()) + " > " + shell_quoted(output.path()),
           origin_ + ": decoding");
  std::string text = read_file(output.path());
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace moelab
