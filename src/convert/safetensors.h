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

namespace moelab {

// Float32 tensors (others are converted), in name order; written atomically.
void write_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Every tensor as float32 (F32, F16 and BF16 are read; other dtypes, a short or
// inconsistent file are InputErrors naming the file and tensor).
std::map<std::string, torch::Tensor> read_safetensors(const std::string& path);

}  // namespace moelab
