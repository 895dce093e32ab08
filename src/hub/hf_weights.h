// The weights of a Hugging Face folder, read one tensor at a time:
// model.safetensors, or the shards model.safetensors.index.json maps each
// tensor to (every listed tensor must be in its shard, and no tensor in two).
// Experts fused as transformers 5 holds them in memory, and as a saved
// state_dict carries them (<layer>.mlp.experts.gate_up_proj [E, 2I, d], gate
// rows first, and <layer>.mlp.experts.down_proj [E, d, I]), are seen under the
// per-expert names of the family's Hub folders.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "hub/family.h"
#include "hub/safetensors.h"

namespace moelab {

class HfWeights {
 public:
  // Reads the headers only.
  HfWeights(const std::string& dir, const HubFamily& family);
  // Every tensor the folder holds, by the family's name, and its shape.
  const std::map<std::string, std::vector<int64_t>>& shapes() const { return shapes_; }
  // One tensor in its stored dtype, float16 as float32 (moelab computes in
  // neither; bfloat16 stays bfloat16, so a bf16 model imports at its size).
  torch::Tensor read(const std::string& name);

 private:
  // Where a name's tensor lies: a whole tensor, or rows of one fused expert.
  struct Source {
    size_t file = 0;
    std::string tensor;
    int64_t expert = -1;  // >= 0: row block [row, row + rows) of expert `expert`
    int64_t row = 0, rows = 0;
  };
  void add_fused_experts(const std::string& layer, const HubFamily& family);

  std::vector<SafetensorsFile> files_;
  std::map<std::string, Source> sources_;
  std::map<std::string, std::vector<int64_t>> shapes_;
  std::string cached_name_;  // the last fused tensor read, kept for its other experts
  torch::Tensor cached_;
};

// The files of a folder: model.safetensors or the index's shards, checked as above.
std::vector<SafetensorsFile> hf_weight_files(const std::string& dir);

// Every tensor of a folder as float32, as stored (experts not unfused).
std::map<std::string, torch::Tensor> read_hf_weights(const std::string& dir);

}  // namespace moelab
