// Megatron-LM's MMapIndexedDataset index (megatron/core/datasets/indexed_dataset.py):
//   "MMIDIDX\0\0", u64 version (1), u8 dtype code, u64 sequence count S,
//   u64 document count D, i32 lengths[S], i64 byte pointers[S], i64 document
//   starts[D] (sequence indices, first 0, last S), then optionally i8 modes[S].
// A document is the sequences between two consecutive document starts.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "data/token_documents.h"
#include "util/error.h"

namespace moelab {

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr int64_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;

// Megatron's DType codes that hold token ids; the others (floats, int8...) do not.
int64_t item_bytes_of(uint8_t code, const std::string& path) {
  if (code == 8) return 2;  // uint16
  if (code == 4) return 4;  // int32
  throw InputError(path + ": token dtype code " + std::to_string(code) +
                   " is not uint16 (8) or int32 (4)");
}

template <typename T>
std::vector<T> read_array(std::ifstream& in, uint64_t count) {
  std::vector<T> values(count);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(count * sizeof(T)));
  return values;
}

class MegatronDocuments : public TokenDocumentReader {
 public:
  explicit MegatronDocuments(const std::string& prefix)
      : index_path_(prefix + ".idx"), data_path_(prefix + ".bin") {
    read_index();
    check_against_data();
    data_.open(data_path_, std::ios::binary);
    if (!data_) throw InputError(data_path_ + ": cannot open");
  }

  bool next(std::vector<int64_t>* tokens) override {
    while (next_document_ + 1 < static_cast<int64_t>(document_starts_.size())) {
      const int64_t first = document_starts_[next_document_];
      const int64_t end = document_starts_[next_document_ + 1];
      current_ = next_document_++;
      int64_t count = 0;
      for (int64_t s = first; s < end; ++s) count += lengths_[s];
      if (count == 0) continue;
      current_offset_ = pointers_[first];
      read_tokens(current_offset_, count, tokens);
      return true;
    }
    return false;
  }

  std::string where() const override {
    return data_path_ + ": document " + std::to_string(current_) + " (byte offset " +
           std::to_string(current_offset_) + ")";
  }

 private:
  void read_index() {
    std::ifstream in(index_path_, std::ios::binary);
    if (!in) throw InputError(index_path_ + ": cannot open Megatron index");
    char magic[sizeof(kMagic)] = {};
    uint64_t version = 0;
    uint8_t code = 0;
    uint64_t sequences = 0;
    uint64_t documents = 0;
    in.read(magic, sizeof(magic));
    in.read(reinterpret_cast<char*>(&version), 8);
    in.read(reinterpret_cast<char*>(&code), 1);
    in.read(reinterpret_cast<char*>(&sequences), 8);
    in.read(reinterpret_cast<char*>(&documents), 8);
    if (!in || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
      throw InputError(index_path_ + ": not a Megatron index (bad magic; expected MMIDIDX)");
    }
    if (version != 1) {
      throw InputError(index_path_ + ": index version " + std::to_string(version) + ", expected 1");
    }
    item_bytes_ = item_bytes_of(code, index_path_);
    check_index_size(sequences, documents);
    lengths_ = read_array<int32_t>(in, sequences);
    pointers_ = read_array<int64_t>(in, sequences);
    document_starts_ = read_array<int64_t>(in, documents);
    if (!in) throw InputError(index_path_ + ": index ends early");
  }

  void check_index_size(uint64_t sequences, uint64_t documents) const {
    const uint64_t size = std::filesystem::file_size(index_path_);
    const uint64_t arrays = kHeaderBytes + sequences * 12 + documents * 8;
    if (sequences > size || documents > size || (size != arrays && size != arrays + sequences)) {
      throw InputError(index_path_ + ": " + std::to_string(size) + " bytes, but its header (" +
                       std::to_string(sequences) + " sequences, " + std::to_string(documents) +
                       " document starts) needs " + std::to_string(arrays));
    }
  }

  // Sequences lie back to back in the .bin, in order, filling it exactly.
  void check_against_data() const {
    const int64_t sequences = static_cast<int64_t>(lengths_.size());
    int64_t expected = 0;
    for (int64_t s = 0; s < sequences; ++s) {
      if (lengths_[s] < 0 || pointers_[s] != expected) {
        throw InputError(index_path_ + ": sequence " + std::to_string(s) + " has length " +
                         std::to_string(lengths_[s]) + " at byte " + std::to_string(pointers_[s]) +
                         ", expected byte " + std::to_string(expected));
      }
      expected += int64_t{lengths_[s]} * item_bytes_;
    }
    const int64_t data_bytes = static_cast<int64_t>(std::filesystem::file_size(data_path_));
    if (data_bytes != expected) {
      throw InputError(data_path_ + ": " + std::to_string(data_bytes) + " bytes, but " +
                       index_path_ + " describes " + std::to_string(expected));
    }
    const auto& starts = document_starts_;
    for (size_t d = 0; d < starts.size(); ++d) {
      const int64_t previous = d == 0 ? 0 : starts[d - 1];
      const bool last = d + 1 == starts.size();
      if (starts[d] < previous || starts[d] > sequences || (last && starts[d] != sequences)) {
        throw InputError(index_path_ + ": document start " + std::to_string(d) + " is " +
                         std::to_string(starts[d]) + " (must rise from 0 to " +
                         std::to_string(sequences) + ")");
      }
    }
    if (starts.empty() || starts.front() != 0) {
      throw InputError(index_path_ + ": document starts must begin with 0");
    }
  }

  void read_tokens(int64_t offset, int64_t count, std::vector<int64_t>* tokens) {
    std::vector<char> bytes(count * item_bytes_);
    data_.seekg(offset);
    data_.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!data_) throw InputError(where() + ": cannot read tokens");
    tokens->resize(count);
    for (int64_t i = 0; i < count; ++i) {
      if (item_bytes_ == 2) {
        uint16_t value;
        std::memcpy(&value, &bytes[i * 2], 2);
        (*tokens)[i] = value;
      } else {
        int32_t value;
        std::memcpy(&value, &bytes[i * 4], 4);
        (*tokens)[i] = value;
      }
    }
  }

  std::string index_path_;
  std::string data_path_;
  int64_t item_bytes_ = 0;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> pointers_;
  std::vector<int64_t> document_starts_;
  std::ifstream data_;
  int64_t next_document_ = 0;
  int64_t current_ = -1;
  int64_t current_offset_ = 0;
};

}  // namespace

std::unique_ptr<TokenDocumentReader> open_megatron_documents(const std::string& prefix) {
  return std::make_unique<MegatronDocuments>(prefix);
}

}  // namespace moelab
