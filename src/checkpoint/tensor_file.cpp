#include "checkpoint/tensor_file.h"

#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {
namespace {

constexpr const char* kDtypeAttribute = "torch_dtype";

// Owns an HDF5 identifier and closes it with the matching H5?close.
class H5Handle {
 public:
  H5Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~H5Handle() {
    if (id_ >= 0) close_(id_);
  }
  H5Handle(H5Handle&& other) noexcept : id_(std::exchange(other.id_, -1)), close_(other.close_) {}
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle& operator=(H5Handle&&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// HDF5 prints its whole error stack to stderr by default; our exceptions already
// say what went wrong, so the stack is silenced while we work and then restored.
class QuietHdf5Errors {
 public:
  QuietHdf5Errors() {
    H5Eget_auto2(H5E_DEFAULT, &handler_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5Errors() { H5Eset_auto2(H5E_DEFAULT, handler_, data_); }

 private:
  H5E_auto2_t handler_ = nullptr;
  void* data_ = nullptr;
};

void check(herr_t status, const std::string& what) {
  if (status < 0) throw InputError(what);
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
H5Handle untimed_plist(hid_t plist_class) {
  H5Handle plist(H5Pcreate(plist_class), H5Pclose);
  H5Pset_obj_track_times(plist.get(), false);
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
  H5Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.size());
  H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Handle attribute(H5Acreate2(object, key, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                     H5Aclose);
  if (!attribute.valid()) throw InputError(path + ": cannot create attribute " + key);
  check(H5Awrite(attribute.get(), type.get(), value.data()), path + ": cannot write attribute");
}

// `block` (contiguous) into rows [first_row, first_row + block rows) of `dataset`.
void write_block(hid_t dataset, hid_t memory_type, const torch::Tensor& block, int64_t first_row,
                 const std::string& what) {
  H5Handle file_space(H5Dget_space(dataset), H5Sclose);
  std::vector<hsize_t> count(block.sizes().begin(), block.sizes().end());
  std::vector<hsize_t> start(count.size(), 0);
  start[0] = hsize_t(first_row);
  check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr),
        what);
  H5Handle memory_space(H5Screate_simple(int(count.size()), count.data(), nullptr), H5Sclose);
  check(H5Dwrite(dataset, memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT,
                 block.data_ptr()),
        what);
}

// A tensor stored as another dtype (bfloat16 as float32) is converted a block
// of rows at a time, so writing it never holds a converted copy of all of it.
constexpr int64_t kConversionBlockElements = int64_t(1) << 23;

void write_data(hid_t dataset, const StoredType& type, const torch::Tensor& tensor,
                const std::string& what) {
  const torch::Tensor source = tensor.detach().to(torch::kCPU).contiguous();
  if (source.scalar_type() == type.memory_dtype || source.dim() == 0) {
    const torch::Tensor data = source.to(type.memory_dtype);
    check(H5Dwrite(dataset, type.memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data_ptr()),
          what);
    return;
  }
  const int64_t row = std::max<int64_t>(1, source.numel() / std::max<int64_t>(1, source.size(0)));
  const int64_t block = std::max<int64_t>(1, kConversionBlockElements / row);
  for (int64_t begin = 0; begin < source.size(0); begin += block) {
    const int64_t end = std::min(begin + block, source.size(0));
    const torch::Tensor rows = source.narrow(0, begin, end - begin).to(type.memory_dtype);
    write_block(dataset, type.memory_type, rows, begin, what);
  }
}

void write_dataset(hid_t file, const std::string& name, const torch::Tensor& tensor,
                   const std::string& path) {
  const StoredType type = stored_type(tensor.scalar_type(), name);
  std::vector<hsize_t> dims(tensor.sizes().begin(), tensor.sizes().end());
  H5Handle space(dims.empty()
                     ? H5Screate(H5S_SCALAR)
                     : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                 H5Sclose);
  H5Handle dcpl = untimed_plist(H5P_DATASET_CREATE);
  H5Handle dataset(H5Dcreate2(file, name.c_str(), type.file_type, space.get(), H5P_DEFAULT,
                              dcpl.get(), H5P_DEFAULT),
                   H5Dclose);
  if (!dataset.valid()) throw InputError(path + ": cannot create dataset '" + name + "'");
  if (tensor.numel() > 0) {
    write_data(dataset.get(), type, tensor, path + ": cannot write dataset '" + name + "'");
  }
  if (tensor.scalar_type() == torch::kBFloat16) {
    write_string_attribute(dataset.get(), kDtypeAttribute, "bfloat16", path);
  }
}

torch::ScalarType dtype_of(hid_t dataset, const std::string& name, const std::string& path) {
  H5Handle type(H5Dget_type(dataset), H5Tclose);
  const H5T_class_t type_class = H5Tget_class(type.get());
  const size_t size = H5Tget_size(type.get());
  if (type_class == H5T_FLOAT && size == 4) return torch::kFloat;
  if (type_class == H5T_FLOAT && size == 8) return torch::kDouble;
  if (type_class == H5T_INTEGER && size == 1 && H5Tget_sign(type.get()) == H5T_SGN_NONE) {
    return torch::kByte;
  }
  if (type_class == H5T_INTEGER && H5Tget_sign(type.get()) == H5T_SGN_2) {
    if (size == 4) return torch::kInt;
    if (size == 8) return torch::kLong;
  }
  throw InputError(path + ": dataset '" + name +
                   "' has a type other than float32, float64, int32, int64 or uint8");
}

hid_t memory_type_of(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat:
      return H5T_NATIVE_FLOAT;
    case torch::kDouble:
      return H5T_NATIVE_DOUBLE;
    case torch::kInt:
      return H5T_NATIVE_INT32;
    case torch::kByte:
      return H5T_NATIVE_UINT8;
    default:
      return H5T_NATIVE_INT64;
  }
}

std::vector<int64_t> shape_of(hid_t dataset, const std::string& name, const std::string& path) {
  H5Handle space(H5Dget_space(dataset), H5Sclose);
  const H5S_class_t space_class = H5Sget_simple_extent_type(space.get());
  if (space_class == H5S_SCALAR) return {};
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (space_class != H5S_SIMPLE || rank < 0) {
    throw InputError(path + ": dataset '" + name + "' has no readable shape");
  }
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return std::vector<int64_t>(dims.begin(), dims.end());
}

bool is_bfloat16(hid_t dataset) {
  if (H5Aexists(dataset, kDtypeAttribute) <= 0) return false;
  H5Handle attribute(H5Aopen(dataset, kDtypeAttribute, H5P_DEFAULT), H5Aclose);
  H5Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0) return false;
  std::string value(H5Tget_size(type.get()), '\0');
  if (H5Aread(attribute.get(), type.get(), value.data()) < 0) return false;
  return value.substr(0, value.find('\0')) == "bfloat16";
}

torch::Tensor read_dataset(hid_t dataset, const std::string& name, const std::string& path) {
  const torch::ScalarType dtype = dtype_of(dataset, name, path);
  torch::Tensor tensor = torch::empty(shape_of(dataset, name, path), torch::dtype(dtype));
  if (tensor.numel() > 0) {
    check(H5Dread(dataset, memory_type_of(dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, tensor.data_ptr()),
          path + ": cannot read dataset '" + name + "' (truncated or corrupt file?)");
  }
  return is_bfloat16(dataset) ? tensor.to(torch::kBFloat16) : tensor;
}

// Walks one group's links for H5Literate; `prefix` is the group's full name.
struct GroupVisitor {
  const std::string& path;
  std::string prefix;
  std::map<std::string, torch::Tensor>& tensors;
  std::string& error;  // exceptions must not cross HDF5's C frames; the message waits here
};

herr_t visit_link(hid_t group, const char* link_name, const H5L_info_t*, void* data) {
  auto& visitor = *static_cast<GroupVisitor*>(data);
  const std::string name = visitor.prefix.empty() ? link_name : visitor.prefix + "/" + link_name;
  try {
    H5Handle object(H5Oopen(group, link_name, H5P_DEFAULT), H5Oclose);
    if (!object.valid()) throw InputError(visitor.path + ": cannot open object '" + name + "'");
    switch (H5Iget_type(object.get())) {
      case H5I_GROUP: {
        GroupVisitor child{visitor.path, name, visitor.tensors, visitor.error};
        return H5Literate(object.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, visit_link, &child);
      }
      case H5I_DATASET:
        visitor.tensors[name] = read_dataset(object.get(), name, visitor.path);
        return 0;
      default:
        return 0;  // committed datatypes and the like carry no tensor
    }
  } catch (const std::exception& e) {
    visitor.error = e.what();
    return -1;
  }
}

}  // namespace

struct TensorFileWriter::File {
  QuietHdf5Errors quiet;
  H5Handle handle;
  std::set<std::string> groups, datasets;
};

TensorFileWriter::TensorFileWriter(const std::string& path)
    : path_(path), temporary_(temporary_path_for(path)) {
  // In place: the quiet-errors guard must not be copied.
  file_.reset(new File{
      {},
      H5Handle(H5Fcreate(temporary_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose)});
  if (!file_->handle.valid()) throw InputError(temporary_ + ": cannot create HDF5 file");
}

TensorFileWriter::~TensorFileWriter() {
  if (!file_) return;
  file_.reset();
  std::error_code ignored;
  std::filesystem::remove(temporary_, ignored);
}

// Creates the groups `name` needs, refusing a name that would make one object
// both a dataset and a group.
void TensorFileWriter::create_groups(const std::string& name) {
  const std::vector<std::string> parts = split_name(name);
  const auto clash = [&](const std::string& group) {
    return std::invalid_argument("tensor names '" + group + "' and '" + name +
                                 "' clash in one HDF5 file: '" + group +
                                 "' would be both a dataset and a group");
  };
  if (file_->groups.count(name)) throw clash(name);
  std::string prefix;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    prefix += (i ? "/" : "") + parts[i];
    if (file_->datasets.count(prefix)) throw clash(prefix);
    if (!file_->groups.insert(prefix).second) continue;
    H5Handle gcpl = untimed_plist(H5P_GROUP_CREATE);
    H5Handle group(
        H5Gcreate2(file_->handle.get(), prefix.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT),
        H5Gclose);
    if (!group.valid()) throw InputError(temporary_ + ": cannot create group '" + prefix + "'");
  }
}

void TensorFileWriter::add(const std::string& name, const torch::Tensor& tensor) {
  stored_type(tensor.scalar_type(), name);
  if (!file_->datasets.insert(name).second) {
    throw std::invalid_argument("tensor '" + name + "' written twice to " + path_);
  }
  create_groups(name);
  write_dataset(file_->handle.get(), name, tensor, temporary_);
}

void TensorFileWriter::commit() {
  check(H5Fflush(file_->handle.get(), H5F_SCOPE_LOCAL), temporary_ + ": cannot flush HDF5 file");
  file_.reset();
  commit_durably(temporary_, path_);
}

void write_tensor_file(const std::string& path,
                       const std::map<std::string, torch::Tensor>& tensors) {
  for (const auto& [name, tensor] : tensors) {
    split_name(name);
    stored_type(tensor.scalar_type(), name);
  }
  TensorFileWriter writer(path);
  for (const auto& [name, tensor] : tensors) writer.add(name, tensor);
  writer.commit();
}

std::map<std::string, torch::Tensor> read_tensor_file(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) {
    throw InputError(path + ": tensor file does not exist");
  }
  QuietHdf5Errors quiet;
  H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) {
    throw InputError(path + ": not a readable HDF5 file (truncated or corrupt?)");
  }
  std::map<std::string, torch::Tensor> tensors;
  std::string error;
  GroupVisitor root{path, "", tensors, error};
  if (H5Literate(file.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, visit_link, &root) < 0) {
    throw InputError(error.empty() ? path + ": cannot list contents (truncated or corrupt file?)"
                                   : error);
  }
  return tensors;
}

}  // namespace moelab
