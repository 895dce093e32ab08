// Reading tensor files (tensor_file.h): TensorFileReader and read_tensor_file.
#include <torch/torch.h>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/tensor_file.h"
#include "checkpoint/tensor_file_hdf5.h"
#include "util/error.h"

namespace moelab {
namespace {

void check_read(herr_t status, const std::string& what) {
  if (status < 0) throw InputError(what);
}

torch::ScalarType dtype_of(hid_t dataset, const std::string& name, const std::string& path) {
  Hdf5Handle type(H5Dget_type(dataset), H5Tclose);
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
  Hdf5Handle space(H5Dget_space(dataset), H5Sclose);
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
  Hdf5Handle attribute(H5Aopen(dataset, kDtypeAttribute, H5P_DEFAULT), H5Aclose);
  Hdf5Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0) return false;
  std::string value(H5Tget_size(type.get()), '\0');
  if (H5Aread(attribute.get(), type.get(), value.data()) < 0) return false;
  return value.substr(0, value.find('\0')) == "bfloat16";
}

// Walks one group's links for H5Literate; `prefix` is the group's full name.
struct GroupVisitor {
  const std::string& path;
  std::string prefix;
  std::vector<TensorFileEntry>& datasets;
  std::string& error;  // exceptions must not cross HDF5's C frames; the message waits here
};

herr_t visit_link(hid_t group, const char* link_name, const H5L_info_t*, void* data) {
  auto& visitor = *static_cast<GroupVisitor*>(data);
  const std::string name = visitor.prefix.empty() ? link_name : visitor.prefix + "/" + link_name;
  try {
    Hdf5Handle object(H5Oopen(group, link_name, H5P_DEFAULT), H5Oclose);
    if (!object.valid()) throw InputError(visitor.path + ": cannot open object '" + name + "'");
    switch (H5Iget_type(object.get())) {
      case H5I_GROUP: {
        GroupVisitor child{visitor.path, name, visitor.datasets, visitor.error};
        return H5Literate(object.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, visit_link, &child);
      }
      case H5I_DATASET: {
        const torch::ScalarType stored = dtype_of(object.get(), name, visitor.path);
        visitor.datasets.push_back({name, shape_of(object.get(), name, visitor.path),
                                    is_bfloat16(object.get()) ? torch::kBFloat16 : stored});
        return 0;
      }
      default:
        return 0;  // committed datatypes and the like carry no tensor
    }
  } catch (const std::exception& e) {
    visitor.error = e.what();
    return -1;
  }
}

}  // namespace

TensorFileReader::TensorFileReader(const std::string& path) : path_(path) {
  if (!std::filesystem::is_regular_file(path)) {
    throw InputError(path + ": tensor file does not exist");
  }
  QuietHdf5Errors quiet;
  file_ = Hdf5Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file_.valid()) {
    throw InputError(path + ": not a readable HDF5 file (truncated or corrupt?)");
  }
}

std::vector<TensorFileEntry> TensorFileReader::datasets() const {
  QuietHdf5Errors quiet;
  std::vector<TensorFileEntry> datasets;
  std::string error;
  GroupVisitor root{path_, "", datasets, error};
  if (H5Literate(file_.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, visit_link, &root) < 0) {
    throw InputError(error.empty() ? path_ + ": cannot list contents (truncated or corrupt file?)"
                                   : error);
  }
  return datasets;
}

// The rows of dim 0 that hold the range are read whole (one hyperslab), then
// the range is taken from them: for the 1-D datasets of distributed
// checkpoints, exactly the range.
void TensorFileReader::read_range(const std::string& name, int64_t begin, torch::Tensor out) const {
  QuietHdf5Errors quiet;
  const int64_t count = out.numel();
  if (count == 0) return;
  Hdf5Handle dataset(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dataset.valid()) throw InputError(path_ + ": has no dataset '" + name + "'");
  const std::string what =
      path_ + ": cannot read dataset '" + name + "' (truncated or corrupt file?)";
  const torch::ScalarType stored = dtype_of(dataset.get(), name, path_);
  std::vector<int64_t> shape = shape_of(dataset.get(), name, path_);
  int64_t numel = 1, row = 1;
  for (size_t d = 0; d < shape.size(); ++d) (d == 0 ? numel : row) *= shape[d];
  numel *= row;
  if (begin < 0 || begin + count > numel) {
    throw InputError(path_ + ": dataset '" + name + "' has " + std::to_string(numel) +
                     " elements, not the range [" + std::to_string(begin) + ", " +
                     std::to_string(begin + count) + ")");
  }
  Hdf5Handle file_space(H5Dget_space(dataset.get()), H5Sclose);
  int64_t first_row = 0, rows = 1;
  if (!shape.empty()) {
    first_row = begin / row;
    rows = (begin + count + row - 1) / row - first_row;
    std::vector<hsize_t> start(shape.size(), 0), extent(shape.begin(), shape.end());
    start[0] = hsize_t(first_row);
    extent[0] = hsize_t(rows);
    check_read(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr,
                                   extent.data(), nullptr),
               what);
  }
  const hsize_t elements = hsize_t(rows * row);
  Hdf5Handle memory_space(H5Screate_simple(1, &elements, nullptr), H5Sclose);
  const bool direct = rows * row == count && out.scalar_type() == stored && out.is_contiguous() &&
                      out.device().is_cpu();
  torch::Tensor buffer = direct ? out : torch::empty({rows * row}, torch::dtype(stored));
  check_read(H5Dread(dataset.get(), memory_type_of(stored), memory_space.get(), file_space.get(),
                     H5P_DEFAULT, buffer.data_ptr()),
             what);
  if (!direct) out.copy_(buffer.narrow(0, begin - first_row * row, count).view(out.sizes()));
}

std::map<std::string, torch::Tensor> read_tensor_file(const std::string& path) {
  const TensorFileReader reader(path);
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& info : reader.datasets()) {
    torch::Tensor tensor = torch::empty(info.shape, torch::dtype(info.dtype));
    reader.read_range(info.name, 0, tensor.view(-1));
    tensors[info.name] = tensor;
  }
  return tensors;
}

}  // namespace moelab
