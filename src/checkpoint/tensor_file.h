// Named tensors in one HDF5 file, readable with h5py as f[name][...]. A '/' in a
// name makes HDF5 groups ("layers.0.wq.weight/exp_avg" is dataset "exp_avg" in
// group "layers.0.wq.weight"), so one file cannot hold both "x" and "x/y".
// Stored types: float32, float64, int32, int64, uint8 as themselves; bfloat16 as float32
// (exact, bf16 is a subset) with the attribute torch_dtype = "bfloat16" so reading
// gives bfloat16 back. 0-d tensors are HDF5 scalars.
//
// Writing is split in two: the file's HDF5 structure (groups, datasets, their
// space allocated) is made by the calling thread, and the values are written
// into that space by plain POSIX writes, which may run on another thread. The
// HDF5 library holds one lock for all its calls; a long H5Dwrite on a
// background thread would hold it against the data loader's reads.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/hdf5_handle.h"

namespace moelab {

// A tensor file whose structure exists under a temporary name and whose values
// are still to be written (write_tensor_values).
struct TensorFileLayout {
  struct Extent {
    int64_t offset = 0;  // of the dataset's values in the file
    at::Tensor values;   // contiguous, on the CPU, in the stored type
  };
  std::string temporary;  // the file being written
  std::string path;       // where it is published
  std::vector<Extent> extents;
  int64_t bytes() const;
};

// Makes the file's structure under temporary_path_for(path). The values are the
// tensors themselves where they already are contiguous CPU tensors of their
// stored type (no copy: they must stay unchanged until written), else copies.
// std::invalid_argument for a name or dtype that cannot be stored (a programming
// error), std::runtime_error with the system's reason when the file cannot be made.
TensorFileLayout create_tensor_file(const std::string& path,
                                    const std::map<std::string, at::Tensor>& tensors);

// Writes the values (reporting each chunk's bytes to `progress`), fsyncs the file
// and renames it onto its path. No HDF5 call: safe on any thread. On failure
// (std::runtime_error naming the file and the system's reason: "No space left on
// device") the temporary file is removed.
void write_tensor_values(const TensorFileLayout& layout,
                         const std::function<void(int64_t bytes)>& progress = nullptr);

// Both: the bytes depend only on the tensors (no timestamps), so equal
// checkpoints are equal files.
void write_tensor_file(const std::string& path, const std::map<std::string, at::Tensor>& tensors);

// The same file written one tensor at a time, so that a caller never holds more
// than the tensor it adds (an import of a model larger than memory allows twice
// over): each add() makes the dataset and writes its values, converted a block
// at a time. Nothing appears at `path` before commit(); a writer destroyed
// uncommitted removes its temporary file. Errors as create_tensor_file's and
// write_tensor_values' (a name written twice is std::invalid_argument).
class TensorFileWriter {
 public:
  explicit TensorFileWriter(const std::string& path);
  ~TensorFileWriter();
  TensorFileWriter(const TensorFileWriter&) = delete;
  TensorFileWriter& operator=(const TensorFileWriter&) = delete;
  void add(const std::string& name, const at::Tensor& tensor);
  void commit();

 private:
  struct File;
  std::string path_, temporary_;
  std::unique_ptr<File> file_;
};

// One dataset of a tensor file: its name (full path without the leading '/'),
// shape and the dtype reading gives.
struct TensorFileEntry {
  std::string name;
  std::vector<int64_t> shape;
  at::ScalarType dtype;
};

// Reads parts of a tensor file without loading the rest. A missing, truncated or
// corrupt file, or a dataset of a type this format never writes, is an
// InputError naming the file.
class TensorFileReader {
 public:
  explicit TensorFileReader(const std::string& path);
  const std::string& path() const { return path_; }
  // Every dataset, in name order.
  std::vector<TensorFileEntry> datasets() const;
  // Elements [begin, begin + out.numel()) of dataset `name`, flattened, into
  // `out` (contiguous; values converted to its dtype). Only the dataset's rows
  // that hold them are read (an HDF5 hyperslab).
  void read_range(const std::string& name, int64_t begin, at::Tensor out) const;

 private:
  std::string path_;
  Hdf5Handle file_;
};

// Every dataset in the file, as CPU tensors keyed by name.
std::map<std::string, at::Tensor> read_tensor_file(const std::string& path);

}  // namespace moelab
