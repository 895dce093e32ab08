// Model surgery shared by `moelab upcycle` and `moelab convert`: a dense run's
// checkpoint in, the weights of an MoE whose every FFN became routed experts
// out, written as the start of a new run.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "convert/ffn_split.h"

namespace moelab {

using TensorMap = std::map<std::string, torch::Tensor>;

struct DenseCheckpoint {
  std::string dir;
  Config cfg;  // from its meta.json
  TensorMap tensors;
};

// Any moelab checkpoint of a dense model (a run's step_<n>, or one written by
// `moelab import`), its config with `overrides` ("key=value", checked as
// `train --set` checks them: data.dir for dot's calibration and the new run,
// model.seq_len for an import's long context); InputError naming the folder
// for an MoE or a folder without a config.
DenseCheckpoint load_dense_checkpoint(const std::string& dir,
                                      const std::vector<std::string>& overrides = {});

// Layer `layer`'s FFN weights (float32 copies).
FfnWeights dense_ffn(const DenseCheckpoint& dense, int64_t layer);

// The dense config with moe.enabled, `experts` experts of width `d_expert`,
// top-k `top_k`, and what else a caller set in `moe` (gate, balance, ...).
Config moe_config_from_dense(const Config& dense, MoeConfig moe, int64_t experts, int64_t top_k,
                             int64_t d_expert);

// The MoE's weights: embedding, attention, norms and head copied from the
// dense model; layer l's experts from make_experts(l, its FFN); each router
// drawn from normal(0, router_std) keyed by (moe_cfg.train.seed, its name);
// routing biases zero. Every tensor the MoE model has, by its name.
using MakeExperts = std::function<std::vector<FfnWeights>(int64_t layer, const FfnWeights& ffn)>;
TensorMap moe_weights_from_dense(const DenseCheckpoint& dense, const Config& moe_cfg,
                                 const MakeExperts& make_experts, double router_std);

}  // namespace moelab
