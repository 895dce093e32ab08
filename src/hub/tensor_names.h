// Which moelab checkpoint tensor is which Hugging Face tensor, for any family
// (family.h). Names come from the config, not from the model's modules, so
// they follow the checkpoint's names (layers.L.moe.experts.E.w1, ...) whatever
// the in-memory layout. Experts are listed by global id.
//
//   moelab                       Hugging Face (model.layers.L.)
//   attn.wq, wk, wv, wo          self_attn.{q,k,v,o}_proj
//   attn.q_norm, k_norm          self_attn.{q,k}_norm
//   ffn.w1, w3, w2               mlp.{gate,up,down}_proj
//   moe.router                   <moe_module>.gate
//   moe.experts.E.w1, w3, w2     <moe_module>.experts.E.<expert_projections>
//   moe.shared.w1, w3, w2        mlp.shared_expert.{gate,up,down}_proj (Qwen2-MoE)
//   moe.shared_gate              mlp.shared_expert_gate (Qwen2-MoE)
//   attn.bq, bk, bv              self_attn.{q,k,v}_proj.bias (Qwen2, Qwen2-MoE)
//
// A family that always has a tensor the model lacks gets what computes the
// model: zero q/k/v biases; for an ungated shared expert, a zero gate
// (sigmoid(0) = 1/2 for every token) and the down projection times 2, both
// scalings powers of two, so exact in floating point.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "hub/family.h"

namespace moelab {

struct HfLink {
  std::string ours;            // moelab checkpoint name
  std::string theirs;          // Hugging Face name
  std::vector<int64_t> shape;  // of both
  double scale = 1.0;          // theirs = scale * ours
};

// A Hugging Face tensor with no moelab counterpart: moelab's model is the
// family's with this tensor zero.
struct HfZero {
  std::string theirs;
  std::vector<int64_t> shape;
};

struct HfTensorMap {
  std::vector<HfLink> links;
  std::vector<HfZero> zeros;
};

HfTensorMap hf_tensor_map(const Config& cfg, const HubFamily& family);

}  // namespace moelab
