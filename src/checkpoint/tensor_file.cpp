#include "checkpoint/tensor_file.h"

#include <fcntl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <utility>

#include "checkpoint/tensor_file_hdf5.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "values are written as the little-endian types the file declares");

constexpr int64_t kWriteChunk = int64_t{64} << 20;  // bytes per write call and progress report

herr_t find_system_reason(unsigned, const H5E_error2_t* error, void* data) {
  const char* key = "error message = '";
  const char* found = error->desc ? std::strstr(error->desc, key) : nullptr;
  if (found) {
    const char* begin = found + std::strlen(key);
    const char* end = std::strchr(begin, '\'');
    *static_cast<std::string*>(data) = end ? std::string(begin, end) : std::string(begin);
  }
  return 0;
}

// The operating system's reason in HDF5's current error stack ("No space left
// on device"), where a file driver recorded one; read before the next HDF5 call.
std::string system_reason() {
  std::string reason;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, find_system_reason, &reason);
  return reason.empty() ? "" : " (" + reason + ")";
}

// A failure to write is not bad input: the run ends with status 1.
void check_write(herr_t status, const std::string& what) {
  if (status < 0) throw std::runtime_error(what + system_reason());
}

std::vector<std::string> split_name(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t slash = name.find('/', start);
    parts.push_back(name.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  for (const auto& part : parts) {
    if (part.empty() || part == "." || part == "..") {
      throw std::invalid_argument("tensor name '" + name +
                                  "' cannot be stored in HDF5: empty, '.' or '..' path component");
    }
  }
  return parts;
}

// Creation property lists that leave modification times out of object headers.
Hdf5Handle untimed_plist(hid_t plist_class) {
  Hdf5Handle plist(H5Pcreate(plist_class), H5Pclose);
  H5Pset_obj_track_times(plist.get(), false);
  return plist;
}

// A dataset whose space is allocated when it is created and never filled: its
// values are written into that space afterwards (write_tensor_values).
Hdf5Handle preallocated_dataset_plist() {
  Hdf5Handle plist = untimed_plist(H5P_DATASET_CREATE);
  H5Pset_layout(plist.get(), H5D_CONTIGUOUS);
  H5Pset_alloc_time(plist.get(), H5D_ALLOC_TIME_EARLY);
  H5Pset_fill_time(plist.get(), H5D_FILL_TIME_NEVER);
  return plist;
}

struct StoredType {
  hid_t file_type;
  hid_t memory_type;
  torch::ScalarType memory_dtype;  // what the bytes handed to HDF5 hold
};

StoredType stored_type(torch::ScalarType dtype, const std::string& name) {
  switch (dtype) {
    case torch::kFloat:
    case torch::kBFloat16:
      return {H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, torch::kFloat};
    case torch::kDouble:
      return {H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, torch::kDouble};
    case torch::kInt:
      return {H5T_STD_I32LE, H5T_NATIVE_INT32, torch::kInt};
    case torch::kLong:
      return {H5T_STD_I64LE, H5T_NATIVE_INT64, torch::kLong};
    case torch::kByte:  // RNG states
      return {H5T_STD_U8LE, H5T_NATIVE_UINT8, torch::kByte};
    default:
      throw std::invalid_argument(
          "tensor '" + name + "' has dtype " + std::string(c10::toString(dtype)) +
          "; tensor files store float32, float64, bfloat16, int32, int64, uint8");
  }
}

void write_string_attribute(hid_t object, const char* key, const std::string& value,
                            const std::string& path) {
  Hdf5Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.size());
  Hdf5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Hdf5Handle attribute(H5Acreate2(object, key, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                       H5Aclose);
  if (!attribute.valid()) check_write(-1, path + ": cannot create attribute " + key);
  check_write(H5Awrite(attribute.get(), type.get(), value.data()),
              path + ": cannot write attribute");
}

// Creates the dataset with its space allocated and unfilled, and returns the
// offset of its values in the file.
int64_t create_dataset(hid_t file, const std::string& name, c10::IntArrayRef sizes,
                       torch::ScalarType dtype, const std::string& path) {
  const StoredType type = stored_type(dtype, name);
  std::vector<hsize_t> dims(sizes.begin(), sizes.end());
  Hdf5Handle space(dims.empty()
                       ? H5Screate(H5S_SCALAR)
                       : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                   H5Sclose);
  Hdf5Handle dcpl = preallocated_dataset_plist();
  Hdf5Handle dataset(H5Dcreate2(file, name.c_str(), type.file_type, space.get(), H5P_DEFAULT,
                                dcpl.get(), H5P_DEFAULT),
                     H5Dclose);
  if (!dataset.valid()) check_write(-1, path + ": cannot create dataset '" + name + "'");
  if (dtype == torch::kBFloat16) {
    write_string_attribute(dataset.get(), kDtypeAttribute, "bfloat16", path);
  }
  if (c10::multiply_integers(sizes) == 0) return 0;
  const haddr_t offset = H5Dget_offset(dataset.get());
  if (offset == HADDR_UNDEF)
    check_write(-1, path + ": no space allocated for dataset '" + name + "'");
  return static_cast<int64_t>(offset);
}

// The names a file holds so far. add() creates the groups a new name needs,
// refusing a name given twice or one that would make one object both a dataset
// and a group.
class FileNames {
 public:
  void add(hid_t file, const std::string& name, const std::string& path) {
    const auto clash = [&](const std::string& group) {
      return std::invalid_argument("tensor names '" + group + "' and '" + name +
                                   "' clash in one HDF5 file: '" + group +
                                   "' would be both a dataset and a group");
    };
    if (groups_.count(name)) throw clash(name);
    if (!datasets_.insert(name).second) {
      throw std::invalid_argument("tensor '" + name + "' written twice to " + path);
    }
    const std::vector<std::string> parts = split_name(name);
    std::string prefix;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      prefix += (i ? "/" : "") + parts[i];
      if (datasets_.count(prefix)) throw clash(prefix);
      if (!groups_.insert(prefix).second) continue;
      Hdf5Handle gcpl = untimed_plist(H5P_GROUP_CREATE);
      Hdf5Handle group(H5Gcreate2(file, prefix.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT),
                       H5Gclose);
      if (!group.valid()) check_write(-1, path + ": cannot create group '" + prefix + "'");
    }
  }

 private:
  std::set<std::string> groups_, datasets_;
};

