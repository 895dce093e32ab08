// Named tensors in one HDF5 file, readable with h5py as f[name][...]. A '/' in a
// name makes HDF5 groups ("layers.0.wq.weight/exp_avg" is dataset "exp_avg" in
// group "layers.0.wq.weight"), so one file cannot hold both "x" and "x/y".
// Stored types: float32, float64, int32, int64, uint8 as themselves; bfloat16 as float32
// (exact, bf16 is a subset) with the attribute torch_dtype = "bfloat16" so reading
// gives bfloat16 back. 0-d tensors are HDF5 scalars.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>

namespace moelab {

// Written under a temporary name, fsynced and renamed onto `path`. The bytes depend
// only on the tensors (no timestamps), so equal checkpoints are equal files.
// Throws std::invalid_argument for a name or dtype that cannot be stored (a
// programming error), InputError when the file cannot be written.
void write_tensor_file(const std::string& path,
                       const std::map<std::string, torch::Tensor>& tensors);

// The same file written one tensor at a time, so that a caller never holds
// more than the tensor it adds (an import of a model larger than memory
// allows twice over). Nothing appears at `path` before commit(); a writer
// destroyed uncommitted removes its temporary file.
class TensorFileWriter {
 public:
  explicit TensorFileWriter(const std::string& path);
  ~TensorFileWriter();
  TensorFileWriter(const TensorFileWriter&) = delete;
  TensorFileWriter& operator=(const TensorFileWriter&) = delete;
  // The errors of write_tensor_file, for this tensor.
  void add(const std::string& name, const torch::Tensor& tensor);
  void commit();

 private:
  void create_groups(const std::string& name);
  struct File;
  std::string path_, temporary_;
  std::unique_ptr<File> file_;
};

// Every dataset in the file, as CPU tensors keyed by full path without the leading
// '/'. A missing, truncated or corrupt file, or a dataset of a type this format
// never writes, is an InputError naming the file.
std::map<std::string, torch::Tensor> read_tensor_file(const std::string& path);

}  // namespace moelab
