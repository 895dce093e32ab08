// NumPy's .npy format (numpy/lib/format.py): "\x93NUMPY", u8 major, u8 minor,
// header length (u16 for version 1, u32 for 2 and 3), a Python dict literal
// {'descr': '<u2', 'fortran_order': False, 'shape': (N,)}, then the raw array.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "data/token_documents.h"
#include "util/error.h"

namespace moelab {

namespace {

constexpr int64_t kChunkTokens = int64_t{1} << 20;

struct NpyLayout {
  int64_t item_bytes = 0;
  int64_t count = 0;
  int64_t data_offset = 0;
};

std::string header_text(std::ifstream& in, const std::string& path, int64_t* data_offset) {
  char magic[8] = {};
  in.read(magic, sizeof(magic));
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    throw InputError(path + ": not a .npy file (bad magic)");
  }
  const int major = static_cast<unsigned char>(magic[6]);
  uint32_t length = 0;
  if (major == 1) {
    uint16_t short_length = 0;
    in.read(reinterpret_cast<char*>(&short_length), 2);
    length = short_length;
  } else if (major == 2 || major == 3) {
    in.read(reinterpret_cast<char*>(&length), 4);
  } else {
    throw InputError(path + ": .npy version " + std::to_string(major) + " is not 1, 2 or 3");
  }
  std::string header(length, '\0');
  in.read(header.data(), length);
  if (!in) throw InputError(path + ": .npy header ends early");
  *data_offset = static_cast<int64_t>(in.tellg());
  return header;
}

NpyLayout read_layout(std::ifstream& in, const std::string& path) {
  NpyLayout layout;
  const std::string header = header_text(in, path, &layout.data_offset);
  std::smatch match;
  if (!std::regex_search(header, match, std::regex("'descr':\\s*'<(u2|i4|i8)'"))) {
    throw InputError(path + ": array dtype must be little-endian uint16, int32 or int64 (header " +
                     header + ")");
  }
  layout.item_bytes = std::stoi(match[1].str().substr(1));
  if (!std::regex_search(header, match, std::regex("'shape':\\s*\\((\\d+),\\)"))) {
    throw InputError(path + ": array must be 1-D (header " + header + ")");
  }
  layout.count = std::stoll(match[1]);
  const int64_t data_bytes =
      static_cast<int64_t>(std::filesystem::file_size(path)) - layout.data_offset;
  if (data_bytes != layout.count * layout.item_bytes) {
    throw InputError(path + ": header says " + std::to_string(layout.count) + " tokens (" +
                     std::to_string(layout.count * layout.item_bytes) + " bytes), file holds " +
                     std::to_string(data_bytes) + " bytes of data");
  }
  return layout;
}

class NpyDocuments : public TokenDocumentReader {
 public:
  NpyDocuments(const std::string& path, int64_t eos_id) : path_(path), eos_id_(eos_id) {
    in_.open(path, std::ios::binary);
    if (!in_) throw InputError(path + ": cannot open");
    layout_ = read_layout(in_, path);
  }

  bool next(std::vector<int64_t>* tokens) override {
    tokens->clear();
    document_start_ = consumed_;
    while (tokens->empty() || tokens->back() != eos_id_) {
      if (cursor_ == chunk_.size() && !fill()) break;
      tokens->push_back(chunk_[cursor_++]);
      ++consumed_;
    }
    if (tokens->empty()) return false;
    current_ = documents_++;
    return true;
  }

  std::string where() const override {
    return path_ + ": document " + std::to_string(current_) + " (byte offset " +
           std::to_string(layout_.data_offset + document_start_ * layout_.item_bytes) + ")";
  }

 private:
  bool fill() {
    const int64_t count = std::min(kChunkTokens, layout_.count - read_);
    if (count <= 0) return false;
    std::vector<char> bytes(count * layout_.item_bytes);
    in_.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!in_) throw InputError(path_ + ": cannot read tokens");
    chunk_.resize(count);
    for (int64_t i = 0; i < count; ++i) chunk_[i] = decode(&bytes[i * layout_.item_bytes]);
    read_ += count;
    cursor_ = 0;
    return true;
  }

  int64_t decode(const char* bytes) const {
    if (layout_.item_bytes == 2) {
      uint16_t value;
      std::memcpy(&value, bytes, 2);
      return value;
    }
    if (layout_.item_bytes == 4) {
      int32_t value;
      std::memcpy(&value, bytes, 4);
      return value;
    }
    int64_t value;
    std::memcpy(&value, bytes, 8);
    return value;
  }

  std::string path_;
  int64_t eos_id_;
  std::ifstream in_;
  NpyLayout layout_;
  std::vector<int64_t> chunk_;
  size_t cursor_ = 0;
  int64_t read_ = 0;
  int64_t consumed_ = 0;
  int64_t document_start_ = 0;
  int64_t documents_ = 0;
  int64_t current_ = -1;
};

}  // namespace

std::unique_ptr<TokenDocumentReader> open_npy_documents(const std::string& path, int64_t eos_id) {
  return std::make_unique<NpyDocuments>(path, eos_id);
}

}  // namespace moelab