void remove_quietly(const std::string& path) {
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
}

std::runtime_error system_error(const std::string& path, const char* what, int error) {
  return std::runtime_error(path + ": " + what + " (" + std::strerror(error) + ")");
}

// Writes all of `bytes` at `offset`, a chunk per call.
void write_at(int fd, const char* bytes, int64_t length, int64_t offset, const std::string& path,
              const std::function<void(int64_t)>& progress) {
  while (length > 0) {
    const ssize_t written =
        ::pwrite(fd, bytes, static_cast<size_t>(std::min(length, kWriteChunk)), offset);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) throw system_error(path, "cannot write", errno);
    if (written == 0) throw system_error(path, "cannot write", ENOSPC);
    bytes += written;
    offset += written;
    length -= written;
    if (progress) progress(written);
  }
}

}  // namespace

int64_t TensorFileLayout::bytes() const {
  int64_t total = 0;
  for (const auto& extent : extents) total += extent.values.nbytes();
  return total;
}

TensorFileLayout create_tensor_file(const std::string& path,
                                    const std::map<std::string, torch::Tensor>& tensors) {
  for (const auto& [name, tensor] : tensors) {
    split_name(name);
    stored_type(tensor.scalar_type(), name);
  }
  TensorFileLayout layout;
  layout.path = path;
  layout.temporary = temporary_path_for(path);
  try {
    QuietHdf5Errors quiet;
    Hdf5Handle file(H5Fcreate(layout.temporary.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                    H5Fclose);
    if (!file.valid()) check_write(-1, layout.temporary + ": cannot create HDF5 file");
    FileNames names;
    for (const auto& [name, tensor] : tensors) {
      names.add(file.get(), name, layout.temporary);
      TensorFileLayout::Extent extent;
      extent.values =
          tensor.detach().to(torch::kCPU, stored_type(tensor.scalar_type(), name).memory_dtype);
      extent.values = extent.values.contiguous();
      extent.offset =
          create_dataset(file.get(), name, tensor.sizes(), tensor.scalar_type(), layout.temporary);
      layout.extents.push_back(extent);
    }
    // Closed here, where a failure to write the structure can still be reported.
    check_write(H5Fclose(file.release()), layout.temporary + ": cannot write HDF5 file");
  } catch (...) {
    remove_quietly(layout.temporary);
    throw;
  }
  return layout;
}

void write_tensor_values(const TensorFileLayout& layout,
                         const std::function<void(int64_t bytes)>& progress) {
  try {
    const int fd = ::open(layout.temporary.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) throw system_error(layout.temporary, "cannot open", errno);
    try {
      for (const auto& extent : layout.extents) {
        write_at(fd, static_cast<const char*>(extent.values.data_ptr()), extent.values.nbytes(),
                 extent.offset, layout.temporary, progress);
      }
      if (::fsync(fd) != 0) throw system_error(layout.temporary, "fsync failed", errno);
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (::close(fd) != 0) throw system_error(layout.temporary, "cannot close", errno);
    commit_durably(layout.temporary, layout.path);
  } catch (const std::runtime_error& e) {
    remove_quietly(layout.temporary);
    throw std::runtime_error(e.what());  // write failures are not bad input, whoever threw
  }
}

void write_tensor_file(const std::string& path,
                       const std::map<std::string, torch::Tensor>& tensors) {
  write_tensor_values(create_tensor_file(path, tensors));
}

// A tensor stored as another dtype (bfloat16 as float32) is converted a block
// at a time, so the writer never holds a converted copy of all of it.
constexpr int64_t kConversionBlockElements = int64_t{1} << 23;

struct TensorFileWriter::File {
  QuietHdf5Errors quiet;
  Hdf5Handle handle;
  FileNames names{};
  int fd = -1;
};

TensorFileWriter::TensorFileWriter(const std::string& path)
    : path_(path), temporary_(temporary_path_for(path)) {
  // In place: the quiet-errors guard must not be copied.
  file_.reset(
      new File{{},
               Hdf5Handle(H5Fcreate(temporary_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                          H5Fclose)});
  if (!file_->handle.valid()) check_write(-1, temporary_ + ": cannot create HDF5 file");
  file_->fd = ::open(temporary_.c_str(), O_WRONLY | O_CLOEXEC);
  if (file_->fd < 0) throw system_error(temporary_, "cannot open", errno);
}

TensorFileWriter::~TensorFileWriter() {
  if (!file_) return;
  if (file_->fd >= 0) ::close(file_->fd);
  file_.reset();
  remove_quietly(temporary_);
}

void TensorFileWriter::add(const std::string& name, const torch::Tensor& tensor) {
  const StoredType type = stored_type(tensor.scalar_type(), name);
  file_->names.add(file_->handle.get(), name, temporary_);
  const int64_t offset =
      create_dataset(file_->handle.get(), name, tensor.sizes(), tensor.scalar_type(), temporary_);
  const torch::Tensor flat = tensor.detach().to(torch::kCPU).contiguous().reshape(-1);
  const int64_t element_bytes = c10::elementSize(type.memory_dtype);
  for (int64_t begin = 0; begin < flat.numel(); begin += kConversionBlockElements) {
    const int64_t length = std::min(kConversionBlockElements, flat.numel() - begin);
    const torch::Tensor block = flat.narrow(0, begin, length).to(type.memory_dtype).contiguous();
    write_at(file_->fd, static_cast<const char*>(block.data_ptr()), block.nbytes(),
             offset + begin * element_bytes, temporary_, nullptr);
  }
}

void TensorFileWriter::commit() {
  check_write(H5Fclose(file_->handle.release()), temporary_ + ": cannot write HDF5 file");
  const int fd = std::exchange(file_->fd, -1);
  if (::fsync(fd) != 0) {
    ::close(fd);
    throw system_error(temporary_, "fsync failed", errno);
  }
  if (::close(fd) != 0) throw system_error(temporary_, "cannot close", errno);
  file_.reset();
  commit_durably(temporary_, path_);
}

}  // namespace moelab
