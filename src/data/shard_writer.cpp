#include <algorithm>
#include <filesystem>

#include "data/hdf5_handle.h"
#include "data/shard_format.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {

namespace {

void check(herr_t status, const std::string& path, const char* what) {
  if (status < 0) throw InputError(path + ": HDF5 failed to " + what);
}

Hdf5Handle creation_properties_without_times(hid_t property_class) {
  Hdf5Handle properties(H5Pcreate(property_class), H5Pclose);
  H5Pset_obj_track_times(properties.get(), false);
  return properties;
}

void write_int_attribute(hid_t object, const char* name, int64_t value, const std::string& path) {
  Hdf5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Hdf5Handle attribute(
      H5Acreate2(object, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attribute.valid()) throw InputError(path + ": cannot create attribute " + name);
  check(H5Awrite(attribute.get(), H5T_NATIVE_INT64, &value), path, "write an attribute");
}

void write_string_attribute(hid_t object, const char* name, const std::string& value,
                            const std::string& path) {
  Hdf5Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), std::max<size_t>(value.size(), 1));
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  Hdf5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Hdf5Handle attribute(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                       H5Aclose);
  if (!attribute.valid()) throw InputError(path + ": cannot create attribute " + name);
  std::string padded = value;
  padded.resize(std::max<size_t>(value.size(), 1), '\0');
  check(H5Awrite(attribute.get(), type.get(), padded.data()), path, "write an attribute");
}

template <typename T>
void write_dataset(hid_t file, const char* name, hid_t file_type, hid_t memory_type,
                   const std::vector<T>& values, const std::string& path) {
  const hsize_t size = values.size();
  const hsize_t chunk = std::max<hsize_t>(1, std::min<hsize_t>(size, kTokensChunk));
  Hdf5Handle space(H5Screate_simple(1, &size, nullptr), H5Sclose);
  Hdf5Handle properties = creation_properties_without_times(H5P_DATASET_CREATE);
  H5Pset_chunk(properties.get(), 1, &chunk);
  // Every byte of the file is written, so identical shards are identical files.
  H5Pset_fill_time(properties.get(), H5D_FILL_TIME_NEVER);
  Hdf5Handle dataset(
      H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, properties.get(), H5P_DEFAULT),
      H5Dclose);
  if (!dataset.valid()) throw InputError(path + ": cannot create dataset " + name);
  check(H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), path,
        "write a dataset");
}

}  // namespace

void write_shard(const std::string& path, const ShardHeader& header,
                 const std::vector<uint32_t>& tokens, const std::vector<uint64_t>& doc_offsets) {
  const std::string temporary = temporary_path_for(path);
  {
    Hdf5Handle file_properties = creation_properties_without_times(H5P_FILE_CREATE);
    Hdf5Handle file(H5Fcreate(temporary.c_str(), H5F_ACC_TRUNC, file_properties.get(), H5P_DEFAULT),
                    H5Fclose);
    if (!file.valid()) throw InputError(temporary + ": cannot create HDF5 file");
    const hid_t token_type = tokens_fit_uint16(header.vocab_size) ? H5T_STD_U16LE : H5T_STD_U32LE;
    write_dataset(file.get(), "tokens", token_type, H5T_NATIVE_UINT32, tokens, temporary);
    write_dataset(file.get(), "doc_offsets", H5T_STD_U64LE, H5T_NATIVE_UINT64, doc_offsets,
                  temporary);
    const hid_t root = file.get();
    write_int_attribute(root, "format_version", header.format_version, temporary);
    write_int_attribute(root, "vocab_size", header.vocab_size, temporary);
    write_int_attribute(root, "eos_id", header.eos_id, temporary);
    write_string_attribute(root, "tokenizer_checksum", header.tokenizer_checksum, temporary);
    write_string_attribute(root, "split", header.split, temporary);
    write_int_attribute(root, "token_count", header.token_count, temporary);
    check(H5Fflush(root, H5F_SCOPE_GLOBAL), temporary, "flush the file");
  }
  commit_temporary(temporary, path);
}

}  // namespace moelab
