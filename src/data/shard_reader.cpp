#include "data/shard_reader.h"

#include "util/error.h"

namespace moelab {

namespace {

// HDF5 prints its own error stack on failure; moelab reports errors itself.
void silence_hdf5_error_printing() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

Hdf5Handle open_attribute(hid_t object, const char* name, const std::string& path) {
  Hdf5Handle attribute(H5Aopen(object, name, H5P_DEFAULT), H5Aclose);
  if (!attribute.valid()) throw InputError(path + ": shard has no attribute '" + name + "'");
  return attribute;
}

int64_t read_int_attribute(hid_t object, const char* name, const std::string& path) {
  Hdf5Handle attribute = open_attribute(object, name, path);
  int64_t value = 0;
  if (H5Aread(attribute.get(), H5T_NATIVE_INT64, &value) < 0) {
    throw InputError(path + ": cannot read attribute '" + name + "'");
  }
  return value;
}

std::string read_string_attribute(hid_t object, const char* name, const std::string& path) {
  Hdf5Handle attribute = open_attribute(object, name, path);
  Hdf5Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0) {
    throw InputError(path + ": attribute '" + name + "' is not a fixed-length string");
  }
  std::string value(H5Tget_size(type.get()), '\0');
  if (H5Aread(attribute.get(), type.get(), value.data()) < 0) {
    throw InputError(path + ": cannot read attribute '" + name + "'");
  }
  value.resize(value.find('\0') == std::string::npos ? value.size() : value.find('\0'));
  return value;
}

Hdf5Handle open_dataset(hid_t file, const char* name, const std::string& path, hsize_t* length) {
  Hdf5Handle dataset(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  if (!dataset.valid()) throw InputError(path + ": shard has no dataset '" + name + "'");
  Hdf5Handle space(H5Dget_space(dataset.get()), H5Sclose);
  if (H5Sget_simple_extent_ndims(space.get()) != 1) {
    throw InputError(path + ": dataset '" + name + "' is not 1-D");
  }
  H5Sget_simple_extent_dims(space.get(), length, nullptr);
  return dataset;
}

void read_range(hid_t dataset, hid_t memory_type, hsize_t begin, hsize_t count, void* out,
                const std::string& path) {
  Hdf5Handle file_space(H5Dget_space(dataset), H5Sclose);
  H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &begin, nullptr, &count, nullptr);
  Hdf5Handle memory_space(H5Screate_simple(1, &count, nullptr), H5Sclose);
  if (H5Dread(dataset, memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT, out) < 0) {
    throw InputError(path + ": cannot read tokens (file truncated or damaged?)");
  }
}

}  // namespace

ShardReader::ShardReader(const std::string& path) : path_(path) {
  silence_hdf5_error_printing();
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    throw InputError(path + ": not a readable HDF5 shard (missing, truncated or damaged)");
  }
  file_ = Hdf5Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file_.valid()) {
    throw InputError(path + ": cannot open HDF5 shard (truncated or damaged?)");
  }
  const hid_t root = file_.get();
  header_.format_version = read_int_attribute(root, "format_version", path);
  if (header_.format_version != kShardFormatVersion) {
    throw InputError(path + ": shard format version " + std::to_string(header_.format_version) +
                     ", this moelab reads version " + std::to_string(kShardFormatVersion) +
                     " (re-run moelab prep)");
  }
  header_.vocab_size = read_int_attribute(root, "vocab_size", path);
  header_.eos_id = read_int_attribute(root, "eos_id", path);
  header_.tokenizer_checksum = read_string_attribute(root, "tokenizer_checksum", path);
  header_.split = read_string_attribute(root, "split", path);
  header_.token_count = read_int_attribute(root, "token_count", path);
  hsize_t length = 0;
  tokens_ = open_dataset(root, "tokens", path, &length);
  if (static_cast<int64_t>(length) != header_.token_count) {
    throw InputError(path + ": 'tokens' holds " + std::to_string(length) +
                     " tokens but the token_count attribute says " +
                     std::to_string(header_.token_count));
  }
}

void ShardReader::read_tokens(int64_t begin, int64_t count, int64_t* out) const {
  if (begin < 0 || count < 0 || begin + count > header_.token_count) {
    throw InputError(path_ + ": token range [" + std::to_string(begin) + ", " +
                     std::to_string(begin + count) + ") is outside the shard");
  }
  if (count == 0) return;
  read_range(tokens_.get(), H5T_NATIVE_INT64, begin, count, out, path_);
}

std::vector<uint64_t> ShardReader::doc_offsets() const {
  hsize_t length = 0;
  Hdf5Handle dataset = open_dataset(file_.get(), "doc_offsets", path_, &length);
  std::vector<uint64_t> offsets(length);
  if (length > 0) read_range(dataset.get(), H5T_NATIVE_UINT64, 0, length, offsets.data(), path_);
  return offsets;
}

}  // namespace moelab
