// The safetensors file format (Hugging Face's weights files), read and written
// here: no maintained C++ implementation is packaged for Debian or PyPI.
//   8 bytes   N, the header's length (little-endian uint64)
//   N bytes   JSON: {"<name>": {"dtype": "F32", "shape": [...], "data_offsets": [b, e]},
//             ..., "__metadata__": {"<key>": "<string>"}}, padded with spaces
//   the rest  every tensor's bytes, row-major little-endian, at [b, e) of this part
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace moelab {

struct SafetensorsEntry {
  std::string name;
  torch::Dtype dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets in the data
};

// One file: its header is read and checked on opening (known dtypes, sizes
// that fit, offsets that tile the data exactly; InputErrors naming the file
// and tensor), its tensors one at a time, so that reading a model never holds
// more than the tensor asked for.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  // The tensor in its stored dtype (float32, float16 or bfloat16).
  torch::Tensor read(const std::string& name) const;

 private:
  std::string path_;
  uint64_t data_start_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
};

// bfloat16 tensors as BF16, the others as F32, in name order; written
// atomically, one tensor at a time.
void write_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Every tensor as float32.
std::map<std::string, torch::Tensor> read_safetensors(const std::string& path);

}  // namespace moelab
